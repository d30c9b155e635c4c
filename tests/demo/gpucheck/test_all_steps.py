"""The check's run: the first failure ends it, a step that does not fit its budget is skipped and said,
SIGTERM stops everything it started, and the dry run passes every step it can on the real CPU engine."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from demo.gpucheck.all_steps import build_parser, check
from demo.gpucheck.check_context import CheckFailedError, Done, StepSkippedError
from demo.gpucheck.steps import STEPS, GpuCheckReport
from serve.engine.launcher import EngineProcess
from tests.support.fake_engine import MODULE
from tests.support.procs import driver, sigterm_leaves_nothing, wait_until

REPO = Path(__file__).resolve().parents[3]
NAMES = [s.name for s in STEPS[1:]]


def args(tmp_path: Path, *more: str):
    return build_parser().parse_args(["--dry-run", "--out", str(tmp_path / "out"), *more])


def report(tmp_path: Path) -> GpuCheckReport:
    return GpuCheckReport.model_validate_json((tmp_path / "out" / "gpu-check.json").read_text())


def passing(called: list[str]):
    def make(name: str):
        def step(_ctx, _timeout_s):
            called.append(name)
            return Done(f"{name} ok", {"n": 1})
        return step
    return {name: make(name) for name in NAMES}


def test_the_first_failure_ends_the_check_and_the_report_says_what_failed(tmp_path):
    called: list[str] = []
    functions = passing(called)

    def broken(_ctx, _timeout_s):
        raise CheckFailedError("POST /v1/chat/completions: HTTP 500 (expected 200)")

    functions["chat"] = broken
    assert check(args(tmp_path), functions) == 1
    assert called == NAMES[:NAMES.index("chat")]
    got = report(tmp_path)
    assert got.result == "failed" and got.failed == "chat: POST /v1/chat/completions: HTTP 500 (expected 200)"
    after = got.steps[[s.name for s in got.steps].index("chat") + 1:]
    assert after and {(s.status, s.detail) for s in after} == {("not run", "not run: chat failed")}


def test_a_bug_in_a_step_is_a_failure_that_names_it(tmp_path):
    functions = passing([])
    functions["models"] = lambda _ctx, _t: {}["data"]
    assert check(args(tmp_path), functions) == 1
    assert report(tmp_path).failed == "models: KeyError: 'data'"


def test_steps_that_do_not_fit_the_time_left_are_skipped_and_said_and_the_check_passes(tmp_path):
    """With 100 s left on a GPU budget, the engine (210 s) does not fit: it and what needs it are skipped."""
    called: list[str] = []
    assert check(build_parser().parse_args(["--out", str(tmp_path / "out"), "--total-s", "100"]), passing(called)) == 0
    assert called == ["config", "model"]
    steps = {s.name: s for s in report(tmp_path).steps}
    assert steps["engine"].detail == "skipped: does not fit: up to 210 s, 100 s left"
    assert steps["gateway"].detail == "skipped: needs engine, which did not pass"
    assert steps["nvml"].status == "skipped" and steps["install"].status == "skipped"
    assert report(tmp_path).result == "passed"


def test_a_skipping_step_is_recorded_with_its_reason(tmp_path):
    functions = passing([])

    def no_gpu(_ctx, _timeout_s):
        raise StepSkippedError("dry run: worker_gpu_nvml_up 0")

    functions["nvml"] = no_gpu
    assert check(args(tmp_path), functions) == 0
    nvml = next(s for s in report(tmp_path).steps if s.name == "nvml")
    assert (nvml.status, nvml.detail) == ("skipped", "skipped: dry run: worker_gpu_nvml_up 0")


SIGNALLED = """
import sys, time
from pathlib import Path
import serve.engine.launcher as launcher
launcher.SERVER_MODULE = {module!r}
from demo.gpucheck import all_steps
from demo.gpucheck.check_context import Done

def hold(ctx, timeout_s):
    Path({ready!r}).touch()
    time.sleep(3600)

all_steps.FUNCTIONS["model"] = lambda ctx, timeout_s: Done("not built: the engine is the fake")
all_steps.FUNCTIONS["models"] = hold
sys.exit(all_steps.main(["--dry-run", "--out", {out!r}]))
"""


def test_sigterm_stops_the_engine_and_the_gateway_and_the_report_says_so(tmp_path):
    ready, log, out = tmp_path / "ready", tmp_path / "check.log", tmp_path / "out"
    proc = driver(SIGNALLED.format(module=MODULE, ready=str(ready), out=str(out)), log,
                  env={"WORKER_TIER_CACHE": str(tmp_path / "cache")})
    wait_until(ready.exists, proc, log, limit_s=300)
    sigterm_leaves_nothing(proc, log, at_least=3)  # the fake engine, its worker, the gateway
    got = GpuCheckReport.model_validate_json((out / "gpu-check.json").read_text())
    assert (got.result, got.failed) == ("stopped", "stopped by SIGTERM")
    statuses = {s.name: s.status for s in got.steps}
    assert statuses["engine"] == statuses["gateway"] == "passed" and statuses["models"] == "not run"


@pytest.mark.engine
def test_the_dry_run_passes_every_step_it_can_on_the_cpu_engine(engine: EngineProcess, tmp_path):
    """The whole script on the shared engine (not a second one): only the install and NVML are not judged."""
    command = [str(REPO / "scripts" / "gpu_check.sh"), "--dry-run", "--engine-url", engine.base_url,
               "--out", str(tmp_path / "out"), "--replay-decisions", "1", "--bench-engine-requests", "4",
               "--bench-fast-requests", "32"]
    started = time.monotonic()
    done = subprocess.run(command, capture_output=True, text=True, timeout=1800,
                          env={**os.environ, "VENV": sys.prefix})
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    got = report(tmp_path)
    statuses = {s.name: s.status for s in got.steps}
    assert statuses == {**{name: "passed" for name in statuses}, "install": "skipped", "nvml": "skipped"}
    steps = {s.name: s for s in got.steps}
    assert steps["prefix-cache"].figures["repeat_hits"] > 0
    assert steps["replay"].figures["requests"] == 2
    assert steps["bench"].figures["engine/gateway, shadow 0%/errors"] == 0
    assert "worker_gpu_nvml_up 0" in steps["nvml"].detail
    assert 0 < got.total_s <= time.monotonic() - started + 1
    assert got.host["engine"] and got.host["engine"].startswith("vllm")
    for line in ("replay", "bench", "passed"):
        assert line in done.stdout
