"""Faults the real engine cannot produce on demand, through the real gateway over HTTP:
HTTP 500, malformed bodies, broken and endless streams, an engine that goes away and comes
back empty, a hanging or failing shadow candidate. Bad client input is checked here too, with no
upstream at all where the gateway answers before any upstream call. Shadow sampling and real
answers are proven against the real engine (test_app_live.py, test_capture.py)."""

from __future__ import annotations

import json

import httpx
import pytest

from tests.support.fault_upstream import FaultUpstream
from tests.support.gateway_harness import RunningGateway, fake_adapter, start_gateway, wait_for

TOOLS = [{"type": "function", "function": {"name": "lookup", "parameters": {"type": "object"}}}]


def add_adapter(gw: RunningGateway, root, name: str) -> None:
    fake_adapter(root, name)
    gw.ok("POST", "/adapters", {"name": name, "path": name})
    gw.ok("POST", f"/adapters/{name}/load")


def error_of(response: httpx.Response) -> dict:
    body = response.json()
    assert set(body["error"]) >= {"message", "type", "code"}, body
    return body["error"]


def sample(gw: RunningGateway, name: str, labels: dict) -> float | None:
    from prometheus_client.parser import text_string_to_metric_families

    for family in text_string_to_metric_families(gw.metrics()):
        for s in family.samples:
            if s.name == name and all(s.labels.get(k) == v for k, v in labels.items()):
                return s.value
    return None


def test_upstream_500_and_malformed_bodies_become_502_in_openai_shape(tmp_path, root, fault):
    with start_gateway(tmp_path, root, [fault]) as gw:
        for name, mode in (("boom-v1", "fail"), ("garbled-v1", "malformed"), ("empty-v1", "no_choices"),
                           ("deep-v1", "deep")):
            add_adapter(gw, root, name)
            fault.behaviour[name] = mode
        boom = gw.chat("boom-v1")
        assert boom.status_code == 502 and "engine exploded" in error_of(boom)["message"]
        assert error_of(boom)["code"] == "upstream_error"
        for name in ("garbled-v1", "empty-v1", "deep-v1"):
            response = gw.chat(name)
            assert response.status_code == 502
            assert error_of(response)["code"] == "bad_upstream_response"
        assert sample(gw, "worker_gateway_errors_total", {"adapter": "garbled-v1", "kind": "pinned",
                                                          "reason": "bad_upstream_response"}) == 1


def test_a_stream_that_breaks_off_ends_with_an_error_event(tmp_path, root, fault):
    with start_gateway(tmp_path, root, [fault]) as gw:
        add_adapter(gw, root, "brittle-v1")
        fault.behaviour["brittle-v1"] = "break_stream"
        response = gw.chat("brittle-v1", stream=True)
        assert response.status_code == 200
        events = [line[6:] for line in response.text.splitlines() if line.startswith("data: ")]
        assert json.loads(events[0])["choices"][0]["delta"]["content"] == "Hel"
        assert json.loads(events[-1])["error"]["code"] == "stream_interrupted"
        assert sample(gw, "worker_gateway_requests_total", {"adapter": "brittle-v1", "status": "502"}) == 1


def test_client_leaving_mid_stream_closes_the_upstream_stream(tmp_path, root, fault):
    with start_gateway(tmp_path, root, [fault]) as gw:
        add_adapter(gw, root, "chatty-v1")
        fault.behaviour["chatty-v1"] = "endless_stream"
        body = {"model": "chatty-v1", "messages": [{"role": "user", "content": "hi"}], "stream": True}
        with httpx.Client(base_url=gw.url, timeout=30) as client, \
                client.stream("POST", "/v1/chat/completions", json=body) as response:
            assert response.status_code == 200
            next(response.iter_bytes())
        wait_for(lambda: fault.stream_disconnects == 1, "the upstream to see the client go")
        wait_for(lambda: sample(gw, "worker_gateway_requests_total", {"adapter": "chatty-v1", "status": "499"}),
                 "the disconnect to be counted")
        assert gw.ok("GET", "/state")["upstreams"][0]["busy"] == 0


