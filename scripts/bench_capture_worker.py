"""The capture worker's CPU per captured request, in one process, so a change to it is measurable without a quiet
machine (the gateway benchmarks' wall times move with everything else the machine runs).

One job is what the gateway queues for an answered tool-loop turn (capture `full`, the workspace allowed, sample
rate 1): the guard reads the turn's tool result, its session's earlier decision is labelled, and the decision is
described (the canonical hashes) and stored. Two turn lengths: the gateway benchmarks' second turn (3 messages) and
a long session's turn (41 messages). `--baseline CHECKOUT` measures another checkout's worker the same way, rounds
alternating, and prints each ratio beside it.
Usage: `python scripts/bench_capture_worker.py [--jobs N] [--rounds N] [--baseline CHECKOUT]`.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
LENGTHS = {"3 messages": 1, "41 messages": 20}
"""Turn lengths measured: the tool-loop rounds before the last tool result."""


def turn(rounds: int) -> list[dict[str, object]]:
    """A chat tool loop's messages after `rounds` calls, each answered by its tool result."""
    messages: list[dict[str, object]] = [{"role": "user", "content": "Say hi to the finance team."}]
    for n in range(rounds):
        messages.append({"role": "assistant", "content": None, "tool_calls": [{
            "id": f"call-{n}", "type": "function",
            "function": {"name": "find_team", "arguments": json.dumps({"name": f"finance-{n}"})}}]})
        messages.append({"role": "tool", "tool_call_id": f"call-{n}",
                         "content": json.dumps({"team": f"finance-{n}", "members": 4})})
    return messages


def measure(jobs: int) -> dict[str, float]:
    """CPU µs per job of this checkout's capture worker (`Capture.process`), per turn length."""
    from serve.gateway.capture import Capture, CaptureJob, now_iso
    from serve.gateway.config import CaptureSection
    from serve.gateway.metrics import GatewayMetrics

    tools = [{"type": "function", "function": {"name": "find_team", "parameters": {
        "type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}}}]
    answer = {"role": "assistant", "content": None, "tool_calls": [{"id": "call-next", "type": "function", "function": {
        "name": "find_team", "arguments": "{\"name\": \"sales\"}"}}]}
    figures = {}
    with tempfile.TemporaryDirectory(prefix="bench-capture-") as tmp:
        settings = CaptureSection(mode="full", workspaces=["ws-bench"], sample_rate=1.0, db=Path(tmp) / "c.sqlite")
        capture = Capture(settings, GatewayMetrics(nvml=False))
        for label, rounds in LENGTHS.items():
            body = {"model": "worker", "messages": turn(rounds), "tools": tools, "max_tokens": 8}

            def job(n: int, body: dict[str, object] = body, label: str = label) -> CaptureJob:
                return CaptureJob(key=f"{label}-{n}", request_id=f"r-{n}", workspace="ws-bench",
                                  session=f"s-{n // 20}", route="worker", adapter="worker-base", kind="base",
                                  body=body, answer=answer, duration_s=0.001, captured_at=now_iso())
            for n in range(jobs // 10):  # warm-up: the store's pages and the interpreter's caches
                capture.process(job(-1 - n))
            started = time.process_time()
            for n in range(jobs):
                capture.process(job(n))
            figures[label] = (time.process_time() - started) / jobs * 1e6
        assert capture.store is not None
        capture.store.close()
    return figures


def measure_in(checkout: Path, jobs: int) -> dict[str, float]:
    """`measure` in a fresh interpreter on `checkout`'s code."""
    code = (f"import sys, json; sys.path.insert(0, {str(checkout)!r}); sys.path.insert(1, {str(REPO / 'scripts')!r});"
            f"from bench_capture_worker import measure; print(json.dumps(measure({jobs})))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=checkout)
    figures: dict[str, float] = json.loads(done.stdout.splitlines()[-1])
    return figures


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=2000, help="jobs per turn length and round")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--baseline", type=Path, help="another checkout's worker, measured alternately")
    args = parser.parse_args()
    trees = {"this checkout": REPO} | ({"baseline": args.baseline.resolve()} if args.baseline else {})
    runs: dict[str, list[dict[str, float]]] = {name: [] for name in trees}
    for round_ in range(args.rounds):
        print(f"round {round_ + 1}/{args.rounds}", file=sys.stderr, flush=True)
        for name, checkout in trees.items():
            runs[name].append(measure_in(checkout, args.jobs))
    print(f"\n### the capture worker, CPU µs per captured tool-loop turn (median of {args.rounds} rounds of "
          f"{args.jobs} jobs)")
    print("| tree | " + " | ".join(LENGTHS) + (" | vs baseline |" if args.baseline else " |"))
    print("|---|" + "---:|" * (len(LENGTHS) + bool(args.baseline)))
    medians = {name: {label: sorted(r[label] for r in done)[len(done) // 2] for label in LENGTHS}
               for name, done in runs.items()}
    for name, figures in medians.items():
        cells = [f"{figures[label]:,.0f}" for label in LENGTHS]
        if args.baseline:
            cells.append(" / ".join(f"{figures[label] / medians['baseline'][label]:.2f}×" for label in LENGTHS))
        print(f"| {name} | " + " | ".join(cells) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
