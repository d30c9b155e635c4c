"""What the check's steps share: its options, the services it started, and the outcomes a step reports
(passed with what it found, skipped with why, or failed with what failed)."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Sequence
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path

from core.errors import WorkerTierError
from core.process import ServiceProcess
from demo.gpucheck.steps import Figure

REPO = Path(__file__).resolve().parents[2]
GPU_CONFIG = REPO / "configs" / "engine" / "gpu-smollm2.toml"
CPU_CONFIG = REPO / "configs" / "engine" / "cpu-smollm2.toml"
PRODUCTION_CONFIG = REPO / "configs" / "engine" / "qwen3.8-27b-nvfp4-2x5090.toml"


class CheckFailedError(WorkerTierError):
    """A step found the GPU path broken: the message says what was expected and what came instead."""


class StepSkippedError(WorkerTierError):
    """A step that cannot mean anything here (NVML in a dry run): the message says why."""


@dataclass(frozen=True)
class Done:
    """A passed step: one line of what it found, and the figures for gpu-check.json."""

    detail: str
    figures: dict[str, Figure] = field(default_factory=dict)


@dataclass(frozen=True)
class Options:
    """The command line (see demo/gpucheck/all_steps.py)."""

    dry_run: bool
    out: Path
    engine_config: Path
    engine_url: str | None = None
    replay_decisions: int | None = None
    """The first N decisions of the held-out slice (None: all of it)."""
    bench_engine_requests: int = 32
    bench_fast_requests: int = 500


@dataclass
class GpuCheckContext:
    """The running check: services started are stopped by `stack` (at exit, and on SIGTERM)."""

    options: Options
    stack: ExitStack
    token: str
    engine_url: str | None = None
    gateway_url: str | None = None

    @property
    def logs(self) -> Path:
        return self.options.out / "logs"

    @property
    def adapter_root(self) -> Path:
        return self.options.out / "adapters"

    def engine(self) -> str:
        assert self.engine_url is not None, "the engine step passed before this one"
        return self.engine_url

    def gateway(self) -> str:
        assert self.gateway_url is not None, "the gateway step passed before this one"
        return self.gateway_url


def log_tail(path: Path, lines: int = 6) -> str:
    """The end of a log, for a failure's detail (the whole log stays in the check's directory)."""
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return f"(no log at {path})"
    return " | ".join(line.strip() for line in text.splitlines()[-lines:] if line.strip())


def run_bounded(name: str, argv: Sequence[str], log: Path, timeout_s: float, env: dict[str, str] | None = None) -> None:
    """Run a one-shot command (this interpreter's `argv`) to its end within `timeout_s`, output to `log`.
    It runs in its own process group, stopped whole on a timeout, a stop signal or an error here."""
    log.parent.mkdir(parents=True, exist_ok=True)
    process = ServiceProcess(name, [sys.executable, *argv], {**os.environ, **(env or {})}, "", timeout_s, log)
    process.start()
    assert process.proc is not None
    try:
        status = process.proc.wait(timeout_s)
    except subprocess.TimeoutExpired:
        raise CheckFailedError(f"{name} did not finish within {timeout_s:.0f} s; log {log}: {log_tail(log)}") from None
    finally:
        process.stop()  # SIGTERM first: a command that started services of its own stops them
    if status != 0:
        raise CheckFailedError(f"{name} exited with status {status}; log {log}: {log_tail(log)}")
