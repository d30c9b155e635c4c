"""A trial's look against stores of 10k, 100k and 1M captured decisions: the look reads its step's
window through the (route, time) indexes, so its cost should not grow with the store.

Each store holds N decisions spread over the past 30 days (three routes, canary and production
traffic) and the request log holds min(N, 100 000) rows (the gateway keeps `request_log_keep`,
default 100 000); the step's window is the last 10 minutes, the same ~1 000 decisions and
requests at every N. Printed: the median look at each N and its ratio to the 10k look (target
≤ 2× at 1M), the old look (every decision read, then filtered in Python) where it is affordable,
and the event loop's latency for other work (a 1 ms ticker) during a look run in a thread, as
the trial service runs it, against the same look run on the loop.

Usage: `python scripts/bench_trial_look.py [--sizes 10000 100000 1000000]` (also run by `make bench`).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import sqlite3
import statistics
import sys
import tempfile
import time
from pathlib import Path

from core.capture_store import SCHEMA as CAPTURE_SCHEMA
from core.capture_store import parse_instant, read_decisions
from core.process import run_main
from serve.gateway.registry import Registry
from serve.trials.signals import StepWindow, read_window, stamp
from serve.trials.trial_policy import Step, TrialPolicy

NOW = 1_800_000_000.0
WINDOW_S = 600.0
IN_WINDOW = 1_000
SPAN_S = 30 * 86_400.0
POLICY = TrialPolicy(name="bench", route="worker", candidate="cand", alpha=0.01, interval_s=60,
                     max_duration_s=100_000, gate_policy=Path("gate.toml"),
                     steps=[Step(percent=10, min_duration_s=100, min_requests=20)])


def times(n: int, rng: random.Random) -> list[float]:
    """n epoch times, the last IN_WINDOW of them inside the window, the rest before it, in order."""
    old = sorted(rng.uniform(NOW - SPAN_S, NOW - WINDOW_S - 1) for _ in range(n - IN_WINDOW))
    return old + sorted(rng.uniform(NOW - WINDOW_S + 1, NOW) for _ in range(IN_WINDOW))


def iso(epoch: float) -> str:
    """The capture store's own time format (core.capture_store.TIME_FORMAT)."""
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(epoch)) + f".{int(epoch % 1 * 1e6):06d}Z"


def build_capture(path: Path, n: int, rng: random.Random) -> None:
    db = sqlite3.connect(path, isolation_level=None)
    db.execute("PRAGMA journal_mode=WAL")
    db.executescript(CAPTURE_SCHEMA)
    rows = []
    for i, at in enumerate(times(n, rng)):
        canary = rng.random() < 0.1
        rows.append((f"d-{i}", iso(at), "descriptor", f"ws-{rng.randrange(500)}", f"s-{rng.randrange(50_000)}",
                     rng.choice(("worker", "worker", "other", "third")), "cand" if canary else "prod",
                     "canary" if canary else "production", "0" * 64, '["ab"]', '["user"]', '["search"]', "auto",
                     "ok", "search", '["q"]', f"c-{i}", 1, 0.1, rng.choice((None, "ok", "failed"))))
    db.execute("BEGIN")
    db.executemany("INSERT INTO decisions (id, captured_at, mode, workspace, session, route, adapter, kind, "
                   "request_sha256, message_hashes, roles, tools_offered, tool_choice, parse_outcome, chosen_tool, "
                   "chosen_keys, call_id, calls, duration_s, outcome) VALUES "
                   "(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", rows)
    db.execute("COMMIT")
    db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    db.close()


