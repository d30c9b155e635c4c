"""A real replay of a demo-suite slice on the CPU engine: base and a seeded adapter, killed and resumed."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from collections import Counter

import pytest

from core.records import ResultRecord
from tests.support.runs import demo_slice

pytestmark = pytest.mark.engine
STRATA = ("verified_recovery", "clean_trajectory_action", "verified_action", "known_failure")


@pytest.fixture(scope="module")
def slice_suite(tmp_path_factory):
    """One decision of each held-out stratum from the demo suite, frozen as its own suite."""
    root = tmp_path_factory.mktemp("demo")
    demo_slice(root / "slice", root / "demo", STRATA)
    return root / "slice"


def write_config(path, engine, max_tokens=96):
    path.write_text(f"""
[endpoint]
base_url = "{engine.base_url}/v1"
[decoding]
max_tokens = {max_tokens}
[runner]
concurrency = 4
[[arms]]
name = "base"
model = "worker-base"
[[arms]]
name = "seeded"
model = "seed2-v1"
""")
    return path


def replay(suite, config, out, ledger):
    return [sys.executable, "-m", "replay", "run", "--suite", str(suite), "--config", str(config),
            "--out", str(out), "--ledger", str(ledger)]


def result_lines(path):
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def test_replay_killed_midway_resumes_with_exactly_one_result_per_pair(engine, engine_adapter, slice_suite, tmp_path):
    assert engine_adapter(2) == "seed2-v1"
    config, out, ledger = write_config(tmp_path / "run.toml", engine), tmp_path / "run", tmp_path / "ledger.sqlite"
    results = out / "results.jsonl"

    first = subprocess.Popen(replay(slice_suite, config, out, ledger), stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 600
    while len(result_lines(results)) < 2 and first.poll() is None and time.monotonic() < deadline:
        time.sleep(0.2)
    first.send_signal(signal.SIGKILL)
    first.wait()
    killed_at = len(result_lines(results))
    assert 0 < killed_at < 8, "the kill should land mid-run"

    resumed = subprocess.run(replay(slice_suite, config, out, ledger), capture_output=True, text=True, timeout=900)
    assert resumed.returncode == 0, resumed.stderr
    assert f"{8 - killed_at} result(s) written, {killed_at} already there" in resumed.stdout
    assert f"{8 - killed_at}/{8 - killed_at}" in resumed.stderr  # the progress line reached the end

    rows = [ResultRecord.model_validate(r) for r in result_lines(results)]
    pairs = Counter((r.arm, r.decision_id) for r in rows)
    assert len(pairs) == 8 and set(pairs.values()) == {1}
    assert all(r.parsed.outcome != "transport_error" for r in rows)
    assert {r.model for r in rows} == {"worker-base", "seed2-v1"}
    run_json = json.loads((out / "run.json").read_text())
    assert run_json["suite"]["decisions"] == 4 and "seed2-v1" in run_json["models"]

    again = subprocess.run(replay(slice_suite, config, out, ledger), capture_output=True, text=True, timeout=120)
    assert again.returncode == 0 and "0 result(s) written, 8 already there" in again.stdout
    assert len(result_lines(results)) == 8

    changed = subprocess.run(replay(slice_suite, write_config(tmp_path / "run2.toml", engine, max_tokens=64), out, ledger),
                             capture_output=True, text=True, timeout=120)
    assert changed.returncode == 2
    assert "config.decoding.max_tokens: 96 -> 64" in changed.stderr and "Traceback" not in changed.stderr

    compare = subprocess.run([sys.executable, "-m", "replay", "compare", str(out), "--baseline", "base",
                              "--candidate", "seeded", "--json", "--ledger", str(ledger)],
                             capture_output=True, text=True, timeout=120)
    assert compare.returncode == 0, compare.stderr
    assert json.loads(compare.stdout)["baseline"] == "base"
