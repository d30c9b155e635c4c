"""Sandboxed episodes on the real CPU engine: base vs a seeded adapter over three demo scenarios,
killed mid-run and resumed, re-scored byte for byte, and into the gate conditions."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from demo.scenario_pack import write_pack
from replay.analysis.compare import Comparison
from replay.analysis.gates import Status, evaluate, load_policy
from replay.sandbox.pack import freeze_pack
from replay.sandbox.runner import load_sandbox_results
from replay.stats import overhead

pytestmark = pytest.mark.engine
REPO = Path(__file__).resolve().parents[3]
PICK = ("recover-01", "confirm-01", "pii-01")


@pytest.fixture(scope="module")
def slice_pack(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Three demo scenarios with tight limits, frozen as their own pack."""
    root = tmp_path_factory.mktemp("sandbox")
    full = write_pack(root / "full", seed=0)
    out = root / "slice"
    out.mkdir()
    toml = (full / "pack.toml").read_text().split("\n[frozen]")[0]
    (out / "pack.toml").write_text(toml.replace('name = "demo-sandbox"', 'name = "slice"'))
    lines = []
    for line in (full / "scenarios.jsonl").read_text().splitlines():
        scenario = json.loads(line)
        if scenario["id"] in PICK:
            scenario["limits"] = {"max_steps": 3, "max_errors": 2}
            lines.append(json.dumps(scenario) + "\n")
    (out / "scenarios.jsonl").write_text("".join(lines))
    freeze_pack(out)
    return out


def write_config(path: Path, base_url: str, max_tokens: int = 48) -> Path:
    path.write_text(f"""
[endpoint]
base_url = "{base_url}/v1"
[decoding]
max_tokens = {max_tokens}
[runner]
concurrency = 2
[[arms]]
name = "base"
model = "worker-base"
[[arms]]
name = "seeded"
model = "seed2-v1"
""")
    return path


def cli(*args: str | Path) -> list[str]:
    return [sys.executable, "-m", "replay", "sandbox", *map(str, args)]


def lines(path: Path) -> int:
    return len(path.read_text().splitlines()) if path.exists() else 0


def test_sandbox_run_killed_midway_resumes_rescores_and_feeds_the_gate(engine, engine_adapter, slice_pack,
                                                                       tmp_path: Path) -> None:
    assert engine_adapter(2) == "seed2-v1"
    config, out = write_config(tmp_path / "run.toml", engine.base_url), tmp_path / "run"
    results = out / "results.jsonl"
    run = cli("run", "--pack", slice_pack, "--config", config, "--out", out)

    first = subprocess.Popen(run, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 600
    while lines(results) < 1 and first.poll() is None and time.monotonic() < deadline:
        time.sleep(0.2)
    first.send_signal(signal.SIGKILL)
    first.wait()
    killed_at = lines(results)
    assert 0 < killed_at < 6, "the kill should land mid-run"

    resumed = subprocess.run(run, capture_output=True, text=True, check=False, timeout=900)
    assert resumed.returncode == 0, resumed.stderr
    assert f"{6 - killed_at} episode(s) run, {killed_at} already there" in resumed.stdout
    rows = load_sandbox_results(out)
    assert Counter((r.arm, r.scenario_id) for r in rows) == {(a, s): 1 for a in ("base", "seeded") for s in PICK}
    assert {r.model for r in rows} == {"worker-base", "seed2-v1"} and {r.endpoint_kind for r in rows} == {"engine"}
    for r in rows:
        t = r.trajectory
        assert t.turns and t.turns[0].request_delta[0]["role"] == "system"
        assert t.ended_by != "transport_error", t.turns[-1].error
        assert len(t.ledger) <= 3 and r.scores.steps == len(t.ledger)
        assert t.end_state_hash == (t.ledger[-1].state_after if t.ledger else t.end_state_hash)
        assert 0 < r.sandbox_s < r.episode_s

    changed = subprocess.run(cli("run", "--pack", slice_pack, "--config",
                                 write_config(tmp_path / "run2.toml", engine.base_url, max_tokens=40), "--out", out),
                             capture_output=True, text=True, check=False, timeout=120)
    assert changed.returncode == 2 and "config.decoding.max_tokens: 48 -> 40" in changed.stderr

    rescored = subprocess.run(cli("score", out), capture_output=True, text=True, check=False, timeout=120)
    assert rescored.returncode == 0 and "6/6 episode(s) re-scored byte-identical" in rescored.stdout

    evidence = subprocess.run(cli("evidence", out, "--baseline", "base", "--candidate", "seeded", "--out",
                                  tmp_path / "evidence"), capture_output=True, text=True, check=False, timeout=120)
    assert evidence.returncode == 0, evidence.stderr
    assert "task_completed (higher is better)" in evidence.stdout and "confirm-before-mutation" in evidence.stdout
    flags = dict(part.split("=", 1) for part in evidence.stdout.split() if "=" in part and "/" in part)
    assert set(flags) == {"isolated_replay", "unsupported_completion", "critical_failures"}

    comparison = Comparison(baseline="base", candidate="seeded", decisions=0, correctness=[], repeats=[],
                            overhead=overhead([], [], [], []), comparisons_made=0)
    verdict = evaluate(load_policy(REPO / "configs/gates/serious-candidate.toml"), comparison, flags)
    judged = {c.id: c.status for c in verdict.conditions}
    for condition in ("critical-failures", "unsupported-completion", "isolated-replay-completion"):
        assert judged[condition] in (Status.PASS, Status.FAIL), (condition, verdict.conditions)
