"""`worker-replay corpus audit` on a corpus the size of the platform's (001 S1: 485,070 records), as a ratio
of a plain `json.loads` loop over the same lines (and of the same loop with msgspec, the parser the reader
uses); `worker-replay curate build` on it (the shipped S1.1 policy, shrunk to what the corpus holds), as a
ratio of the audit; and the peak memory of each.

The corpus is generated from the recorded Claude Code sessions (tests/replay/corpus/data/claude-code):
each session file copied under a fresh session id, spread over 50 workspaces, until the corpus holds the
records asked for. Each side runs in its own child process, so its peak resident memory is its own
(`ru_maxrss`; the audit's is its largest process: it counts sessions on every core the process may use).
Ratio = plain time / audit time (1.0: the audit costs no more than parsing the lines), in wall time and in CPU
time (user + system, the audit's worker processes included: what a machine busy with other work still shows).
With `--repeats N` the sides run N times, alternating, and each keeps its fastest run. `--before DIR` also runs
the audit of another checkout (`git archive COMMIT core replay | tar -x -C DIR`), so a change is timed against
the code before it under the same load.

    python scripts/bench_corpus.py [--records 485070] [--repeats 1] [--keep DIR] [--audit-only] [--before DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
FIXTURE = REPO / "tests" / "replay" / "corpus" / "data" / "claude-code" / "ws-agent" / "projects"
WORKSPACES = 50

CPU = """
def cpu():
    return sum(getattr(resource.getrusage(who), field) for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN)
               for field in ("ru_utime", "ru_stime"))
"""
PLAIN = """
import json, resource, sys, time
from pathlib import Path
{setup}
{cpu}
started, cpu_started = time.perf_counter(), cpu()
records = 0
for path in sorted(Path(sys.argv[1]).glob("*/projects/*/*.jsonl")):
    with path.open("rb") as handle:
        for line in handle:
            if line.strip():
                loads(line)
                records += 1
