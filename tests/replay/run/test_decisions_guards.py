"""Run-directory guards of the replay runner (issue 14 items 3 and 5)."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from replay.run.decisions import plan, start_run
from replay.run.directory import RunError, run_lock
from replay.run.run_config import RunConfig
from tests.support.cli import run_cli
from tests.support.runs import BASE, config, suite

# --- item 5: the whole plan is checked before anything is written ------------------------


def test_a_plan_error_writes_nothing_and_names_the_missing_memory_root(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    with pytest.raises(RunError, match=r"\[memory\] root") as info:
        cfg = config(memory="workspace")
        start_run(suite(tmp_path), cfg, run_dir, {cfg.endpoint.base_url: [BASE]}, None)
    assert "arm base" in str(info.value)
    assert not (run_dir / "run.json").exists() and not (run_dir / "results.jsonl").exists()
    # the corrected config is a new run, not "mixing results"
    root = tmp_path / "memory"
    (root / "ws-a").mkdir(parents=True)
    (root / "ws-a" / "MEMORY.md").write_text("# Memory\n")
    fixed = RunConfig.model_validate(
        {**json.loads(config(memory="workspace").model_dump_json()), "memory": {"root": str(root)}})
    with run_lock(run_dir):
        items = start_run(suite(tmp_path), fixed, run_dir, {fixed.endpoint.base_url: [BASE]}, None)
    assert len(items) == 2 and (run_dir / "run.json").exists()


def test_a_missing_workspace_directory_is_named(tmp_path: Path) -> None:
    root = tmp_path / "memory"
    root.mkdir()
    cfg = RunConfig.model_validate({**json.loads(config(memory="workspace").model_dump_json()),
                                    "memory": {"root": str(root)}})
    with pytest.raises(RunError, match=str(root / "ws-a")) as info:
        plan(suite(tmp_path), cfg, set())
    assert f"`worker-replay memory init {root} ws-a`" in str(info.value)  # the command that makes it, as typed


def test_the_command_the_refusal_names_makes_workspace_send_what_withheld_sends(tmp_path: Path) -> None:
    """A workspace recorded with no memory, given the empty tree the refusal's command makes: its `workspace`
    arm plans, and sends the very request its `withheld` arm sends."""
    root = tmp_path / "memory"
    cfg = RunConfig.model_validate({**json.loads(config(memory="workspace").model_dump_json()),
                                    "memory": {"root": str(root)}})
    with pytest.raises(RunError) as info:
        plan(suite(tmp_path), cfg, set())
    command = re.search(r"`worker-replay (memory init [^`]+)`", str(info.value))
    assert command is not None
    done = run_cli("replay", *command.group(1).split(), cwd=tmp_path)
    assert done.returncode == 0 and "ws-a: made, empty" in done.stdout, done.stderr
    injected = plan(suite(tmp_path), cfg, set())
    withheld = plan(suite(tmp_path), config(memory="withheld"), set())
    assert [(i.decision.id, i.messages, i.rule_ids) for i in injected] == [
        (i.decision.id, i.messages, i.rule_ids) for i in withheld] and injected


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
        from replay.run.directory import run_lock
        with run_lock(Path({str(run_dir)!r})):
            print("locked", flush=True)
            time.sleep(600)
    """)
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[3])}
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
