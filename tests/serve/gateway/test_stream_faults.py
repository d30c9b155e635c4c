"""An engine failure inside a stream is an engine failure everywhere (issue 62, item 1): vLLM ends a failed
generation with its API's error event (then `[DONE]` on the chat and completions APIs), and an engine may send
an event that cannot be read. Neither can be produced on demand by the real engine, so the upstream is the
named fault injector. For every API the gateway streams, in a running trial with capture on: the client's
stream ends with the API's error event (never the engine's last event), and the request log, the trial's
server-error count, the per-adapter error metrics and the capture store all agree that the one faulty request
failed and that the two good ones around it were answered."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from core.capture_store import read_decisions
from serve.gateway.routing import canary_bucket
from tests.support.fault_upstream import FaultUpstream
from tests.support.gateway_harness import RunningGateway, fake_adapter, sample, start_gateway, wait_for
from tests.support.trials import two_step_policy

ASK = [{"role": "user", "content": "Find invoice 7."}]
SCHEMA = {"type": "object", "properties": {"id": {"type": "string"}}}
STREAMS: dict[str, tuple[str, dict[str, Any], bytes]] = {  # path, body (tools offered), the engine's last event
    "chat": ("/v1/chat/completions", {"messages": ASK, "tools": [{"type": "function", "function": {
        "name": "lookup", "parameters": SCHEMA}}]}, b"[DONE]"),
    "completions": ("/v1/completions", {"prompt": "Hi", "max_tokens": 4}, b"[DONE]"),
    "messages": ("/v1/messages", {"max_tokens": 4, "messages": ASK, "tools": [{
        "name": "lookup", "input_schema": SCHEMA}]}, b"message_stop"),
    "responses": ("/v1/responses", {"input": "Find invoice 7.", "tools": [{
        "type": "function", "name": "lookup", "parameters": SCHEMA}]}, b"response.completed"),
}
CASES = [*((api, "error_event", "upstream_error") for api in STREAMS),
         *((api, "unreadable_event", "bad_upstream_response") for api in STREAMS),
         ("responses", "failed_response", "upstream_error")]


def workspace(low: float, high: float) -> str:
    """A workspace whose canary bucket for the trial's candidate lies in [low, high)."""
    return next(w for i in range(10_000) if low <= canary_bucket("worker", "cand-v1", w := f"ws-{i}") < high)


def last_error(api: str, text: str) -> tuple[str, str]:
    """The code (Anthropic's error type on the Messages API) and message of the stream's last event, which must
    be the API's error event."""
    name, _, data = text.strip().split("\n\n")[-1].rpartition("data: ")
    event = json.loads(data)
    if api in ("chat", "completions"):
        return event["error"]["code"], event["error"]["message"]
    assert name.strip() == "event: error", text
    if api == "messages":
        assert event["type"] == "error", event
        return event["error"]["type"], event["error"]["message"]
    return event["code"], event["message"]


def stream(gw: RunningGateway, api: str, ws: str, request_id: str) -> tuple[int, str]:
    path, body, _ = STREAMS[api]
    headers = {"X-Workspace-Id": ws, "X-Session-Id": f"s-{ws}", "X-Request-Id": request_id}
    with gw.client.stream("POST", path, json={"model": "worker", "stream": True, **body},
                          headers=headers) as response:
        return response.status_code, response.read().decode()


@pytest.mark.parametrize(("api", "mode", "reason"), CASES)
def test_a_failed_or_unreadable_stream_is_an_engine_failure_in_every_record(
        tmp_path: Path, root: Path, fault: FaultUpstream, api: str, mode: str, reason: str) -> None:
    capture = '[capture]\nmode = "descriptor"\nsample_rate = 1.0\n'
    policy = two_step_policy(tmp_path / "trial.toml", "t", "cand-v1", 10_000, 0.01, 600)
    candidate, control = workspace(0, 25), workspace(25, 50)
    with start_gateway(tmp_path, root, [fault], extra=capture) as gw:
        for name in ("prod-v1", "cand-v1"):
            fake_adapter(root, name)
            gw.ok("POST", "/adapters", {"name": name, "path": name})
            gw.ok("POST", f"/adapters/{name}/load")
        gw.ok("POST", "/routes/worker/production", {"version": "prod-v1"})
        assert gw.ok("POST", "/trials", {"id": "t1", "policy": str(policy)})["percent"] == 25

        status, good = stream(gw, api, candidate, "good-1")
        assert status == 200 and STREAMS[api][2] in good.encode(), good
        fault.behaviour["cand-v1"] = mode
        status, failed = stream(gw, api, candidate, "bad")
        fault.behaviour["cand-v1"] = "ok"
        assert status == 200  # the stream had started: only its last event can say it failed
        assert STREAMS[api][2] not in failed.encode() and "\x00" not in failed, failed
        code, message = last_error(api, failed)
        assert code == ("api_error" if api == "messages" else reason), failed
        assert ("Internal server error" if reason == "upstream_error" else "cannot be read") in message, failed
        assert stream(gw, api, candidate, "good-2")[0] == 200
        assert stream(gw, api, control, "control")[0] == 200

        logged = {row["request_id"]: (row["status"], row["reason"]) for row in gw.ok("GET", "/requests")["requests"]}
        assert logged == {"good-1": (200, None), "bad": (502, reason), "good-2": (200, None),
                          "control": (200, None)}
        labels = {"adapter": "cand-v1", "kind": "canary", "api": api}
        assert sample(gw, "worker_gateway_errors_total", **labels, reason=reason) == 1
        assert sample(gw, "worker_gateway_requests_total", **labels, status="502") == 1
        assert sample(gw, "worker_gateway_requests_total", **labels, status="200") == 2
        errors = wait_for(lambda: (e := gw.ok("GET", "/trials/t1")["evidence"]["server_errors"])[
            "candidate_exposure"] == 3 and e, "the trial to count the candidate's requests", 30)
        assert (errors["candidate_bad"], errors["control_bad"], errors["control_exposure"]) == (1, 0, 1)

        db = gw.config.capture.db
        if api == "completions":  # completions are never decisions
            assert read_decisions(db) == []
        else:
            wait_for(lambda: len(read_decisions(db)) == 3, "the three answers to be captured")
            captured = read_decisions(db)
            assert sorted(d.request_id or "" for d in captured) == ["control", "good-1", "good-2"]
            assert all(d.parse_outcome != "malformed_call" for d in captured)

