"""Recall and false flags of curation's near-duplicate rule (core/near_duplicates.py) on planted
near-copies of the demo suite's 84 decisions (tests/support/near_copies.py: an id changed, a sentence reworded,
whitespace changed, all three), as a markdown table for Tülu 3's setting (8-grams, > 50%) and beside it.

Usage: `python scripts/bench_near_duplicates.py [--seed 0] [--misses]`. Pure CPU, a few seconds.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from core.near_duplicates import NGRAM, THRESHOLD  # noqa: E402
from tests.support.near_copies import EDITS, measure  # noqa: E402

SETTINGS = ((NGRAM, THRESHOLD), (8, 0.3), (6, 0.5), (4, 0.5))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=0, help="the planted edits' seed")
    parser.add_argument("--misses", action="store_true", help="list the near-copies missed and the pairs flagged")
    args = parser.parse_args(argv)
    print("| n-gram | threshold | " + " | ".join(f"recall: {k}" for k in EDITS) + " | other decisions flagged |")
    print("|---" * (len(EDITS) + 3) + "|")
    for n, threshold in SETTINGS:
        result = measure(args.seed, n, threshold)
        cells = [f"{t.found}/{t.planted} ({t.found / t.planted:.0%})" for t in result.recall.values()]
        print(f"| {n} | > {threshold:.0%} | " + " | ".join(cells)
              + f" | {result.flagged}/{result.unrelated} ({result.flagged / result.unrelated:.2%}) |")
        if args.misses and (n, threshold) == (NGRAM, THRESHOLD):
            misses = [m for t in result.recall.values() for m in t.misses]
            print("\n".join([*misses, *(f"flagged: decision {a} as a copy of {b}" for a, b in result.false)]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
