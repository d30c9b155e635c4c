"""Trials through the gateway's admin API and controller loop. The upstream is the named fault
injector: for the one fault a trial must catch (the candidate answering HTTP 500), and elsewhere
as a stand-in that accepts the fake adapters and answers, so that what is asserted is the trial's
state machine, journal and admin calls, never an engine's answer
(tests/serve/trials/test_trials_live.py runs the same paths on the real engine)."""

from __future__ import annotations

import hashlib
import json
import time
from pathlib import Path
from typing import Any

import pytest

from serve.cli import main
from tests.support.fault_upstream import FaultUpstream
from tests.support.gateway_harness import (
    GatewayProcess,
    RunningGateway,
    fake_adapter,
    start_gateway,
    wait_for,
    write_config,
)
from tests.support.trials import GATE, two_step_policy


def policy(tmp_path: Path, min_requests: int = 10, max_duration_s: float = 600) -> Path:
    return two_step_policy(tmp_path / "trial.toml", "http-trial", "cand-v1", min_requests, 0.01, max_duration_s)


def setup(gw: RunningGateway | GatewayProcess, root: Path) -> None:
    for name in ("prod-v1", "cand-v1"):
        fake_adapter(root, name)
        gw.ok("POST", "/adapters", {"name": name, "path": name})
        gw.ok("POST", f"/adapters/{name}/load")
    gw.ok("POST", "/routes/worker/production", {"version": "prod-v1"})


def traffic(gw: RunningGateway | GatewayProcess, workspaces: int, start: int = 0) -> None:
    for i in range(start, start + workspaces):
        gw.chat(headers={"X-Workspace-Id": f"ws-{i}"})


def status(gw: RunningGateway | GatewayProcess, journal: int = 0) -> dict[str, Any]:
    return gw.ok("GET", "/trials/t1", journal=journal)


def test_a_candidate_answering_errors_is_aborted_by_the_controller(tmp_path: Path, root: Path,
                                                                   fault: FaultUpstream) -> None:
    fault.behaviour["cand-v1"] = "fail"
    with start_gateway(tmp_path, root, [fault]) as gw:
        setup(gw, root)
        started = gw.ok("POST", "/trials", {"id": "t1", "policy": str(policy(tmp_path))})
        assert started["phase"] == "step" and started["percent"] == 25
        assert gw.ok("GET", "/state")["routes"]["worker"]["canary"]["candidate"] == "cand-v1"
        traffic(gw, 200)
        done = wait_for(lambda: (s := status(gw))["phase"] == "aborted" and s, "the trial to abort", limit_s=30)
        assert done["reason"].startswith("signal server_errors")
        assert gw.ok("GET", "/state")["routes"]["worker"]["canary"] is None
        assert gw.chat(headers={"X-Workspace-Id": "ws-1"}).headers["X-Worker-Adapter"] == "prod-v1"
        metrics = gw.metrics()
        assert 'worker_trial_aborts_total{candidate="cand-v1",reason="server_errors",route="worker"} 1.0' in metrics
        assert 'worker_trial_phase{candidate="cand-v1",phase="aborted",route="worker",trial="t1"} 1.0' in metrics


def test_a_healthy_candidate_reaches_the_gate_and_only_the_registered_gate_promotes(
        tmp_path: Path, root: Path, fault: FaultUpstream) -> None:
    with start_gateway(tmp_path, root, [fault]) as gw:
        setup(gw, root)
        gw.ok("POST", "/trials", {"id": "t1", "policy": str(policy(tmp_path))})
        traffic(gw, 120)
        wait_for(lambda: status(gw)["step"] == 2, "step 2", limit_s=30)
        traffic(gw, 120, start=120)
        wait_for(lambda: status(gw)["phase"] == "awaiting_gate", "the gate", limit_s=30)
        assert 'worker_trial_step{candidate="cand-v1",route="worker",trial="t1"} 2.0' in gw.metrics()
        evidence = gw.ok("GET", "/trials/t1/evidence")
        assert evidence["canary"]["requests"] > 0 and evidence["control"]["requests"] > 0
        wrong = gw.admin("POST", "/trials/t1/gate", {"passed": True, "policy_sha256": "0" * 64})
        assert wrong.status_code == 409 and "gate policy" in wrong.json()["error"]["message"]
        sha = hashlib.sha256(GATE.read_bytes()).hexdigest()
        promoted = gw.ok("POST", "/trials/t1/gate", {"passed": True, "policy_sha256": sha, "summary": "6/6"})
        assert promoted["phase"] == "promoted"
        route = gw.ok("GET", "/state")["routes"]["worker"]
        assert route["production"] == "cand-v1" and route["previous"] == "prod-v1" and route["canary"] is None


