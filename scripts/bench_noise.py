"""The engine's noise floor against concurrency: an A/A pair (`base` and a replicate of it) replayed
on the real CPU engine at 1, 4, 8 and 16 requests in flight, and once with vLLM's batch-invariant
mode (`VLLM_BATCH_INVARIANT=1`) asked for, and on an engine that fixes what a batch holds: one
sequence at a time (`max_num_seqs = 1`) without a prefix cache, with as many requests in flight.

At temperature 0 an answer should depend on its request alone; on the CPU engine it also depends on
what shares its batch (the base model's matmuls are not batch-invariant: their bits follow the row
count) and on whether its prompt prefix came from the cache. Per level the two arms answer the same decisions
through the real runner; printed side by side: decisions whose joint correctness differs between
the two (the noise floor `compare` shows), decisions whose answer differs at all, and requests/s
(both arms).
Each level replays its own copy of the slice (a distinct marker starts the system prompt), so no
level is served from another one's prefix cache.

Usage: `python scripts/bench_noise.py [--decisions 24] [--levels 1,4,8,16] [--skip-serial] [--skip-batch-invariant]`
(also run by `make bench`).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench import ENGINE_CONFIG, marked_slice  # scripts/ is this script's own directory

from core.process import free_port, run_main
from core.records import ParseOutcome, ResultRecord
from demo.demo_data import write_demo
from replay.run.decisions import run
from replay.run.directory import load_results
from replay.run.run_config import RunConfig
from replay.suite import load_suite
from serve.engine.launcher import EngineConfig, EngineProcess, load_engine_config

BASE, REPLICATE = "base", "base-aa"


class Void(Exception):
    """A level whose requests failed: nothing it measured counts."""



def answer(record: ResultRecord) -> str:
    """What the model said, as one comparable string: its calls (tool and arguments) and its text,
    without the ids the engine draws for each response."""
    message = record.raw_output.get("message") or {}
    calls = [(c.tool, c.arguments) for c in record.parsed.calls]
    return json.dumps({"calls": calls, "content": message.get("content"), "outcome": record.parsed.outcome},
                      sort_keys=True)


def level(engine: EngineProcess, source: Path, work: Path, marker: str, decisions: int,
          concurrency: int) -> dict[str, Any]:
    """One A/A replay at `concurrency` in flight: the noise floor and requests/s."""
    suite = marked_slice(source, work / f"suite-{marker}", marker, decisions)
    config = RunConfig.model_validate({
        "endpoint": {"base_url": f"{engine.base_url}/v1"}, "decoding": {"max_tokens": 96},
        "runner": {"concurrency": concurrency, "order": "prefix"},
        "arms": [{"name": BASE, "model": engine.config.vllm.served_model_name},
                 {"name": REPLICATE, "replicate_of": BASE}]})
    run_dir = work / f"run-{marker}"
    started = time.monotonic()
    sent, _ = run(load_suite(suite), config, run_dir, label=f"{marker:>14}")
    seconds = time.monotonic() - started
    records = load_results(run_dir)
    failed = [r for r in records if r.parsed.outcome == ParseOutcome.TRANSPORT_ERROR]
    if failed:
        raise Void(f"{len(failed)} request(s) failed ({failed[0].parsed.error}): the measurement is void")
    by_arm: dict[str, dict[str, ResultRecord]] = {}
    for r in records:
        by_arm.setdefault(r.arm, {})[r.decision_id] = r
    base, twin = by_arm[BASE], by_arm[REPLICATE]
    scored = [d for d in base if base[d].score.joint_correct is not None]
    return {"concurrency": concurrency, "decisions": len(base), "scored": len(scored),
            "joint_discordant": sum(base[d].score.joint_correct != twin[d].score.joint_correct for d in scored),
            "answers_differ": sum(answer(base[d]) != answer(twin[d]) for d in base),
            "requests_per_s": sent / seconds, "seconds": seconds}


def sweep(config: EngineConfig, source: Path, work: Path, name: str, decisions: int,
          levels: list[int]) -> list[dict[str, Any]]:
    """The levels on one fresh engine (a short warm-up first, so no level pays the first compile)."""
    with EngineProcess(config, log_path=work / f"vllm-{name}.log") as engine:
        level(engine, source, work, f"{name}-warm", 2, 2)
        measured = []
        for c in levels:
            measured.append(level(engine, source, work, f"{name}-c{c}", decisions, c))
            print(row(f"{name}, {c}", measured[-1]), flush=True)
        return measured


def row(label: str, r: dict[str, Any]) -> str:
    joint, answers = f"{r['joint_discordant']} of {r['scored']}", f"{r['answers_differ']} of {r['decisions']}"
    return f"{label:<34} {joint:>13} {answers:>14} {r['requests_per_s']:>8.3f} {r['seconds']:>6.0f}s"


def invariant_sweep(source: Path, work: Path, decisions: int, concurrency: int) -> dict[str, Any]:
    """The engine with `VLLM_BATCH_INVARIANT=1`, or what became of it (the last lines of its log)."""
    config = load_engine_config(ENGINE_CONFIG, port=free_port())
    config.env["VLLM_BATCH_INVARIANT"] = "1"
    log = work / "vllm-invariant.log"
    try:
        return {"levels": sweep(config, source, work, "invariant", decisions, [concurrency])}
    except (RuntimeError, TimeoutError, Void) as exc:
        lines = log.read_text(errors="replace").splitlines() if log.exists() else []
        errors = [line for line in lines if "Error" in line or "error" in line][-6:]
        return {"error": str(exc), "log_errors": errors}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--decisions", type=int, default=24, help="decisions per level (each answered twice)")
    parser.add_argument("--levels", default="1,4,8,16", help="requests in flight, comma-separated")
    parser.add_argument("--skip-shipped", action="store_true", help="skip the shipped engine's levels")
    parser.add_argument("--skip-batch-invariant", action="store_true",
                        help="skip the engine started with VLLM_BATCH_INVARIANT=1")
    parser.add_argument("--skip-serial", action="store_true",
                        help="skip the engine that runs one sequence at a time without a prefix cache")
    args = parser.parse_args()
    levels = [int(c) for c in args.levels.split(",")]
    shipped = load_engine_config(ENGINE_CONFIG, port=free_port())
    print(f"# noise floor against concurrency ({time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}): "
          f"{args.decisions} demo decisions × 2 arms (base and a replicate) per level, "
          f"dtype {shipped.vllm.dtype}, max_num_seqs {shipped.vllm.max_num_seqs}", flush=True)
    print(f"{'engine, in flight':<34} {'joint differs':>13} {'answer differs':>14} {'req/s':>8} {'time':>7}",
          flush=True)
    results: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        source, _ = write_demo(work / "demo", seed=0)
        if not args.skip_shipped:
            results["shipped"] = sweep(shipped, source, work, "shipped", args.decisions, levels)
            shipped_rows = results["shipped"]
            slowest, fastest = shipped_rows[0], shipped_rows[-1]
            print(f"ratio requests/s, {fastest['concurrency']} in flight / {slowest['concurrency']}: "
                  f"{fastest['requests_per_s'] / slowest['requests_per_s']:.2f}x", flush=True)
        if not args.skip_serial:
            serial = load_engine_config(ENGINE_CONFIG, port=free_port())
            serial.vllm.max_num_seqs = 1
            serial.vllm.enable_prefix_caching = False
            results["serial"] = sweep(serial, source, work, "serial", args.decisions, [max(levels)])
        if not args.skip_batch_invariant:
            invariant = invariant_sweep(source, work, args.decisions, max(levels))
            results["batch_invariant"] = invariant
            if "error" in invariant:
                print(f"VLLM_BATCH_INVARIANT=1: {invariant['error']}")
                print("\n".join(f"  log: {line}" for line in invariant["log_errors"]))
    print(json.dumps({"noise": results}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(run_main(main))
