"""The check's two loads: a two-arm replay of the demo's held-out slice through the gateway (the real
runner, `replay.run.decisions`), and the gateway overhead bench against the engine (`scripts/bench_gateway.py`,
small counts)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from core.jsonfile import JsonFileError, loads_bounded
from core.records import ResultRecord
from demo.gpucheck.check_context import REPO, CheckFailedError, Done, GpuCheckContext, run_bounded
from demo.run import BASELINE, DEMO_CONCURRENCY, demo_data
from replay.analysis.compare import is_held_out_positive
from replay.run.decisions import run
from replay.run.directory import load_results
from replay.run.run_config import RunConfig
from replay.suite import Suite, freeze_suite, load_suite
from serve.engine.outdir import replaced_whole

ARMS = (BASELINE, "base+memory")
BENCH = REPO / "scripts" / "bench_gateway.py"


def first_decisions(suite: Suite, path: Path, count: int) -> Suite:
    """A frozen suite of the first `count` decisions of `suite` (a dry run's smaller slice)."""
    if not (path / "suite.toml").exists():
        with replaced_whole(path) as staging:  # whole or not at all: a second check takes what is there
            (staging / "suite.toml").write_text(f'name = "{suite.manifest.name}-first-{count}"\n'
                                                f'version = "{suite.manifest.version}"\n'
                                                f"created = {suite.manifest.created.isoformat()}\n")
            (staging / "decisions.jsonl").write_text("".join(d.model_dump_json() + "\n"
                                                             for d in suite.decisions[:count]))
            freeze_suite(staging, synthetic=True)  # a slice of the demo suite: invented values
    return load_suite(path)


def replay_config(gateway_url: str, memory_root: Path, timeout_s: float) -> RunConfig:
    """The demo's decoding and runner settings; `base` without memory and with the workspace's memory."""
    return RunConfig.model_validate({
        "endpoint": {"base_url": f"{gateway_url}/v1", "api_key_env": None, "timeout_s": max(timeout_s, 1.0)},
        "decoding": {"temperature": 0.0, "seed": 0, "max_tokens": 128},
        "runner": {"concurrency": DEMO_CONCURRENCY, "order": "prefix", "retries": 1},
        "memory": {"root": str(memory_root)},
        "arms": [{"name": BASELINE, "model": "worker", "memory": "withheld"},
                 {"name": "base+memory", "model": "worker", "memory": "workspace"}],
    })


def arm_line(results: list[ResultRecord], arm: str) -> tuple[str, int]:
    """`arm joint-correct a/b` over the held-out positives, and the arm's result count."""
    mine = [r for r in results if r.arm == arm]
    positives = [r for r in mine if is_held_out_positive(r)]
    correct = sum(bool(r.score.joint_correct) for r in positives)
    return f"{arm} {correct}/{len(positives)}", len(mine)


def check_replay(ctx: GpuCheckContext, timeout_s: float) -> Done:
    """Every decision of the slice under both arms through the gateway, none lost to transport errors."""
    work = ctx.options.out
    suite, memory_root, _ = demo_data(work, quick=False)
    if ctx.options.replay_decisions is not None:
        suite = first_decisions(suite, work / f"first-{ctx.options.replay_decisions}", ctx.options.replay_decisions)
    run_dir = work / "replay"
    started = time.monotonic()
    sent, _ = run(suite, replay_config(ctx.gateway(), memory_root, timeout_s), run_dir, label="[gpu-check] replay")
    seconds = time.monotonic() - started
    results = load_results(run_dir)
    failed = [r for r in results if r.parsed.outcome == "transport_error"]
    if failed:
        raise CheckFailedError(f"{len(failed)} of {len(results)} requests failed: {failed[0].parsed.error}")
    lines = [arm_line(results, arm) for arm in ARMS]
    if any(count != len(suite.decisions) for _, count in lines):
        raise CheckFailedError(f"expected {len(suite.decisions)} results per arm, got {[count for _, count in lines]}")
    answers = {(r.arm, r.decision_id): r.parsed.model_dump_json() for r in results}
    changed = sum(answers[(ARMS[0], d.id)] != answers[(ARMS[1], d.id)] for d in suite.decisions)
    return Done(f"{len(suite.decisions)} decisions x 2 arms in {seconds:.1f} s ({sent / seconds:.1f} requests/s); "
                f"joint-correct on held-out positives: {', '.join(line for line, _ in lines)}; memory changed "
                f"{changed} answers; 0 transport errors",
                {"decisions": len(suite.decisions), "requests": sent, "seconds": round(seconds, 2),
                 "requests_per_s": round(sent / seconds, 2), "changed_by_memory": changed})


def bench_figures(output: str) -> dict[str, Any]:
    """The JSON document bench_gateway.py prints last (its tables come before it)."""
    start = output.rfind("\n{\n")
    try:
        document = loads_bounded(output[start + 1:] if start >= 0 else output, "bench_gateway.py output")
        engine, fast = document["gateway"]["engine"], document["gateway"]["fast_upstream"]
        assert isinstance(engine, dict) and isinstance(fast, dict)
    except (JsonFileError, KeyError, TypeError, AssertionError):
        raise CheckFailedError(f"bench_gateway.py printed no result document: {output[-300:]}") from None
    return {"engine": engine, "fast_upstream": fast}


def check_bench(ctx: GpuCheckContext, timeout_s: float) -> Done:
    """Direct vs through the gateway (shadow off, capture full, shadow 100%), against the engine and an
    instant upstream; every request must succeed."""
    log = ctx.logs / "bench.log"
    options = ctx.options
    run_bounded("scripts/bench_gateway.py", [str(BENCH), "--engine-url", ctx.engine(),
                                            "--engine-requests", str(options.bench_engine_requests),
                                            "--engine-concurrency", "4", "--max-tokens", "8",
                                            "--fast-requests", str(options.bench_fast_requests),
                                            "--fast-concurrency", "16"], log, timeout_s)
    figures = bench_figures(log.read_text(encoding="utf-8", errors="replace"))
    errors = {f"{upstream}/{label}": row["errors"] for upstream, rows in figures.items()
              for label, row in rows.items() if isinstance(row, dict) and row.get("errors")}
    if errors:
        raise CheckFailedError(f"bench requests failed: {errors}")
    engine, fast = figures["engine"]["gateway, shadow 0%"], figures["fast_upstream"]["gateway, shadow 0%"]
    flat = {f"{upstream}/{label}/{key}": value for upstream, rows in figures.items()
            for label, row in rows.items() if isinstance(row, dict) for key, value in row.items()}
    return Done(f"engine: gateway {engine['throughput_ratio']:.3f}x direct throughput, +{engine['added_p50_ms']:.1f} "
                f"ms p50; instant upstream: {fast['throughput_ratio']:.3f}x, +{fast['added_p50_ms']:.1f} ms p50 "
                f"({options.bench_engine_requests} and {options.bench_fast_requests} requests a measurement)", flat)
