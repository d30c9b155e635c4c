"""The Messages and Responses APIs at the gateway's edge, where only a fault can show the behaviour: no engine
up (the `anthropic` SDK retries the 529 it gets), a stream cut mid-way (ends with Anthropic's `error` event),
the engine's 500 and hostile bodies in Anthropic's shape, `previous_response_id` refused, and the runtime's
session and workspace headers. The stand-in upstream is the named fault injector."""

from __future__ import annotations

import json

import anthropic
import httpx
import pytest

from core.tomlfile import ConfigError
from serve.gateway.config import load_gateway_config
from tests.support.gateway_harness import fake_adapter, sample, start_gateway, wait_for, write_config

ASK = [{"role": "user", "content": "Hi"}]


def test_no_engine_up_is_an_overloaded_529_that_the_anthropic_sdk_retries(tmp_path, root, no_upstream):
    with start_gateway(tmp_path, root, [no_upstream]) as gw:  # Retry-After: 2 s
        sdk = anthropic.Anthropic(base_url=gw.url, api_key="k", max_retries=2)
        with pytest.raises(anthropic.APIStatusError) as failed:
            sdk.messages.create(model="worker", max_tokens=4, messages=ASK)
        assert failed.value.status_code == 529 and failed.value.body["error"]["type"] == "overloaded_error"
        assert failed.value.response.headers["retry-after"] == "2"
        assert failed.value.response.headers["x-should-retry"] == "true"
        wait_for(lambda: sample(gw, "worker_gateway_requests_total", api="messages", status="529") == 3,
                 "one request and two retries", 10)


def test_a_stream_cut_mid_way_ends_with_an_anthropic_error_event(tmp_path, root, fault):
    fault.behaviour["worker-base"] = "break_stream"
    with start_gateway(tmp_path, root, [fault]) as gw, gw.client.stream("POST", "/v1/messages", json={
            "model": "worker", "max_tokens": 4, "messages": ASK, "stream": True}) as response:
        assert response.status_code == 200
        text = response.read().decode()
    last = text.strip().split("\n\n")[-1].split("\n")
    assert last[0] == "event: error"
    error = json.loads(last[1].removeprefix("data: "))
    assert error["type"] == "error" and error["error"]["type"] == "api_error"
    assert "broke off" in error["error"]["message"]


@pytest.mark.parametrize("path, body, last", [
    ("/v1/chat/completions", {"messages": ASK}, "data"),
    ("/v1/messages", {"max_tokens": 4, "messages": ASK}, "event: error"),
    ("/v1/responses", {"input": "Hi"}, "event: error"),
])
def test_a_stream_that_ends_without_its_last_event_is_not_relayed_as_whole(tmp_path, root, fault, path, body, last):
    """The engine sends the first event, then data that is no event, and ends the body properly without
    `[DONE]` / `message_stop` / `response.completed`: the client gets the API's error event at the end, and
    the request is counted as a 502, never as a finished answer."""
    fault.behaviour["worker-base"] = "unfinished_stream"
    with start_gateway(tmp_path, root, [fault]) as gw:
        with gw.client.stream("POST", path, json={"model": "worker", "stream": True, **body}) as response:
            assert response.status_code == 200
            text = response.read().decode()
        final = text.strip().split("\n\n")[-1]
        assert final.startswith(last) and "ended without its last event" in final, text
        assert "[DONE]" not in text and "message_stop" not in text
        api = path.removeprefix("/v1/").replace("chat/completions", "chat")
        wait_for(lambda: sample(gw, "worker_gateway_requests_total", api=api, status="502") == 1, "a 502", 10)


def test_engine_failures_and_hostile_bodies_answer_in_anthropics_shape(tmp_path, root, fault):
    fault.behaviour["worker-base"] = "fail"
    with start_gateway(tmp_path, root, [fault], gateway="max_body_bytes = 4096") as gw:
        def post(content: bytes | str, path: str = "/v1/messages?beta=true") -> httpx.Response:
            return gw.client.post(path, content=content, headers={"Content-Type": "application/json"})

        cases = {
            "not json": (post(b"{"), 400, "not readable JSON"),
            "an array": (post(b"[]"), 400, "JSON object"),
            "deep": (post(b"[" * 2000 + b"]" * 2000), 400, "deep"),
            "model": (post(json.dumps({"model": 7, "max_tokens": 4, "messages": ASK})), 400, "'model'"),
            "stream": (post(json.dumps({"model": "worker", "max_tokens": 4, "messages": ASK, "stream": "yes"})),
                       400, "'stream'"),
            "huge": (post(json.dumps({"model": "worker", "messages": ASK, "pad": "x" * 5000})), 413, "larger than"),
            "unknown model": (post(json.dumps({"model": "nope", "max_tokens": 4, "messages": ASK})), 404, "nope"),
            "engine 500": (post(json.dumps({"model": "worker", "max_tokens": 4, "messages": ASK})), 502,
                           "engine exploded"),
            "count_tokens": (post(json.dumps({"model": "nope", "messages": ASK}), "/v1/messages/count_tokens"),
                             404, "nope"),
        }
        for name, (response, status, words) in cases.items():
            body = response.json()
            assert response.status_code == status, (name, response.text)
            assert body["type"] == "error" and set(body["error"]) == {"type", "message"}, name
            assert words in body["error"]["message"], (name, body)
        assert cases["huge"][0].json()["error"]["type"] == "request_too_large"
        assert cases["unknown model"][0].json()["error"]["type"] == "not_found_error"
        assert gw.client.get("/v1/messages").json()["error"]["type"] == "invalid_request_error"  # 405


