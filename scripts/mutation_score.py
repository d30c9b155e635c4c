"""Per-module mutation scores of the last `make mutate` (mutmut's results under mutants/), as a table.

    python scripts/mutation_score.py [--survivors]

A module's score is killed / judged: killed by a failing test, a timeout (a mutant that loops) or
the type checker; judged excludes mutants not run yet. `--survivors` lists the survivors' names
(`mutmut show NAME` prints each one's diff); docs/mutation.md says why each remaining one is
equivalent.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import defaultdict
from pathlib import Path

# mutmut's exit codes (mutmut/stats.py): a failing test, an internal pytest error, timeouts, the type checker.
KILLED = {1, 3, 36, -24, 24, 152, 255, 37}
SURVIVED = {0}
NOT_RUN = {None, 2}
# The decision modules as BENCHMARKS.md reports them: the gates package is one row.
GROUPS = {"replay/analysis/gates/": "replay/analysis/gates/"}


def module_of(meta: Path, root: Path) -> str:
    path = meta.relative_to(root).as_posix().removesuffix(".meta")
    return next((group for prefix, group in GROUPS.items() if path.startswith(prefix)), path)


def scores(root: Path) -> dict[str, dict[str, list[str]]]:
    """module → outcome (killed, survived, no tests, not run, other) → mutant names."""
    found: dict[str, dict[str, list[str]]] = defaultdict(lambda: defaultdict(list))
    for meta in sorted(root.rglob("*.py.meta")):
        codes = json.loads(meta.read_text())["exit_code_by_key"]
        for name, code in codes.items():
            outcome = ("killed" if code in KILLED else "survived" if code in SURVIVED
                       else "not run" if code in NOT_RUN else "no tests" if code in (5, 33) else "other")
            found[module_of(meta, root)][outcome].append(name)
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", type=Path, default=Path("mutants"))
    parser.add_argument("--survivors", action="store_true", help="list every surviving mutant")
    args = parser.parse_args(argv)
    if not args.root.is_dir():
        print(f"{args.root}: no mutation results (run `make mutate` first)", file=sys.stderr)
        return 2
    table = scores(args.root)
    print("| module | mutants | killed | survived | no tests | not run | score |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    totals = [0, 0, 0, 0, 0]
    for module, by in sorted(table.items()):
        counts = [sum(len(v) for v in by.values()), len(by["killed"]), len(by["survived"]),
                  len(by["no tests"]), len(by["not run"])]
        totals = [t + c for t, c in zip(totals, counts, strict=True)]
        print(f"| `{module}` | {' | '.join(map(str, counts))} | {_score(counts)} |")
    print(f"| all | {' | '.join(map(str, totals))} | {_score(totals)} |")
    if args.survivors:
        for module, by in sorted(table.items()):
            for name in sorted(by["survived"] + by["no tests"]):
                print(f"{module}\t{name}")
    return 0


def _score(counts: list[int]) -> str:
    total, killed, _, _, not_run = counts
    judged = total - not_run
    return f"{100 * killed / judged:.1f}%" if judged else "—"


if __name__ == "__main__":
    sys.exit(main())