def test_client_giving_up_on_an_unstreamed_answer_cancels_the_upstream_request(tmp_path, root, fault):
    with start_gateway(tmp_path, root, [fault]) as gw:
        add_adapter(gw, root, "stuck-v1")
        fault.behaviour["stuck-v1"] = "hang"
        with pytest.raises(httpx.ReadTimeout):
            httpx.post(f"{gw.url}/v1/chat/completions", timeout=httpx.Timeout(30, read=0.5),
                       json={"model": "stuck-v1", "messages": [{"role": "user", "content": "hi"}]})
        wait_for(lambda: fault.abandoned == 1, "the upstream request to be cancelled")
        assert fault.in_flight == 0
        requests = wait_for(lambda: gw.ok("GET", "/requests")["requests"], "the request to be logged")
        assert (requests[0]["status"], requests[0]["reason"]) == (499, "client_disconnected")


@pytest.mark.parametrize(("content", "code"), [
    (b'{"model": "worker", "messages": [', "invalid_json"),
    (b'["not", "an", "object"]', "invalid_json"),
    (b'{"model": 7, "messages": []}', "invalid_model"),
])
def test_bad_request_bodies_get_400(tmp_path, root, no_upstream, content, code):
    with start_gateway(tmp_path, root, [no_upstream]) as gw:
        response = gw.client.post("/v1/chat/completions", content=content,
                                  headers={"Content-Type": "application/json"})
        assert response.status_code == 400 and error_of(response)["code"] == code


@pytest.mark.parametrize("content", [b"[" * 100_000, b'{"a": ' * 100_000, b'{"model": "worker", "messages": '
                                     + b"[" * 100_000 + b"]" * 100_000 + b"}"])
def test_deeply_nested_bodies_get_400_and_are_counted(tmp_path, root, no_upstream, content):
    """Issue 14 item 7: a body the parser cannot read is the client's error, never a 500."""
    with start_gateway(tmp_path, root, [no_upstream]) as gw:
        response = gw.client.post("/v1/chat/completions", content=content,
                                  headers={"Content-Type": "application/json"})
        assert response.status_code == 400 and error_of(response)["code"] == "invalid_json"
        assert "nested" in error_of(response)["message"]
        assert sample(gw, "worker_gateway_requests_total", {"status": "400"}) == 1
        assert sample(gw, "worker_gateway_errors_total", {"reason": "invalid_json"}) == 1


@pytest.mark.parametrize("stream", ["true", 1, "false", [], {}])
def test_a_non_boolean_stream_flag_gets_400(tmp_path, root, fault, stream):
    """Issue 14 item 12: not a 502 from the engine's answer, not a server error in canary evidence.
    The refused requests never reach the stand-in; it only shows that `null` is passed on."""
    with start_gateway(tmp_path, root, [fault]) as gw:
        response = gw.chat(stream=stream)
        assert response.status_code == 400 and error_of(response)["code"] == "invalid_stream"
        assert "'stream'" in error_of(response)["message"]
        assert fault.requests == []
        assert gw.chat(stream=None).status_code == 200  # null means "not streamed", as in OpenAI's API


def test_a_json_answer_to_a_stream_request_is_a_bad_upstream_response(tmp_path, root, fault):
    with start_gateway(tmp_path, root, [fault]) as gw:
        add_adapter(gw, root, "flat-v1")
        fault.behaviour["flat-v1"] = "json_for_stream"
        response = gw.chat("flat-v1", stream=True)
        assert response.status_code == 502 and error_of(response)["code"] == "bad_upstream_response"
        assert "application/json" in error_of(response)["message"]
        assert sample(gw, "worker_gateway_requests_total", {"adapter": "flat-v1", "status": "502"}) == 1
        assert gw.ok("GET", "/state")["upstreams"][0]["busy"] == 0


def test_a_stream_that_never_starts_names_the_stream_idle_timeout(tmp_path, root, fault):
    with start_gateway(tmp_path, root, [fault], gateway="stream_idle_timeout_s = 0.3") as gw:
        add_adapter(gw, root, "mute-v1")
        fault.behaviour["mute-v1"] = "hang"
        response = gw.chat("mute-v1", stream=True)
        fault.release()
        assert response.status_code == 504 and error_of(response)["code"] == "upstream_timeout"
        assert "stream_idle_timeout_s" in error_of(response)["message"]
        assert "request_timeout_s" not in error_of(response)["message"]