def build_state(path: Path, n: int, rng: random.Random) -> None:
    Registry(path, ["worker", "other", "third"], "worker-base").close()
    db = sqlite3.connect(path, isolation_level=None)
    rows = []
    for i, at in enumerate(times(min(n, 100_000), rng)):
        canary = rng.random() < 0.1
        rows.append((f"r-{i}", stamp(at), "/v1/chat/completions", "worker",
                     rng.choice(("worker", "worker", "other", "third")), "cand" if canary else "prod",
                     "canary" if canary else "production", f"ws-{rng.randrange(500)}", "e0",
                     500 if rng.random() < 0.01 else 200, None, rng.uniform(0.05, 2)))
    db.execute("BEGIN")
    db.executemany("INSERT INTO requests (request_id, at, endpoint, requested, route, adapter, kind, sticky_key, "
                   "upstream, status, reason, duration_s) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", rows)
    db.execute("COMMIT")
    db.close()


def median_s(call: object, repeats: int) -> float:
    runs = []
    for _ in range(repeats):
        started = time.perf_counter()
        call()  # type: ignore[operator]
        runs.append(time.perf_counter() - started)
    return statistics.median(runs)


async def loop_latency(look: object, in_thread: bool) -> tuple[float, float]:
    """The 1 ms ticker's worst and median lateness (ms) while one look runs."""
    lateness: list[float] = []
    done = asyncio.Event()

    async def ticker() -> None:
        while not done.is_set():
            started = time.perf_counter()
            await asyncio.sleep(0.001)
            lateness.append((time.perf_counter() - started - 0.001) * 1000)

    task = asyncio.create_task(ticker())
    await asyncio.sleep(0.01)
    if in_thread:
        await asyncio.to_thread(look)  # type: ignore[arg-type]
    else:
        look()  # type: ignore[operator]
    done.set()
    await task
    return max(lateness), statistics.median(lateness)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000, 1_000_000])
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--old-up-to", type=int, default=100_000, help="largest store the old full read is timed on")
    args = parser.parse_args()
    window = StepWindow(POLICY, 10.0, NOW - WINDOW_S)
    since = stamp(window.step_started_at)
    results: dict[str, dict[str, float]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for n in args.sizes:
            rng = random.Random(n)
            capture, state = Path(tmp) / f"capture-{n}.sqlite", Path(tmp) / f"state-{n}.sqlite"
            started = time.perf_counter()
            build_capture(capture, n, rng)
            build_state(state, n, rng)
            built = time.perf_counter() - started

            def look(state: Path = state, capture: Path = capture) -> object:
                return read_window(state, capture, window)

            look()  # warm the page cache as a running gateway's would be
            row: dict[str, float] = {"build_s": built, "look_ms": median_s(look, args.repeats) * 1000,
                                     "window_decisions": len(read_decisions(capture, since, "worker"))}
            if n <= args.old_up_to:
                def old(capture: Path = capture) -> object:
                    return [d for d in read_decisions(capture) if parse_instant(d.captured_at) >= parse_instant(since)]
                row["old_look_ms"] = median_s(old, 3) * 1000
            row["loop_lateness_max_ms_threaded"], row["loop_lateness_median_ms_threaded"] = \
                asyncio.run(loop_latency(look, in_thread=True))
            row["loop_lateness_max_ms_on_loop"], _ = asyncio.run(loop_latency(look, in_thread=False))
            results[str(n)] = row
            print(f"{n:>9} decisions: look {row['look_ms']:8.1f} ms"
                  + (f" (old full read {row['old_look_ms']:9.1f} ms)" if "old_look_ms" in row else "")
                  + f"; loop lateness during a threaded look max {row['loop_lateness_max_ms_threaded']:.1f} ms,"
                  f" median {row['loop_lateness_median_ms_threaded']:.2f} ms (look on the loop: max "
                  f"{row['loop_lateness_max_ms_on_loop']:.1f} ms); built in {built:.0f} s", flush=True)
            capture.unlink()
    base = results[str(args.sizes[0])]["look_ms"]
    for n in args.sizes[1:]:
        print(f"ratio: look at {n} / look at {args.sizes[0]}: {results[str(n)]['look_ms'] / base:.2f}x")
    print(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(run_main(main))
