"""Work killed mid-way on purpose, for the chaos tests (tests/test_chaos.py) and the runbook's (tests/test_runbook.py):
a replay run and a curation input set written to disk, a process killed with SIGKILL, and the fault injector inside
`curate build` that stops it right before its manifest."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

from replay.suite import freeze_suite
from tests.support.curation import copy_workspace, keys_file, policy_file
from tests.support.runs import decision

ROOT = Path(__file__).resolve().parents[2]
ENV = {**os.environ, "PYTHONPATH": str(ROOT)}
CANDIDATE = "cand-v1"
"""The replay run's second arm: an adapter the fault injector lists beside worker-base."""


def killed(proc: subprocess.Popen[str]) -> None:
    proc.send_signal(signal.SIGKILL)
    assert proc.wait(30) == -signal.SIGKILL


def lines(path: Path) -> list[str]:
    return path.read_text().splitlines() if path.exists() else []


def frozen_suite(directory: Path, decisions: int) -> Path:
    directory.mkdir()
    (directory / "suite.toml").write_text('name = "chaos"\nversion = "1"\ncreated = 2026-08-01T00:00:00Z\n')
    (directory / "decisions.jsonl").write_text(
        "".join(decision(i).model_dump_json(exclude_none=False) + "\n" for i in range(decisions)))
    freeze_suite(directory, synthetic=True)
    return directory


def run_config(path: Path, upstream_url: str) -> Path:
    """Two arms (worker-base and CANDIDATE), one request at a time, no retries."""
    path.write_text(f'[endpoint]\nbase_url = "{upstream_url}/v1"\n[runner]\nconcurrency = 1\nretries = 0\n'
                    f'[[arms]]\nname = "base"\nmodel = "worker-base"\n'
                    f'[[arms]]\nname = "cand"\nmodel = "{CANDIDATE}"\n')
    return path


CURATION_POLICY = 'size = 2\nshortfall = "shrink"\nclean_from = ["verified_action"]\n[shares]\nclean = 100\n'
"""A curation policy any copy of the recorded workspace meets."""


def curation_inputs(tmp_path: Path) -> tuple[Path, Path, Path]:
    """A Claude Code corpus, its keys file and a curation policy it meets."""
    copy_workspace(tmp_path / "corpus", "ws-w")
    return tmp_path / "corpus", keys_file(tmp_path, ["ws-w"]), policy_file(tmp_path, CURATION_POLICY)


PAUSE_BEFORE_MANIFEST = """
import pathlib, runpy, sys, time
write_text = pathlib.Path.write_text
def paused(self, *args, **kwargs):
    if self.name == "manifest.json":
        print("paused", flush=True)
        time.sleep(600)
    return write_text(self, *args, **kwargs)
pathlib.Path.write_text = paused
sys.argv = ["worker-replay", *sys.argv[1:]]
runpy.run_module("replay", run_name="__main__", alter_sys=True)
"""
"""A fault injector in the process itself: `worker-replay` as typed, except that it stops for good right before
writing manifest.json, so a kill lands with train.jsonl written and the manifest not."""


def kill_curate_build_mid_write(args: list[str]) -> None:
    """`worker-replay ARGS` (a `curate build`) killed with its set half-written."""
    proc = subprocess.Popen([sys.executable, "-c", PAUSE_BEFORE_MANIFEST, *args], stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, text=True, env=ENV)
    try:
        assert proc.stdout is not None and proc.stdout.readline() == "paused\n"
    finally:
        killed(proc)