def test_oversized_bodies_get_413_with_or_without_content_length(tmp_path, root, fault):
    """Refused bodies never reach the stand-in upstream (its request log stays empty); it only
    shows that a small body still passes the limit."""
    with start_gateway(tmp_path, root, [fault], gateway="max_body_bytes = 2048") as gw:
        big = json.dumps({"model": "worker", "messages": [{"role": "user", "content": "x" * 4096}]}).encode()
        assert gw.client.post("/v1/chat/completions", content=big).status_code == 413
        chunked = gw.client.post("/v1/chat/completions", content=iter([big[:1500], big[1500:]]))
        assert "content-length" not in chunked.request.headers
        assert chunked.status_code == 413 and error_of(chunked)["code"] == "body_too_large"
        admin = gw.admin("POST", "/adapters", {"name": "x" * 10, "path": "p" * 4096})
        assert admin.status_code == 413
        assert fault.requests == []
        assert gw.chat().status_code == 200  # a small body still passes


def test_unknown_or_unloaded_models_get_404(tmp_path, root, no_upstream):
    with start_gateway(tmp_path, root, [no_upstream]) as gw:
        missing = gw.chat("no-such-model")
        assert missing.status_code == 404 and error_of(missing)["code"] == "model_not_found"
        fake_adapter(root, "idle-v1")
        gw.ok("POST", "/adapters", {"name": "idle-v1", "path": "idle-v1"})
        idle = gw.chat("idle-v1")
        assert idle.status_code == 404 and error_of(idle)["code"] == "model_not_loaded"
        assert sample(gw, "worker_gateway_requests_total", {"route": "", "kind": "", "status": "404"}) == 2


def test_engine_down_gives_503_with_retry_after_and_recovers_with_its_adapters(tmp_path, root, fault):
    with start_gateway(tmp_path, root, [fault]) as gw:
        add_adapter(gw, root, "prod-v1")
        gw.ok("POST", "/routes/worker/production", {"version": "prod-v1"})
        fault.stop()
        down = gw.chat()
        assert down.status_code == 503 and down.headers["retry-after"] == "2"
        assert error_of(down)["code"] == "engine_unavailable"
        health = gw.client.get("/health")
        assert health.status_code == 503 and health.headers["retry-after"] == "2"
        assert sample(gw, "worker_gateway_upstream_healthy", {"upstream": "engine-0"}) == 0
        fault.start()  # a fresh engine: no adapters loaded
        wait_for(lambda: gw.client.get("/health").status_code == 200, "the gateway to see the engine again")
        assert fault.adapters == {"prod-v1": str((root / "prod-v1").resolve())}  # re-applied without an admin call
        answer = gw.chat()
        assert answer.status_code == 200 and answer.headers["x-worker-adapter"] == "prod-v1"


def test_an_adapter_lost_by_the_engine_is_503_then_re_applied(tmp_path, root, fault):
    # Probes only at start-up: the engine's 404 itself must trigger the re-apply.
    with start_gateway(tmp_path, root, [fault], health_interval_s=3600) as gw:
        add_adapter(gw, root, "prod-v1")
        gw.ok("POST", "/routes/worker/production", {"version": "prod-v1"})
        assert gw.chat().status_code == 200
        del fault.adapters["prod-v1"]
        lost = gw.chat()
        assert lost.status_code == 503 and "re-applied" in error_of(lost)["message"]
        wait_for(lambda: "prod-v1" in fault.adapters, "the adapter to be loaded again")
        assert gw.chat().status_code == 200


