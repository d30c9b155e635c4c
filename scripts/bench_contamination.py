"""Recall and false flags of the gate's contamination check (replay/analysis/contamination.py: curation's
near-duplicate rule applied to a candidate's training rows) on planted rows of known overlap with the demo
suite's 84 decisions (tests/support/planted_overlap.py), as a markdown table.

Usage: `python scripts/bench_contamination.py [--seed 0]`. Pure CPU, a few seconds.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from core.near_duplicates import NGRAM, THRESHOLD  # noqa: E402
from tests.support.planted_overlap import measure  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=0, help="the planted rows' seed")
    args = parser.parse_args(argv)
    print(f"word {NGRAM}-grams, a decision reached when a row covers > {THRESHOLD:.0%} of its own")
    print("| overlap (share of the decision's words the row copies) | recall | other-task decisions flagged |")
    print("|---|---|---|")
    for row in measure(args.seed):
        print(f"| {row.overlap:.0%} | {row.found}/{row.planted} ({row.found / row.planted:.0%}) | "
              f"{row.flagged}/{row.unrelated} ({row.flagged / row.unrelated:.2%}) |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
