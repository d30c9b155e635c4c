"""Redaction recall and over-redaction on the labelled corpus (tests/replay/privacy/data/redaction_corpus.jsonl).

Per pseudonym type: how many labelled values `replay.privacy.redact.find` covers whole (recall), and how
many with their own type; per kind of look-alike (ids, dates, amounts, versions, numbers failing a
check digit): how many it touches (over-redaction); and the characters it changes outside every
labelled span. With `--misses`, the values missed and the look-alikes changed are listed too.

Usage: `python scripts/bench_redact.py [--misses]`. Pure CPU, a few seconds.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from replay.privacy.redact import find  # noqa: E402
from tests.support.redaction_corpus import load, score, table  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--misses", action="store_true", help="list the values missed and the look-alikes changed")
    args = parser.parse_args(argv)
    cases = load()
    began = time.perf_counter()
    result = score(cases, find)
    elapsed = time.perf_counter() - began
    print(table(result))
    held = score([case for case in cases if case.batch == "held-out"], find)
    redacted = sum(t.hit for t in held.labelled.values())
    changed = sum(t.hit for t in held.lookalikes.values())
    print(f"held-out batch: {redacted} of {sum(t.total for t in held.labelled.values())} labelled values redacted, "
          f"{changed} of {sum(t.total for t in held.lookalikes.values())} look-alikes changed")
    print(f"{len(cases)} cases scanned in {elapsed:.2f} s")
    if args.misses:
        known = {item.value: item.missed for case in cases for item in case.values if item.missed}
        for kind, tally in sorted(result.labelled.items()):
            for value in tally.misses:
                print(f"missed {kind}: {value!r}" + (f" (known: {known[value]})" if value in known else ""))
        for kind, tally in sorted(result.lookalikes.items()):
            for value in tally.misses:
                print(f"changed {kind}: {value!r}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
