"""Trials through the gateway's admin API and controller loop. The upstream is the named fault
injector: for the one fault a trial must catch (the candidate answering HTTP 500), and elsewhere
as a stand-in that accepts the fake adapters and answers, so that what is asserted is the trial's
state machine, journal and admin calls, never an engine's answer
(tests/serve/trials/test_trials_live.py runs the same paths on the real engine)."""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from core.attestation import VERDICT_PREDICATE, ResourceDescriptor, Statement
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


def statement(verdict: dict[str, Any], weights: str | None = None) -> str:
    """A verdict as `worker-replay gate` writes it: the predicate of an in-toto Statement, its subject the
    candidate (and its adapter weights, where the judged run recorded them)."""
    subject = [ResourceDescriptor(name=str(verdict["candidate"]), digest={"sha256": "0" * 64})]
    if weights is not None:
        subject.append(ResourceDescriptor(name=f"weights:{verdict['candidate']}", digest={"sha256": weights}))
    return Statement(subject=subject, predicateType=VERDICT_PREDICATE, predicate={"verdict": verdict}).to_json()


def gate(tmp_path: Path, config: str, verdict: dict[str, Any], weights: str | None = None) -> int:
    path = tmp_path / "verdict.json"
    path.write_text(statement(verdict, weights))
    return main(["trial", "gate", "t1", "--config", config, "--verdict", str(path)])


def test_a_healthy_candidate_reaches_the_gate_and_only_a_verdict_bound_to_the_trial_promotes(
        tmp_path: Path, root: Path, fault: FaultUpstream, capsys: pytest.CaptureFixture[str]) -> None:
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
        assert evidence["window"]["trial"] == "t1" and evidence["window"]["since"] == status(gw)["started_at"]
        config = str(tmp_path / "gw" / "gateway.toml")
        assert main(["trial", "evidence", "t1", "--config", config, "--out", str(tmp_path / "ev")]) == 0
        sha = hashlib.sha256(GATE.read_bytes()).hexdigest()
        passing = {"policy": "production-candidate", "policy_sha256": sha, "candidate": "cand-v1", "passed": True,
                   "conditions": [{"status": "pass"}] * 6, "evidence_paths": {"canary": str(tmp_path / "ev" / "canary.json")}}
        for change, refusal in (({"policy_sha256": "0" * 64}, "it is for gate policy"),
                                ({"candidate": "other-v9"}, "it is for candidate 'other-v9'"),
                                ({"conditions": []}, "passes with 0 of 0 conditions passed"),
                                ({"evidence_paths": {}}, "names no evidence window"),
                                ({"tainted_rule_ids": ["lc:x"]}, "rests on results that carried disputed rule(s) "
                                                                  "lc:x")):
            assert gate(tmp_path, config, passing | change) == 2
            assert refusal in capsys.readouterr().err
            assert status(gw)["phase"] == "awaiting_gate"
        wrong = gw.admin("POST", "/trials/t1/gate", {"passed": True, "policy_sha256": sha, "candidate": "other-v9",
                                                      "conditions_passed": 1, "conditions": 1, "window": None})
        assert wrong.status_code == 409 and "candidate 'other-v9'" in wrong.json()["error"]["message"]
        assert gate(tmp_path, config, passing, weights="f" * 64) == 2  # a verdict on other weights of that name
        assert "it judged weights ffffffffffff…, the trial's candidate 'cand-v1' has weights" in capsys.readouterr().err
        [registered] = [a for a in gw.ok("GET", "/state")["adapters"] if a["name"] == "cand-v1"]
        assert gate(tmp_path, config, passing, weights=registered["fingerprint"]) == 0
        assert status(gw)["phase"] == "promoted"
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
        verdict.write_text(statement({"policy": "production-candidate", "policy_sha256": "0" * 64,
                                      "candidate": "cand-v1", "passed": True, "conditions": []}))
        assert main(["trial", "gate", "t1", "--config", config, "--verdict", str(verdict)]) == 2
        assert "not awaiting the gate" in capsys.readouterr().err
        assert main(["trial", "abort", "t1", "--config", config, "--reason", "done"]) == 0
        assert "aborted — operator: done" in capsys.readouterr().out
        assert main(["trial", "status", "nope", "--config", config]) == 2


