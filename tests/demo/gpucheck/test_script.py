"""`scripts/gpu_check.sh` itself: shellcheck has nothing to say, it refuses a host without a GPU unless
asked for a dry run, a failed install still leaves gpu-check.json and a non-zero status, and its numbers
are the check's."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from demo.gpucheck.steps import STEPS, TOTAL_S, GpuCheckReport
from tests.support.live import free_port

REPO = Path(__file__).resolve().parents[3]
SCRIPT = REPO / "scripts" / "gpu_check.sh"


def script(*args: str, env: dict[str, str] | None = None, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(SCRIPT), *args], capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, "VENV": sys.prefix, **(env or {})})


def test_shellcheck_has_nothing_to_say():
    found = shutil.which("shellcheck")
    if found is None:
        pytest.fail("shellcheck is missing: install Debian's `shellcheck` (scripts/setup.sh --test-tools does)")
    checked = subprocess.run([found, str(SCRIPT), str(REPO / "scripts" / "setup.sh")], capture_output=True, text=True)
    assert checked.returncode == 0, checked.stdout


def test_the_scripts_install_budget_and_total_are_the_checks():
    text = SCRIPT.read_text()
    assert re.search(r"^INSTALL_BUDGET_S=(\d+)$", text, re.M).group(1) == f"{STEPS[0].budget_s:.0f}"
    assert STEPS[0].name == "install"
    assert f'"limit_s": {TOTAL_S}' in text


def test_without_a_gpu_it_refuses_unless_asked_for_a_dry_run(tmp_path):
    if shutil.which("nvidia-smi") and subprocess.run(["nvidia-smi", "-L"], capture_output=True).returncode == 0:
        pytest.skip("this host has a GPU")
    done = script("--out", str(tmp_path / "out"))
    assert done.returncode == 2
    assert "error: no GPU: nvidia-smi lists none (on a CPU machine run scripts/gpu_check.sh --dry-run)" in done.stderr
    assert not (tmp_path / "out").exists()


def test_a_failed_install_leaves_the_report_and_a_non_zero_status(tmp_path):
    """On a (stubbed) GPU host whose venv cannot be created, the check fails at the install and says so."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "nvidia-smi").write_text("#!/bin/sh\n[ \"$1\" = -L ] && echo 'GPU 0: Stub GPU (UUID: GPU-0)'\nexit 0\n")
    (bin_dir / "nvidia-smi").chmod(0o755)
    not_a_directory = tmp_path / "a-file"
    not_a_directory.write_text("")
    env = {"PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}", "GPU_VENV": str(not_a_directory / "venv"),
           "PYTHON": sys.executable}
    done = script("--json", str(tmp_path / "gpu-check.json"), env=env)
    assert done.returncode == 1, done.stderr
    assert "FAILED at install:" in done.stderr
    report = GpuCheckReport.model_validate_json((tmp_path / "gpu-check.json").read_text())
    assert report.result == "failed" and report.failed.startswith("install: ")
    assert [(s.name, s.status) for s in report.steps] == [("install", "failed")]


def test_a_dry_run_without_an_engine_fails_at_the_engine_and_runs_nothing_after_it(tmp_path):
    url = f"http://127.0.0.1:{free_port()}"
    done = script("--dry-run", "--engine-url", url, "--out", str(tmp_path / "out"))
    assert done.returncode == 1, done.stderr[-2000:]
    assert f"FAILED at engine: no engine answers at {url}/health" in done.stdout
    report = GpuCheckReport.model_validate_json((tmp_path / "out" / "gpu-check.json").read_text())
    assert report.mode == "dry-run" and report.failed == f"engine: no engine answers at {url}/health"
    statuses = {s.name: s.status for s in report.steps}
    assert statuses["install"] == "skipped" and statuses["config"] == statuses["model"] == "passed"
    assert [s.name for s in report.steps] == [s.name for s in STEPS]
    assert {s.status for s in report.steps[4:]} == {"not run"}


def test_the_production_doc_lists_every_step_with_its_budget():
    text = (REPO / "docs" / "production.md").read_text()
    section = text[text.index("## 8. Checking a GPU host"):]
    rows = re.findall(r"^\| ([a-z-]+) \| (\d+) \|", section, re.M)
    assert rows == [(s.name, f"{s.budget_s:.0f}") for s in STEPS]