print(json.dumps({{"seconds": time.perf_counter() - started, "cpu": cpu() - cpu_started, "records": records,
                  "peak_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}}))
"""
LOADS = {"json.loads loop": "loads = json.loads", "msgspec loop": "import msgspec\nloads = msgspec.json.decode"}
AUDIT = """
import json, os, resource, sys, time
from pathlib import Path
from replay.corpus.audit import audit
from replay.corpus.claude_code import ClaudeCodeDir
{cpu}
started, cpu_started = time.perf_counter(), cpu()
report = audit(ClaudeCodeDir(Path(sys.argv[1])))
seconds, spent = time.perf_counter() - started, cpu() - cpu_started
peak = max(resource.getrusage(who).ru_maxrss for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN))
print(json.dumps({{"seconds": seconds, "cpu": spent, "records": report.records, "sessions": report.sessions,
                  "decisions": sum(report.decisions.values()), "workers": len(os.sched_getaffinity(0)),
                  "peak_mib": peak / 1024}}))
"""
CURATE = """
import json, resource, sys, tempfile, time
from pathlib import Path
from replay.curation.build import curate, open_inputs
root = Path(sys.argv[1])
work = Path(tempfile.mkdtemp(prefix="bench-curate-"))
keys = work / "keys.toml"
keys.write_text("[keys]\\n" + "".join(f'"{w.name}" = "{"7e" * 32}"\\n' for w in sorted(root.iterdir())))
keys.chmod(0o600)
policy = work / "policy.toml"  # the S1.1 policy's boundaries and caps, its shares cut to the class the copies hold
policy.write_text('name = "bench"\\nsize = 2500\\nshortfall = "shrink"\\nworker_models = ["worker", "worker-*"]\\n'
                  'clean_from = ["verified_action"]\\nmax_per_cluster = 12\\n[shares]\\nclean = 100\\n')
started = time.perf_counter()
manifest = curate(open_inputs([root], [], keys, policy, [], []), work / "set")
print(json.dumps({"seconds": time.perf_counter() - started, "examples": manifest.examples,
                  "refused": sum(manifest.refusals.values()),
                  "peak_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""


def generate(root: Path, records: int) -> int:
    """Copies of the fixture's sessions under fresh ids until `records` lines are written; the lines written."""
    sessions = [(p.stem, p.read_text().splitlines()) for p in sorted(FIXTURE.glob("*/*.jsonl"))]
    written, copy = 0, 0
    while written < records:
        stem, lines = sessions[copy % len(sessions)]
        fresh = str(uuid.UUID(int=copy))
        folder = root / f"ws-{copy % WORKSPACES:03d}" / "projects" / "-srv-agent"
        folder.mkdir(parents=True, exist_ok=True)
        take = lines[:records - written]
        (folder / f"{fresh}.jsonl").write_text("".join(line.replace(stem, fresh) + "\n" for line in take))
        written += len(take)
        copy += 1
    return written


def child(code: str, root: Path, tree: Path = REPO) -> dict[str, float]:
    """Run `code` in a child process, importing the project from `tree`: its result, with its own peak resident
    memory (MiB)."""
    done = subprocess.run([sys.executable, "-c", code, str(root)], capture_output=True, text=True, check=True,
                          cwd=tree)
    result: dict[str, float] = json.loads(done.stdout)
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--records", type=int, default=485_070)
    parser.add_argument("--repeats", type=int, default=1, help="run each side N times, alternating; keep the fastest")
    parser.add_argument("--keep", type=Path, help="generate the corpus here and keep it")
    parser.add_argument("--audit-only", action="store_true", help="the loops and the audit, without curate build")
    parser.add_argument("--before", type=Path, help="also run the audit of the checkout in this directory")
    args = parser.parse_args()
    root = args.keep or Path(tempfile.mkdtemp(prefix="bench-corpus-"))
    try:
        started = time.perf_counter()
        written = generate(root, args.records)
        size = sum(p.stat().st_size for p in root.rglob("*.jsonl")) / 2**20
        print(f"corpus: {written:,} records, {size:,.0f} MiB in {time.perf_counter() - started:.0f} s at {root}",
              flush=True)
        codes = {**{name: (PLAIN.format(setup=setup, cpu=CPU), REPO) for name, setup in LOADS.items()},
                 "corpus audit": (AUDIT.format(cpu=CPU), REPO),
                 **({"audit before": (AUDIT.format(cpu=CPU), args.before)} if args.before else {}),
                 **({} if args.audit_only else {"curate build": (CURATE, REPO)})}
        best: dict[str, dict[str, float]] = {}
        for _ in range(args.repeats):
            for name, (code, tree) in codes.items():
                side = child(code, root, tree)
                if name not in best or side["seconds"] < best[name]["seconds"]:
                    best[name] = side
    finally:
        if args.keep is None:
            shutil.rmtree(root, ignore_errors=True)
    plain, audited = best["json.loads loop"], best["corpus audit"]
    assert plain["records"] == audited["records"] == best["msgspec loop"]["records"] == written, (best, written)
    print(f"{'':22} {'seconds':>8} {'CPU s':>8} {'records/s':>11} {'peak MiB':>9}")
    for name, side in best.items():
        cpu = f"{side['cpu']:8.1f}" if "cpu" in side else f"{'':8}"
        print(f"{name:22} {side['seconds']:8.1f} {cpu} {written / side['seconds']:11,.0f} {side['peak_mib']:9.0f}")
    print(f"msgspec loop as a ratio of the plain loop: {plain['seconds'] / best['msgspec loop']['seconds']:.2f}x")
    print(f"audit speed as a ratio of the plain loop: {plain['seconds'] / audited['seconds']:.2f}x wall, "
          f"{plain['cpu'] / audited['cpu']:.2f}x CPU ({audited['sessions']:,.0f} sessions, "
          f"{audited['decisions']:,.0f} decisions, {audited['workers']:.0f} worker(s); load average "
          f"{os.getloadavg()[0]:.1f})")
    if before := best.get("audit before"):
        print(f"the audit before ({args.before}) as a ratio of the plain loop: "
              f"{plain['seconds'] / before['seconds']:.2f}x wall, {plain['cpu'] / before['cpu']:.2f}x CPU")
    if curated := best.get("curate build"):
        print(f"curate build's time as a multiple of the audit's: {curated['seconds'] / audited['seconds']:.2f}x "
              f"({curated['examples']:,.0f} examples, {curated['refused']:,.0f} refused: the copies repeat the same "
              "records, so all but the first are duplicates)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
