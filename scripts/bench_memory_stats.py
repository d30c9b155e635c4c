"""`worker-replay memory stats` on 1,000 workspaces, as a ratio of reading every file of the same fleet once.

The fleet is the test fleet's four shapes (tests/replay/memory/test_counters.py) spread over three roots, plus
a provenance log with dated histories in every workspace that has a memory tree, so churn is counted too.
The baseline opens and reads every file of every workspace (the least any counter over the files costs);
each side runs three times, alternating, and the medians are compared (ratio = baseline / stats: 1.0 means
the counters cost no more than reading the files).

    python scripts/bench_memory_stats.py [--workspaces 1000] [--keep DIR]
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from replay.memory.counters import fleet_stats  # noqa: E402
from tests.replay.memory.test_counters import PLANS, write_workspace  # noqa: E402

ROOTS = 3
RUNS = 3
HISTORY = "\n".join(f"## lc:rule-{i}\n**History:** 2026-{1 + i % 12:02d}-{1 + i % 28:02d} added\n" for i in range(40))


def generate(fleet: Path, workspaces: int) -> list[Path]:
    roots = [fleet / f"host-{'ABC'[r]}" for r in range(ROOTS)]
    for w in range(workspaces):
        path = roots[w % ROOTS] / f"ws-{w:04d}"
        write_workspace(path, PLANS[w % len(PLANS)])
        log = path / "memory" / "reference" / "corrections-log.md"
        if log.is_file():
            log.write_text(HISTORY + log.read_text())
    return roots


def read_everything(roots: list[Path]) -> int:
    return sum(len(f.read_bytes()) for root in roots for f in root.rglob("*") if f.is_file())


def timed(work) -> float:  # type: ignore[no-untyped-def]
    started = time.perf_counter()
    work()
    return time.perf_counter() - started


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workspaces", type=int, default=1000)
    parser.add_argument("--keep", type=Path, help="generate the fleet here and keep it")
    args = parser.parse_args()
    fleet = args.keep or Path(tempfile.mkdtemp(prefix="memory-fleet-"))
    try:
        roots = generate(fleet, args.workspaces)
        plain, stats = [], []
        for _ in range(RUNS):
            plain.append(timed(lambda: read_everything(roots)))
            stats.append(timed(lambda: fleet_stats(roots)))
        counted = fleet_stats(roots)
        a, b = statistics.median(plain), statistics.median(stats)
        print(f"{args.workspaces:,} workspaces, {counted.totals['rules_with_ids']:,} rules with ids, "
              f"{counted.totals['memory_files']:,} memory files, {sum(w.added for w in counted.churn.values()):,} "
              f"rules added in {len(counted.churn)} ISO week(s)")
        print(f"read every file once: {a:.3f} s   memory stats: {b:.3f} s ({args.workspaces / b:,.0f} workspaces/s)   "
              f"ratio (read / stats): {a / b:.2f}×")
    finally:
        if args.keep is None:
            shutil.rmtree(fleet, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
