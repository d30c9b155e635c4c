"""`worker-replay corpus audit` on a corpus the size of the platform's (001 S1: 485,070 records), as a ratio
of a plain `json.loads` loop over the same lines; `worker-replay curate build` on it (the shipped S1.1 policy,
shrunk to what the corpus holds), as a ratio of the audit; and the peak memory of each.

The corpus is generated from the recorded Claude Code sessions (tests/replay/corpus/data/claude-code):
each session file copied under a fresh session id, spread over 50 workspaces, until the corpus holds the
records asked for. Each side runs in its own child process, so its peak resident memory is its own
(`ru_maxrss`). Ratio = plain time / audit time (1.0: the audit costs no more than parsing the lines).

    python scripts/bench_corpus.py [--records 485070] [--keep DIR]
"""

from __future__ import annotations

import argparse
import json
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

PLAIN = """
import json, resource, sys, time
from pathlib import Path
started = time.perf_counter()
records = 0
for path in sorted(Path(sys.argv[1]).glob("*/projects/*/*.jsonl")):
    with path.open("rb") as handle:
        for line in handle:
            if line.strip():
                json.loads(line)
                records += 1
print(json.dumps({"seconds": time.perf_counter() - started, "records": records,
                  "peak_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""
AUDIT = """
import json, resource, sys, time
from pathlib import Path
from replay.corpus.audit import audit
from replay.corpus.claude_code import ClaudeCodeDir
started = time.perf_counter()
report = audit(ClaudeCodeDir(Path(sys.argv[1])))
print(json.dumps({"seconds": time.perf_counter() - started, "records": report.records, "sessions": report.sessions,
                  "decisions": sum(report.decisions.values()),
                  "peak_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
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


def child(code: str, root: Path) -> dict[str, float]:
    """Run `code` in a child process: its result, with its own peak resident memory (MiB)."""
    done = subprocess.run([sys.executable, "-c", code, str(root)], capture_output=True, text=True, check=True,
                          cwd=REPO)
    result: dict[str, float] = json.loads(done.stdout)
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--records", type=int, default=485_070)
    parser.add_argument("--keep", type=Path, help="generate the corpus here and keep it")
    args = parser.parse_args()
    root = args.keep or Path(tempfile.mkdtemp(prefix="bench-corpus-"))
    try:
        started = time.perf_counter()
        written = generate(root, args.records)
        size = sum(p.stat().st_size for p in root.rglob("*.jsonl")) / 2**20
        print(f"corpus: {written:,} records, {size:,.0f} MiB in {time.perf_counter() - started:.0f} s at {root}",
              flush=True)
        plain, audited, curated = child(PLAIN, root), child(AUDIT, root), child(CURATE, root)
    finally:
        if args.keep is None:
            shutil.rmtree(root, ignore_errors=True)
    assert plain["records"] == audited["records"] == written, (plain, audited, written)
    print(f"{'':22} {'seconds':>8} {'records/s':>11} {'peak MiB':>9}")
    for name, side in (("json.loads loop", plain), ("corpus audit", audited), ("curate build", curated)):
        print(f"{name:22} {side['seconds']:8.1f} {written / side['seconds']:11,.0f} {side['peak_mib']:9.0f}")
    print(f"audit speed as a ratio of the plain loop: {plain['seconds'] / audited['seconds']:.2f}x "
          f"({audited['sessions']:,.0f} sessions, {audited['decisions']:,.0f} decisions)")
    print(f"curate build's time as a multiple of the audit's: {curated['seconds'] / audited['seconds']:.2f}x "
          f"({curated['examples']:,.0f} examples, {curated['refused']:,.0f} refused: the copies repeat the same "
          "records, so all but the first are duplicates)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
