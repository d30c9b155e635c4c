"""Recall and false-finding rate of Stop-QA's `count_mismatch` and `unacknowledged_tool_error` checks on the
labelled phrasings of tests/support/qa_phrasings.py, per category and over all, as markdown tables, then over
the held-out batch alone (phrasings written after the checks were widened, before they were run).

Usage: `python scripts/bench_qa_checks.py [--misses]` (with `--misses`, the cases behind each miss and false
finding). Pure CPU, under a second.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from replay.qa.check_config import load_config  # noqa: E402
from replay.qa.checks import count_findings, unacknowledged_findings  # noqa: E402
from tests.support.qa_phrasings import COUNT_CASES, ERROR_CASES, score_counts, score_errors, table  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--misses", action="store_true", help="list the cases missed and flagged wrongly")
    args = parser.parse_args(argv)
    rules = load_config(ROOT / "configs" / "qa" / "checks.toml")[0]
    for title, tallies, held in (
            ("count_mismatch", score_counts(count_findings, rules),
             score_counts(count_findings, rules, [c for c in COUNT_CASES if c.batch == "held-out"])),
            ("unacknowledged_tool_error", score_errors(unacknowledged_findings, rules),
             score_errors(unacknowledged_findings, rules, [c for c in ERROR_CASES if c.batch == "held-out"]))):
        every, alone = tallies[""], held[""]
        print(f"{table(title, tallies)}\n\nheld-out batch: {alone.found} of {alone.positives} found, "
              f"{alone.flagged} of {alone.negatives} flagged\n")
        if args.misses:
            print("\n".join([*(f"missed: {m!r}" for m in every.misses), *(f"flagged: {f!r}" for f in every.false)])
                  + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
