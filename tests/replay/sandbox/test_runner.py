"""The sandbox runner's run directory: one writer at a time, and one result per (arm, scenario)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest

from replay.config import RunConfig
from replay.rundir import RunError, run_lock
from replay.sandbox.cli import _evidence, _score
from replay.sandbox.pack import load_pack
from replay.sandbox.runner import load_sandbox_results, run_sandbox
from tests.replay.sandbox.shop import scenario
from tests.replay.sandbox.test_pack import write
from tests.support.fault_upstream import BASE, FaultUpstream


def config(url: str) -> RunConfig:
    return RunConfig.model_validate({"endpoint": {"base_url": url},
                                     "arms": [{"name": "a", "model": BASE}, {"name": "b", "model": BASE}]})


def test_a_second_sandbox_run_into_the_same_directory_is_refused(tmp_path: Path) -> None:
    pack = load_pack(write(tmp_path / "pack", [scenario()]))
    run_dir = tmp_path / "run"
    with FaultUpstream() as upstream:
        with run_lock(run_dir), pytest.raises(RunError, match="another worker-replay run"):
            run_sandbox(pack, config(f"{upstream.url}/v1"), run_dir)
        assert not (run_dir / "results.jsonl").exists() and not (run_dir / "run.json").exists()
        assert run_sandbox(pack, config(f"{upstream.url}/v1"), run_dir) == (2, 0)  # released: it runs
        assert run_sandbox(pack, config(f"{upstream.url}/v1"), run_dir) == (0, 2)  # and resumes with nothing left


def test_duplicate_results_are_refused_by_score_and_evidence(tmp_path: Path) -> None:
    pack = load_pack(write(tmp_path / "pack", [scenario()]))
    run_dir = tmp_path / "run"
    with FaultUpstream() as upstream:
        run_sandbox(pack, config(f"{upstream.url}/v1"), run_dir)
    results = run_dir / "results.jsonl"
    lines = results.read_text().splitlines()
    results.write_text("\n".join([*lines, lines[0]]) + "\n")  # what two concurrent runs leave
    with pytest.raises(RunError, match=r"results.jsonl:3: .*arm 'a'.*first at line 1"):
        load_sandbox_results(run_dir)
    for action in (_score, _evidence):
        with pytest.raises(RunError, match="second result"):
            action(argparse.Namespace(run_dir=run_dir, baseline="a", candidate="b", out=tmp_path / "ev"))
    assert json.loads(lines[0])["arm"] == "a"
