"""Redaction recall and over-redaction on the labelled corpus (tests/replay/privacy/data/redaction_corpus.jsonl),
and on the planted set of structured tool results (tests/support/structured_people.py).

Per pseudonym type: how many labelled values `replay.privacy.redact.find` covers whole (recall), and how
many with their own type; per kind of look-alike (ids, dates, amounts, versions, numbers failing a
check digit): how many it touches (over-redaction); and the characters it changes outside every
labelled span. Then, per language, how many person names planted under person keys (`customer`, `to`,
`first_name`, `name` in a contact) `Pseudonymizer.value` removes from a tool result's JSON text, and per
kind of look-alike under the same keys (products, organisations, teams, ids, enum values, places, dates)
how many it changes. With `--misses`, the values missed and the look-alikes changed are listed too.

Usage: `python scripts/bench_redact.py [--misses]`. Pure CPU, a few seconds.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from replay.privacy.redact import Pseudonymizer, find  # noqa: E402
from tests.support import structured_people  # noqa: E402
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
    for title, records in (("", structured_people.planted()),
                           (", held-out names only", structured_people.planted(200, 66, ["held-out"]))):
        began = time.perf_counter()
        structured = structured_people.score(records, Pseudonymizer(b"bench" * 8).value)
        elapsed = time.perf_counter() - began
        print(f"\nperson names in structured tool results ({len(records)} records, seeded{title}):\n")
        print(structured_people.table(structured))
        print(f"{len(records)} records redacted in {elapsed:.2f} s")
        if args.misses:
            for group in (structured.languages, structured.lookalikes):
                for kind, tally in sorted(group.items()):
                    for value in sorted(set(tally.misses)):
                        print(f"{'missed' if group is structured.languages else 'changed'} {kind}: {value!r}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
