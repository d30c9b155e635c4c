"""The check's steps, their time budgets and what gets skipped, and the report it writes: pure (no I/O,
no clock), so the rules are tested on their own.

A step starts only when its whole budget fits in the time left: a GPU host may be lent for minutes, and
a step cut off half way proves nothing. A step whose prerequisite did not pass is skipped, and the first
failure ends the check: everything after it is "not run"."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Literal

from pydantic import Field

from core.records import Strict

Status = Literal["passed", "failed", "skipped", "not run"]
Figure = str | int | float | bool | None
TOTAL_S = 480.0
"""The whole check on a GPU host, downloads and install included (a loan may be a quarter of an hour)."""
DRY_RUN_FACTOR = 8.0
"""Budgets on the CPU engine: SmolLM2 on two CPU cores generates ~11 tokens/s, a GPU hundreds."""


@dataclass(frozen=True)
class StepSpec:
    """One step: `budget_s` is what it may take on a GPU host (its timeout), `needs` the steps that must
    have passed before it can mean anything."""

    name: str
    what: str
    budget_s: float
    needs: tuple[str, ...] = ()


STEPS: tuple[StepSpec, ...] = (
    StepSpec("install", "worker-tier[gpu] into its own venv (scripts/gpu_check.sh)", 240),
    StepSpec("config", "the GPU engine config loads and matches production where it applies", 10),
    StepSpec("model", "the embedded model built (worker-serve model build)", 90),
    StepSpec("engine", "vLLM healthy from the engine config", 210, ("model",)),
    StepSpec("gateway", "worker-serve gateway healthy in front of the engine", 45, ("engine",)),
    StepSpec("models", "/v1/models at the gateway and the engine", 15, ("gateway",)),
    StepSpec("chat", "a chat completion through the gateway", 20, ("gateway",)),
    StepSpec("messages", "an Anthropic Messages request through the gateway", 20, ("gateway",)),
    StepSpec("lora", "a LoRA adapter made, registered, loaded and answering", 60, ("gateway",)),
    StepSpec("prefix-cache", "prefix-cache hit counters move on a repeated prefix", 20, ("gateway",)),
    StepSpec("nvml", "NVML GPU series at the gateway's /metrics", 10, ("gateway",)),
    StepSpec("replay", "two-arm replay of the demo's held-out slice through the gateway", 60, ("gateway",)),
    StepSpec("bench", "gateway overhead against the engine (scripts/bench_gateway.py, small)", 120, ("engine",)),
)


def scaled(specs: Sequence[StepSpec], factor: float) -> tuple[StepSpec, ...]:
    """The same steps with every budget times `factor` (the dry run on a CPU engine)."""
    return tuple(StepSpec(s.name, s.what, s.budget_s * factor, s.needs) for s in specs)


class StepRecord(Strict):
    """One row of `gpu-check.json` and of the printed table."""

    name: str
    status: Status
    seconds: float = Field(ge=0)
    budget_s: float = Field(gt=0)
    detail: str
    figures: dict[str, Figure] = Field(default_factory=dict)


class GpuCheckReport(Strict):
    """`gpu-check.json`: what ran where, each step's outcome and time, and the verdict."""

    mode: Literal["gpu", "dry-run"]
    started_at: datetime
    total_s: float
    limit_s: float
    host: dict[str, str | None]
    result: Literal["passed", "failed", "stopped"]
    failed: str | None = None
    """`step: what failed` for the first failure (or the signal that stopped the check)."""
    steps: list[StepRecord]


def skip_reason(spec: StepSpec, done: Sequence[StepRecord], left_s: float) -> str | None:
    """Why `spec` must not start now (None: it may): a prerequisite that did not pass, or a budget that
    does not fit in the time left."""
    status = {record.name: record.status for record in done}
    missing = [need for need in spec.needs if status.get(need) != "passed"]
    if missing:
        return f"needs {', '.join(missing)}, which did not pass"
    if left_s < spec.budget_s:
        return f"does not fit: up to {spec.budget_s:.0f} s, {max(left_s, 0):.0f} s left"
    return None


def not_run(specs: Sequence[StepSpec], after: str) -> list[StepRecord]:
    """The rows of the steps a failure ended the check before."""
    return [StepRecord(name=s.name, status="not run", seconds=0, budget_s=s.budget_s,
                       detail=f"not run: {after} failed") for s in specs]


def verdict(steps: Sequence[StepRecord]) -> tuple[Literal["passed", "failed"], str | None]:
    """`failed` with the first failed step and its detail, else `passed` (skips are said, not failed)."""
    failed = next((s for s in steps if s.status == "failed"), None)
    return ("failed", f"{failed.name}: {failed.detail}") if failed else ("passed", None)


def table(report: GpuCheckReport) -> str:
    """The printed table: one row a step with its status, time against its budget and what it found."""
    rows = [("step", "status", "time", "budget", "detail")]
    rows += [(s.name, s.status, f"{s.seconds:.1f} s", f"{s.budget_s:.0f} s", s.detail) for s in report.steps]
    widths = [max(len(row[i]) for row in rows) for i in range(4)]
    lines = ["  ".join([*(cell.ljust(w) for cell, w in zip(row[:4], widths, strict=True)), row[4]]).rstrip()
             for row in rows]
    lines.insert(1, "-" * max(len(line) for line in lines))
    skipped = [s.name for s in report.steps if s.status == "skipped"]
    end = {"passed": "passed", "failed": f"FAILED at {report.failed}", "stopped": f"stopped: {report.failed}"}
    lines.append(f"gpu-check ({report.mode}): {end[report.result]} in {report.total_s:.0f} s of "
                 f"{report.limit_s:.0f} s" + (f"; skipped: {', '.join(skipped)}" if skipped else ""))
    return "\n".join(lines)