def test_suspend_resume_a_restart_that_resumes_and_abort(tmp_path: Path, root: Path, fault: FaultUpstream) -> None:
    with start_gateway(tmp_path, root, [fault]) as gw:
        setup(gw, root)
        gw.ok("POST", "/trials", {"id": "t1", "policy": str(policy(tmp_path, min_requests=10_000))})
        assert gw.ok("POST", "/trials/t1/suspend")["percent"] == 0
        assert gw.ok("GET", "/state")["routes"]["worker"]["canary"] is None
        assert gw.ok("POST", "/trials/t1/resume")["percent"] == 25
        traffic(gw, 40)
        before = wait_for(lambda: (s := status(gw))["evidence"]["server_errors"]["candidate_exposure"] > 0 and s,
                          "a look")
    with RunningGateway(tmp_path / "gw" / "gateway.toml") as again:  # the same state file, a new gateway
        after = status(again)
        assert after["phase"] == "step" and after["step"] == 1 and after["started_at"] == before["started_at"]
        assert again.ok("GET", "/state")["routes"]["worker"]["canary"]["percent"] == 25
        assert any(j["event"]["type"] == "Recovered" for j in status(again, journal=50)["journal"])
        aborted = again.ok("POST", "/trials/t1/abort", {"reason": "operator test"})
        assert aborted["phase"] == "aborted" and again.ok("GET", "/state")["routes"]["worker"]["canary"] is None
        assert again.admin("POST", "/trials/t1/resume").status_code == 200  # terminal: ignored
        assert again.admin("GET", "/trials/nope").status_code == 404


def test_a_trial_without_enough_traffic_expires_back_to_control(tmp_path: Path, root: Path,
                                                                fault: FaultUpstream) -> None:
    with start_gateway(tmp_path, root, [fault]) as gw:
        setup(gw, root)
        gw.ok("POST", "/trials", {"id": "t1", "policy": str(policy(tmp_path, min_requests=10_000, max_duration_s=2))})
        done = wait_for(lambda: (s := status(gw))["phase"] == "expired" and s, "the trial to expire", limit_s=30)
        assert done["reason"] == "max duration 2 s reached in step 1"
        assert gw.ok("GET", "/state")["routes"]["worker"]["canary"] is None


def test_the_command_line_drives_a_trial_through_the_admin_api(tmp_path: Path, root: Path, fault: FaultUpstream,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    config = str(tmp_path / "gw" / "gateway.toml")
    with start_gateway(tmp_path, root, [fault]) as gw:
        setup(gw, root)
        assert main(["trial", "start", "t1", "--config", config, "--policy", str(policy(tmp_path))]) == 0
        assert "trial t1 (cand-v1 on worker): step, step 1/2 at 25%" in capsys.readouterr().out
        assert main(["trial", "status", "--config", config]) == 0
        assert capsys.readouterr().out.startswith("t1\tworker\tcand-v1\tstep\t")
        assert main(["trial", "evidence", "t1", "--config", config, "--out", str(tmp_path / "ev")]) == 0
        assert json.loads((tmp_path / "ev" / "canary.json").read_text())["adapter"] == "cand-v1"
        verdict = tmp_path / "verdict.json"
        verdict.write_text(json.dumps({"policy": "production-candidate", "policy_sha256": "0" * 64,
                                       "candidate": "cand-v1", "passed": True, "conditions": []}))
        assert main(["trial", "gate", "t1", "--config", config, "--verdict", str(verdict)]) == 2
        assert "not awaiting the gate" in capsys.readouterr().err
        assert main(["trial", "abort", "t1", "--config", config, "--reason", "done"]) == 0
        assert "aborted — operator: done" in capsys.readouterr().out
        assert main(["trial", "status", "nope", "--config", config]) == 2


def test_a_gateway_killed_9_resumes_its_trial_in_a_step_and_at_the_gate_and_never_promotes(
        tmp_path: Path, root: Path, fault: FaultUpstream) -> None:
    """`worker-serve gateway` as its own process, SIGKILLed twice: mid-step the trial comes back in
    the same step with its start time and canary weight; at the gate it waits there, production
    unchanged."""
    gw = GatewayProcess(write_config(tmp_path / "gw", [fault.url], root), tmp_path / "gateway.log").start()
    try:
        setup(gw, root)
        gw.ok("POST", "/trials", {"id": "t1", "policy": str(policy(tmp_path, min_requests=40))})
        traffic(gw, 40)
        before = wait_for(lambda: (s := status(gw))["evidence"]["server_errors"]["candidate_exposure"] > 0 and s,
                          "a look")
        gw.kill()
        gw.start()
        after = status(gw, journal=50)
        assert (after["phase"], after["step"], after["started_at"]) == ("step", 1, before["started_at"])
        assert gw.ok("GET", "/state")["routes"]["worker"]["canary"]["percent"] == 25
        assert any(j["event"]["type"] == "Recovered" for j in after["journal"])
        for start in range(40, 2440, 200):  # each batch gives both cohorts of either step ≥ 40 requests
            traffic(gw, 200, start=start)
            time.sleep(1.0)  # > the step's minimum duration and several looks
            if status(gw)["phase"] == "awaiting_gate":
                break
        assert status(gw)["phase"] == "awaiting_gate"
        gw.kill()
        gw.start()
        assert status(gw)["phase"] == "awaiting_gate"
        assert gw.ok("GET", "/state")["routes"]["worker"]["production"] == "prod-v1"
    finally:
        gw.kill()