def test_slow_shadow_never_delays_production_and_overflow_is_dropped(tmp_path, root, fault):
    extra = "[shadow]\nqueue_size = 1\nconcurrency = 1\ntimeout_s = 120\n"
    with start_gateway(tmp_path, root, [fault], extra=extra) as gw:
        add_adapter(gw, root, "prod-v1")
        add_adapter(gw, root, "sleepy-v1")
        gw.ok("POST", "/routes/worker/production", {"version": "prod-v1"})
        gw.ok("POST", "/routes/worker/shadow", {"candidate": "sleepy-v1", "sample_rate": 1.0})
        fault.behaviour["sleepy-v1"] = "hang"
        first = gw.chat(tools=TOOLS)
        assert first.status_code == 200 and first.headers["x-worker-adapter"] == "prod-v1"
        wait_for(lambda: fault.in_flight == 1, "the shadow request to reach the candidate")
        # Production answers while the shadow is still waiting on the candidate.
        assert gw.chat(tools=TOOLS).status_code == 200  # its shadow waits in the queue (size 1)
        assert gw.chat(tools=TOOLS, stream=True).status_code == 200  # its shadow finds the queue full
        assert fault.in_flight == 1 and gw.ok("GET", "/shadow")["results"] == []
        assert sample(gw, "worker_gateway_shadow_dropped_total", {"route": "worker", "reason": "queue_full"}) == 1
        fault.release()
        results = wait_for(lambda: len(gw.ok("GET", "/shadow")["results"]) == 2 and gw.ok("GET", "/shadow"),
                           "both queued shadows to finish")["results"]
        assert {r["agreement"] for r in results} == {"exact"}
        assert all(r["production_tool"] == r["shadow_tool"] == "lookup" for r in results)
        assert sample(gw, "worker_gateway_shadow_comparisons_total",
                      {"route": "worker", "candidate": "sleepy-v1", "agreement": "exact"}) == 2


def test_failing_shadow_is_recorded_and_production_is_unaffected(tmp_path, root, fault):
    with start_gateway(tmp_path, root, [fault]) as gw:
        add_adapter(gw, root, "broken-v1")
        gw.ok("POST", "/routes/worker/shadow", {"candidate": "broken-v1", "sample_rate": 1.0})
        fault.behaviour["broken-v1"] = "fail"
        answer = gw.chat(tools=TOOLS, stream=True)
        assert answer.status_code == 200 and answer.headers["x-worker-kind"] == "production"
        result = wait_for(lambda: gw.ok("GET", "/shadow")["results"], "the shadow comparison")[0]
        assert (result["production_outcome"], result["shadow_outcome"], result["agreement"]) == (
            "ok", "transport_error", "unparsed")
        assert result["production_answer"]["tool_calls"][0]["function"]["name"] == "lookup"  # rebuilt from SSE
        assert "engine exploded" in result["error"]
        assert sample(gw, "worker_gateway_errors_total", {"adapter": "broken-v1", "kind": "shadow",
                                                          "reason": "upstream_error"}) == 1


def test_workspaces_stick_to_a_replica_and_move_only_when_it_is_down(tmp_path, root):
    with FaultUpstream() as one, FaultUpstream() as two, start_gateway(tmp_path, root, [one, two]) as gw:
        placement = {}
        for i in range(12):
            response = gw.chat(headers={"X-Workspace-Id": f"ws-{i}"})
            placement[f"ws-{i}"] = response.headers["x-worker-upstream"]
            again = gw.chat(headers={"X-Workspace-Id": f"ws-{i}"})
            assert again.headers["x-worker-upstream"] == placement[f"ws-{i}"]
        assert set(placement.values()) == {"engine-0", "engine-1"}
        two.stop()
        for workspace in placement:
            response = gw.chat(headers={"X-Workspace-Id": workspace})
            assert response.status_code == 200 and response.headers["x-worker-upstream"] == "engine-0"


def test_the_request_log_survives_a_store_error_and_the_flush_loop_goes_on(tmp_path, root):
    """Issue 14 item 10: the error is logged and counted, rows are kept, and the loop keeps running.
    Only bad bodies are sent: no engine is needed (the upstream address listens nowhere)."""
    import sqlite3

    class Nowhere:
        url = "http://127.0.0.1:9"

    with start_gateway(tmp_path, root, [Nowhere()]) as gw:
        db = gw.config.gateway.state_db
        saboteur = sqlite3.connect(db)
        saboteur.execute("ALTER TABLE requests RENAME TO requests_away")
        saboteur.commit()
        bad = gw.client.post("/v1/chat/completions", content=b"{", headers={"X-Request-Id": "kept"})
        assert bad.status_code == 400
        wait_for(lambda: (sample(gw, "worker_gateway_log_write_errors_total", {}) or 0) >= 2, "two failed flushes")
        saboteur.execute("ALTER TABLE requests_away RENAME TO requests")
        saboteur.commit()
        saboteur.close()
        rows = wait_for(lambda: sqlite3.connect(db).execute(
            "SELECT request_id FROM requests WHERE request_id = 'kept'").fetchall(), "the kept row to be written")
        assert rows == [("kept",)]
