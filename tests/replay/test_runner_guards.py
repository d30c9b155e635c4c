"""Run-directory guards of the replay runner (issue 14 items 3 and 5)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from core.records import Decision
from replay.config import RunConfig
from replay.runner import RunError, plan, run_lock, start_run
from replay.suite import Suite, SuiteManifest

BASE = "worker-base"

TOOLS = [{"type": "function", "function": {"name": "list_invoices", "parameters": {"type": "object", "properties": {}}}}]


def decision(i: int) -> Decision:
    return Decision.model_validate({
        "id": f"d-{i}", "stratum": "verified_action", "cluster": "c", "workspace": "ws-a", "session": f"s-{i}",
        "captured_at": "2026-07-01T10:00:00Z",
        "request": {"messages": [{"role": "user", "content": f"task {i}"}], "tools": TOOLS, "tool_choice": "auto"},
        "target": {"tool": "list_invoices", "arg_keys": []},
    })


def suite(tmp_path: Path) -> Suite:
    manifest = SuiteManifest(name="t", version="1", created="2026-08-01T00:00:00Z")
    return Suite(tmp_path / "suite", manifest, (decision(1), decision(2)), "0" * 64)


def config(base_url: str = "http://127.0.0.1:9/v1", memory: str = "withheld", **extra: object) -> RunConfig:
    return RunConfig.model_validate({"endpoint": {"base_url": base_url, "timeout_s": 10},
                                     "runner": {"retries": 0, "concurrency": 1},
                                     "arms": [{"name": "base", "model": BASE, "memory": memory}], **extra})


# --- item 5: the whole plan is checked before anything is written ------------------------


def test_a_plan_error_writes_nothing_and_names_the_missing_memory_root(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    with pytest.raises(RunError, match=r"\[memory\] root") as info:
        start_run(suite(tmp_path), config(memory="workspace"), run_dir, [BASE], None)
    assert "arm base" in str(info.value)
    assert not (run_dir / "run.json").exists() and not (run_dir / "results.jsonl").exists()
    # the corrected config is a new run, not "mixing results"
    root = tmp_path / "memory"
    (root / "ws-a").mkdir(parents=True)
    (root / "ws-a" / "MEMORY.md").write_text("# Memory\n")
    fixed = RunConfig.model_validate(
        {**json.loads(config(memory="workspace").model_dump_json()), "memory": {"root": str(root)}})
    with run_lock(run_dir):
        items = start_run(suite(tmp_path), fixed, run_dir, [BASE], None)
    assert len(items) == 2 and (run_dir / "run.json").exists()


def test_a_missing_workspace_directory_is_named(tmp_path: Path) -> None:
    root = tmp_path / "memory"
    root.mkdir()
    cfg = RunConfig.model_validate({**json.loads(config(memory="workspace").model_dump_json()),
                                    "memory": {"root": str(root)}})
    with pytest.raises(RunError, match=str(root / "ws-a")):
        plan(suite(tmp_path), cfg, set())


# --- item 3: one writer per run directory -------------------------------------------------


def test_a_second_run_into_the_same_directory_is_refused(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    with run_lock(run_dir), pytest.raises(RunError, match="another worker-replay run") as info, run_lock(run_dir):
        pass
    assert str(run_dir) in str(info.value)
    with run_lock(run_dir):  # released: the next run (a resume) may start
        pass


def test_the_lock_of_a_killed_run_is_released_so_it_can_resume(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    holder = textwrap.dedent(f"""
        import sys, time
        from pathlib import Path
        from replay.runner import run_lock
        with run_lock(Path({str(run_dir)!r})):
            print("locked", flush=True)
            time.sleep(600)
    """)
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    proc = subprocess.Popen([sys.executable, "-c", holder], stdout=subprocess.PIPE, text=True, env=env)
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "locked"
        with pytest.raises(RunError, match="another worker-replay run"), run_lock(run_dir):
            pass
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(30)
    with run_lock(run_dir):
        pass