def test_previous_response_id_is_refused_before_any_engine_is_asked(tmp_path, root, fault):
    with start_gateway(tmp_path, root, [fault]) as gw:
        refused = gw.client.post("/v1/responses", json={"model": "worker", "input": "hi",
                                                        "previous_response_id": "resp_1"})
        assert refused.status_code == 400 and "previous_response_id" in refused.json()["error"]["message"]
        assert gw.client.post("/v1/responses", json={"model": "worker", "input": "hi", "store": False}).json()[
            "output"][0]["content"][0]["text"] == "Hello"
    assert [r.get("store") for r in fault.requests] == [False]  # passed on as sent, the refused one never sent


def test_the_runtimes_session_and_beta_headers_reach_routing_and_the_engine(tmp_path, root, fault):
    """The session a canary sticks by comes from X-Session-Id, else Claude Code's header, else the session id
    in `metadata.user_id` (JSON, or the older `…_session_<id>` form); an odd one is ignored, never refused.
    `anthropic-version` / `anthropic-beta` reach the engine as sent."""
    with start_gateway(tmp_path, root, [fault]) as gw:
        fake_adapter(root, "cand-v1")
        gw.ok("POST", "/adapters", {"name": "cand-v1", "path": "cand-v1"})
        gw.ok("POST", "/adapters/cand-v1/load")
        gw.ok("POST", "/routes/worker/canary", {"candidate": "cand-v1", "percent": 100, "sticky_by": "session"})
        for headers, user_id, session in (
                ({"X-Claude-Code-Session-Id": "cc-1"}, None, "cc-1"),
                ({"X-Session-Id": "explicit", "X-Claude-Code-Session-Id": "cc-1"}, None, "explicit"),
                ({}, json.dumps({"session_id": "from-meta", "account_uuid": "a"}), "from-meta"),
                ({}, "user_abc_account_def_session_9f2c-11", "9f2c-11"),
                ({"X-Claude-Code-Session-Id": "not a name!"}, "{not json", None)):
            body: dict = {"model": "worker", "max_tokens": 4, "messages": ASK}
            if user_id is not None:
                body["metadata"] = {"user_id": user_id}
            answer = gw.client.post("/v1/messages", json=body, headers={
                **headers, "anthropic-version": "2023-06-01", "anthropic-beta": "a-2025,b-2026"})
            assert answer.status_code == 200, answer.text
            assert answer.headers["x-worker-kind"] == ("canary" if session else "production"), session
            gw.on_loop(gw.gateway.registry.flush)
            logged = gw.ok("GET", "/requests", limit=1)["requests"][0]
            assert (logged["endpoint"], logged["sticky_key"]) == ("messages", session)
            sent = fault.headers[-1]
            assert (sent["anthropic-version"], sent["anthropic-beta"]) == ("2023-06-01", "a-2025,b-2026")


def test_model_aliases_resolve_as_the_route_they_name_and_must_name_one(tmp_path, root, fault):
    """Claude Code names a model of its own for background calls; an alias maps it to a route."""
    aliases = 'model_aliases = { "claude-*" = "worker", "claude-opus-4" = "worker" }'
    with start_gateway(tmp_path, root, [fault], gateway=aliases) as gw:
        for model in ("claude-haiku-4-5-20251001", "claude-opus-4"):
            answer = gw.client.post("/v1/messages", json={"model": model, "max_tokens": 4, "messages": ASK})
            assert (answer.status_code, answer.headers["x-worker-route"]) == (200, "worker")
        assert gw.client.post("/v1/messages", json={"model": "gpt-4o", "max_tokens": 4, "messages": ASK}
                              ).status_code == 404
    bad = write_config(tmp_path / "bad", [fault.url], root, gateway='model_aliases = { "claude-*" = "nowhere" }')
    with pytest.raises(ConfigError, match="model_aliases: 'claude-\\*' names 'nowhere'"):
        load_gateway_config(bad)