def test_gateway_names_a_gateway_on_another_port_than_the_configs(tmp_path: Path, root: Path, fault: FaultUpstream,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    """A second checkout's gateway: its config's port has nothing listening, `--gateway` reaches the real one."""
    with start_gateway(tmp_path, root, [fault]) as gw:
        setup(gw, root)
        elsewhere = write_config(tmp_path / "other", [fault.url], root, port=9)
        assert main(["trial", "status", "--config", str(elsewhere)]) == 2
        assert "cannot be reached" in capsys.readouterr().err
        assert main(["trial", "start", "t1", "--config", str(elsewhere), "--gateway", gw.url + "/",
                     "--policy", str(policy(tmp_path))]) == 0
        assert "trial t1 (cand-v1 on worker): step" in capsys.readouterr().out
        assert main(["trial", "status", "t1", "--config", str(elsewhere), "--gateway", gw.url]) == 0


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


def test_the_route_admin_refuses_to_contradict_a_running_trial_and_a_restart_keeps_a_later_canary(
        tmp_path: Path, root: Path, fault: FaultUpstream) -> None:
    with start_gateway(tmp_path, root, [fault]) as gw:
        setup(gw, root)
        gw.ok("POST", "/trials", {"id": "t1", "policy": str(policy(tmp_path, min_requests=10_000))})
        for method, path, body in (("POST", "/routes/worker/canary", {"candidate": "cand-v1", "percent": 100}),
                                   ("DELETE", "/routes/worker/canary", None),
                                   ("POST", "/routes/worker/production", {"version": "cand-v1"}),
                                   ("POST", "/routes/worker/rollback", None)):
            refused = gw.admin(method, path, body)
            assert refused.status_code == 409, (method, path, refused.text)
            assert refused.json()["error"]["code"] == "trial_running" and "trial 't1'" in refused.text
        assert status(gw)["percent"] == 25 and gw.ok("GET", "/state")["routes"]["worker"]["canary"]["percent"] == 25
        gw.ok("POST", "/trials/t1/suspend")
        assert gw.admin("POST", "/adapters/cand-v1/unload").status_code == 409  # resume would route to it
        gw.ok("POST", "/trials/t1/abort", {"reason": "operator takes over"})
        gw.ok("POST", "/routes/worker/canary", {"candidate": "cand-v1", "percent": 5})
    with RunningGateway(tmp_path / "gw" / "gateway.toml") as again:
        assert again.ok("GET", "/state")["routes"]["worker"]["canary"]["percent"] == 5


def test_a_start_that_cannot_happen_creates_nothing_and_leaves_the_name_free(
        tmp_path: Path, root: Path, fault: FaultUpstream) -> None:
    with start_gateway(tmp_path, root, [fault]) as gw:
        setup(gw, root)
        ghost = two_step_policy(tmp_path / "ghost.toml", "ghost", "ghost-v1", 10, 0.01, 600)
        refused = gw.admin("POST", "/trials", {"id": "t1", "policy": str(ghost)})
        assert refused.status_code == 409 and refused.json()["error"]["code"] == "trial_preflight_failed"
        assert "'ghost-v1' is not a registered adapter" in refused.text
        infinite = two_step_policy(tmp_path / "inf.toml", "inf", "cand-v1", 10, 0.01, float("inf"))
        assert gw.admin("POST", "/trials", {"id": "t1", "policy": str(infinite)}).status_code == 422
        slow = two_step_policy(tmp_path / "slow.toml", "slow", "cand-v1", 10, 0.01, 600,
                               "[signals.slow_requests]\nthreshold_s = 1e6\n")
        assert "no request could ever count as slow" in gw.admin("POST", "/trials", {"id": "t1",
                                                                                     "policy": str(slow)}).text
        fifo = tmp_path / "fifo.toml"
        os.mkfifo(fifo)  # nobody writes it: a blocking read on the event loop would freeze the gateway
        answer = gw.admin("POST", "/trials", {"id": "t1", "policy": str(fifo)})
        assert answer.status_code == 422 and "not a regular file" in answer.text
        assert gw.client.get("/health").status_code == 200
        assert gw.admin("GET", "/trials/t1").status_code == 404 and gw.ok("GET", "/trials")["trials"] == []
        assert "worker_trial_aborts_total{" not in gw.metrics()
        assert gw.ok("POST", "/trials", {"id": "t1", "policy": str(policy(tmp_path))})["phase"] == "step"


def test_a_gateway_whose_state_file_is_empty_refuses_to_start(tmp_path: Path, root: Path,
                                                              fault: FaultUpstream) -> None:
    config = write_config(tmp_path / "gw", [fault.url], root)
    (tmp_path / "gw" / "state.sqlite").write_bytes(b"")
    done = subprocess.run([sys.executable, "-m", "serve", "gateway", "--config", str(config)], capture_output=True,
                          text=True, timeout=120, cwd=Path(__file__).resolve().parents[3])
    assert done.returncode == 2
    assert done.stderr.strip().splitlines()[-1].startswith("error: ") and "empty (0-byte)" in done.stderr


class NotJson(BaseHTTPRequestHandler):
    def _answer(self) -> None:
        self.send_response(200 if self.path.endswith("/trials") else 502)
        self.send_header("Content-Type", "text/html")
        self.end_headers()
        self.wfile.write(b"<html>a proxy's page</html>")

    do_GET = do_POST = _answer  # noqa: N815

    def log_message(self, *args: object) -> None:
        pass


@pytest.mark.parametrize("argv", [["status"], ["status", "t1"], ["suspend", "t1"], ["abort", "t1", "--reason", "x"],
                                  ["evidence", "t1", "--out", "EV"], ["start", "t1", "--policy", "p.toml"]])
def test_every_trial_command_says_one_error_line_when_the_port_answers_something_else_or_nothing(
        tmp_path: Path, root: Path, capsys: pytest.CaptureFixture[str], argv: list[str]) -> None:
    argv = [a.replace("EV", str(tmp_path / "ev")) for a in argv]
    server = ThreadingHTTPServer(("127.0.0.1", 0), NotJson)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        config = write_config(tmp_path / "gw", ["http://127.0.0.1:9"], root, port=server.server_address[1])
        assert main(["trial", *argv, "--config", str(config)]) == 2
        err = capsys.readouterr().err
        assert err.startswith("error: ") and err.count("\n") == 1 and "the trial API's" in err
    finally:
        server.shutdown()
        server.server_close()
    assert main(["trial", *argv, "--config", str(config)]) == 2  # nothing listens now
    err = capsys.readouterr().err
    assert err.startswith("error: ") and "cannot be reached" in err


def test_trial_commands_with_bad_files_say_one_error_line(tmp_path: Path, root: Path, fault: FaultUpstream,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    config = str(tmp_path / "gw" / "gateway.toml")
    existing = tmp_path / "a-file"
    existing.write_text("x")
    fifo = tmp_path / "verdict.fifo"
    os.mkfifo(fifo)
    with start_gateway(tmp_path, root, [fault]) as gw:
        setup(gw, root)
        gw.ok("POST", "/trials", {"id": "t1", "policy": str(policy(tmp_path))})
        for argv in (["evidence", "t1", "--out", str(existing)], ["gate", "t1", "--verdict", str(tmp_path)],
                     ["gate", "t1", "--verdict", str(fifo)], ["gate", "t1", "--verdict", str(existing)],
                     ["gate", "t1", "--verdict", str(tmp_path / "absent.json")]):
            assert main(["trial", *argv, "--config", config]) == 2, argv
            err = capsys.readouterr().err
            assert err.startswith("error: ") and err.count("\n") == 1, (argv, err)


@pytest.mark.parametrize("change", [{"step": 9}, {"started_at": None}])
def test_a_corrupt_stored_trial_never_stops_the_gateway_and_its_candidate_gets_no_traffic(
        tmp_path: Path, root: Path, fault: FaultUpstream, change: dict[str, Any]) -> None:
    with start_gateway(tmp_path, root, [fault]) as gw:
        setup(gw, root)
        gw.ok("POST", "/trials", {"id": "t1", "policy": str(policy(tmp_path, min_requests=10_000))})
    db = sqlite3.connect(tmp_path / "gw" / "state.sqlite")
    state = json.loads(db.execute("SELECT state FROM trials").fetchone()[0]) | change
    db.execute("UPDATE trials SET state = ?", (json.dumps(state),))
    db.commit()
    db.close()
    with RunningGateway(tmp_path / "gw" / "gateway.toml") as again:
        assert again.client.get("/health").status_code == 200
        assert again.ok("GET", "/state")["routes"]["worker"]["canary"] is None
        assert again.chat(headers={"X-Workspace-Id": "ws-1"}).headers["X-Worker-Adapter"] == "prod-v1"
        answer = again.admin("GET", "/trials/t1")
        assert answer.status_code == 409 and answer.json()["error"]["code"] == "trial_state_unreadable"
        assert again.ok("GET", "/trials")["trials"][0]["phase"] == "unreadable"


def test_a_trial_past_its_maximum_duration_expires_without_waiting_for_its_next_look(
        tmp_path: Path, root: Path, fault: FaultUpstream) -> None:
    slow_looks = policy(tmp_path, min_requests=10_000, max_duration_s=60)
    slow_looks.write_text(slow_looks.read_text().replace("interval_s = 0.2", "interval_s = 50"))
    with start_gateway(tmp_path, root, [fault]) as gw:
        setup(gw, root)
        gw.ok("POST", "/trials", {"id": "t1", "policy": str(slow_looks)})
        gw.app.state.trials.controller.clock = lambda: time.time() + 120  # its maximum duration has passed
        done = wait_for(lambda: (s := status(gw))["phase"] == "expired" and s, "the expiry", limit_s=30)
        assert done["reason"] == "max duration 60 s reached in step 1"
        assert gw.ok("GET", "/state")["routes"]["worker"]["canary"] is None
