"""The gateway's edge (issue 22 part A): one request must never hurt another.

* text that is not valid Unicode (a lone surrogate, as a JSON escape or as UTF-8-encoded bytes,
  anywhere in a body) is refused with a 400 before it can reach a store;
* a log row that cannot be written is dropped alone, counted and logged once: it never blocks
  the rows after it;
* workspace, session and model are names (core/names.py), refused whole with a 400 that names
  the header or field, never echoing it; a client's request id is kept as sent when it is visible
  ASCII up to 200 characters, else replaced by the gateway's own (and the response says so);
* metric labels taken from requests are bounded;
* captures keep a session's order whatever the thread pool does.
"""

from __future__ import annotations

import asyncio
import json
import logging
import random
import threading

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from core.capture_store import read_decisions
from core.names import is_name
from serve.gateway.registry import Registry, RequestRow, ShadowRow
from tests.support.gateway_harness import TOKEN, RunningGateway, sample, start_gateway, wait_for, write_config

ADMIN = {"Authorization": f"Bearer {TOKEN}"}


def post(gw: RunningGateway, raw: bytes, headers: dict[str, str] | None = None) -> httpx.Response:
    return gw.client.post("/v1/chat/completions", content=raw,
                          headers={"Content-Type": "application/json", **(headers or {})})


# --- item 1: text that is not valid Unicode, and the poison log row ---------------------------

LONE_SURROGATE_BODIES = [
    b'{"model": "\\ud800", "messages": []}',
    b'{"model": "worker", "messages": [{"role": "user", "content": "a\\udfffb"}]}',
    b'{"model": "worker", "messages": [], "\\ud834": 1}',
    b'{"model": "worker", "messages": [], "tools": [[[{"x": ["\\udc00"]}]]]}',
    b'{"model": "\xed\xa0\x80", "messages": []}',  # a surrogate encoded as UTF-8 bytes
    b'{"model": "worker", "messages": [], "user": "\xff"}',  # not UTF-8 at all
    '{"model": "worker", "messages": []}'.encode("utf-16"),  # valid JSON text, not UTF-8
]


@pytest.mark.parametrize("raw", LONE_SURROGATE_BODIES)
def test_text_that_is_not_valid_unicode_is_refused_at_the_edge(tmp_path, root, no_upstream, raw):
    with start_gateway(tmp_path, root, [no_upstream]) as gw:
        response = post(gw, raw)
        assert response.status_code == 400, response.text
        error = response.json()["error"]
        assert error["code"] == "invalid_unicode" and error["type"] == "invalid_request_error"
        gw.on_loop(gw.gateway.registry.flush)  # the request's own log row is written
        assert gw.admin("GET", "/requests").json()["requests"][0]["reason"] == "invalid_unicode"


def test_one_unauthenticated_request_cannot_stop_the_request_log(tmp_path, root, fault):
    """The outage of issue 22: after the poison request, requests are still answered and logged."""
    with start_gateway(tmp_path, root, [fault]) as gw:
        assert post(gw, b'{"model": "\\ud800", "messages": []}').status_code == 400
        for _ in range(5):
            assert gw.chat().status_code == 200
        gw.on_loop(gw.gateway.registry.flush)
        rows = gw.admin("GET", "/requests")
        assert rows.status_code == 200
        assert [r["status"] for r in rows.json()["requests"]] == [200] * 5 + [400]


def _row(request_id: str) -> RequestRow:
    return RequestRow(request_id=request_id, endpoint="chat", requested="worker", route="worker",
                      adapter="worker-base", kind="production", sticky_key=None, upstream="engine-0", status=200,
                      reason=None, duration_s=0.1)


def _shadow_row(tool: str) -> ShadowRow:
    return ShadowRow(request_id="k", route="worker", endpoint="chat", production="a", candidate="b",
                     request_sha256="0" * 64, production_answer="{}", shadow_answer="{}", production_outcome="ok",
                     shadow_outcome="ok", production_tool=tool, shadow_tool=None, agreement="same", error=None,
                     shadow_latency_s=0.1)


def test_a_row_that_cannot_be_written_is_dropped_alone_counted_and_logged_once(tmp_path, caplog):
    drops: list[tuple[str, str]] = []
    registry = Registry(tmp_path / "state.sqlite", ["worker"], "worker-base",
                        on_drop=lambda table, reason: drops.append((table, reason)))
    registry.record_request(_row("before"))
    registry.record_request(_row("bad-\ud800"))
    registry.record_request(_row("after"))
    registry.record_request(RequestRow(**{**vars(_row("huge")), "status": 2**70}))  # no SQLite integer
    registry.record_shadow(_shadow_row("\udfff"))
    registry.record_shadow(_shadow_row("lookup"))
    with caplog.at_level(logging.WARNING, logger="serve.gateway.registry"):
        registry.flush()
        registry.record_request(_row("bad-again-\ud800"))
        registry.record_request(_row("last"))
        registry.flush()
    assert [r["request_id"] for r in registry.requests()] == ["last", "after", "before"]
    assert [r["production_tool"] for r in registry.shadow_results()] == ["lookup"]
    assert drops == [("requests", "unwritable")] * 2 + [("shadow_results", "unwritable")] + \
        [("requests", "unwritable")]
    assert len([r for r in caplog.records if "requests" in r.getMessage()]) == 1  # logged once per table
    registry.close()


def test_dropped_rows_are_a_metric_by_table(tmp_path, root, no_upstream):
    with start_gateway(tmp_path, root, [no_upstream]) as gw:
        gw.on_loop(lambda: gw.gateway.registry.record_request(_row("bad-\ud800")))
        gw.on_loop(gw.gateway.registry.flush)
        assert sample(gw, "worker_gateway_log_rows_dropped_total", table="requests", reason="unwritable") == 1


def test_an_error_message_that_is_not_valid_unicode_is_still_answered():
    """Sibling: an engine's 4xx message is JSON-decoded, so it may hold a lone surrogate; the
    error body must still encode."""
    from serve.gateway.errors import GatewayError

    rendered = GatewayError(400, "engine said \ud800", "upstream_400").response()
    assert json.loads(rendered.body)["error"]["message"].startswith("engine said ")


# --- item 2: bounded, validated names in headers and fields ------------------------------------

HUGE = "a" * 200_000


@pytest.mark.parametrize(("headers", "field", "named"), [
    ({"X-Workspace-Id": "w" * 100_000}, {}, "X-Workspace-Id"),
    ({"X-Workspace-Id": "../etc"}, {}, "X-Workspace-Id"),
    ({"X-Session-Id": "s" * 100_000}, {}, "X-Session-Id"),
    ({"X-Session-Id": "caf\u00e9"}, {}, "X-Session-Id"),
    ({}, {"model": HUGE}, "model"),
    ({}, {"model": "a/b"}, "model"),
])
def test_values_that_are_echoed_or_stored_must_be_names(tmp_path, root, no_upstream, headers, field, named):
    with start_gateway(tmp_path, root, [no_upstream]) as gw:
        body = {"model": "worker", "messages": [{"role": "user", "content": "hi"}], **field}
        encoded = {k: v.encode("latin-1") for k, v in headers.items()}
        response = gw.client.post("/v1/chat/completions", json=body, headers=encoded)
        assert response.status_code == 400, response.text
        error = response.json()["error"]
        assert named in error["message"] and error["type"] == "invalid_request_error"
        assert len(response.text) < 1000 and len(str(response.headers)) < 2000  # nothing echoed whole
        gw.on_loop(gw.gateway.registry.flush)
        row = gw.admin("GET", "/requests").json()["requests"][0]
        assert row["status"] == 400 and len(json.dumps(row)) < 1000  # nothing stored whole


def test_a_state_file_does_not_grow_with_the_ids_clients_send(tmp_path, root, fault):
    with start_gateway(tmp_path, root, [fault]) as gw:
        for _ in range(10):
            gw.chat(headers={"X-Request-Id": "r" * (1 << 20)})
        gw.on_loop(gw.gateway.registry.flush)
        state = tmp_path / "gw" / "state.sqlite"
        size = sum(p.stat().st_size for p in state.parent.glob("state.sqlite*"))
        assert size < 2 * (1 << 20)


@pytest.mark.parametrize(("method", "path", "body", "params"), [
    ("POST", f"/adapters/{'n' * 50_000}/load", None, {}),
    ("POST", f"/routes/{'r' * 50_000}/rollback", None, {}),
    ("POST", "/routes/worker/production", {"version": "v" * 50_000}, {}),
    ("POST", "/routes/worker/canary", {"candidate": "c" * 50_000, "percent": 5}, {}),
    ("POST", "/routes/worker/shadow", {"candidate": "c" * 50_000, "sample_rate": 0.5}, {}),
    ("POST", "/adapters", {"name": "a-v1", "path": "p", "x" * 50_000: 1}, {}),
    ("POST", "/adapters", {"name": "a-v1", "path": "p", "\ud800": 1}, {}),
    ("GET", "/resolve", None, {"model": "m" * 50_000}),
    ("GET", "/resolve", None, {"workspace": "w" * 50_000}),
    ("GET", "/shadow", None, {"route": "r" * 50_000}),
    ("GET", f"/trials/{'t' * 50_000}", None, {}),
    ("POST", f"/trials/{'t' * 50_000}/abort", {"reason": "x"}, {}),
])
def test_admin_errors_never_echo_a_value_whole(tmp_path, root, no_upstream, method, path, body, params):
    with start_gateway(tmp_path, root, [no_upstream]) as gw:
        raw = json.dumps(body).encode() if body is not None else None
        response = gw.client.request(method, f"/admin{path}", content=raw, params=params or None,
                                     headers={**ADMIN, "Content-Type": "application/json"})
        assert 400 <= response.status_code < 500, response.text
        assert response.json()["error"]["message"]
        assert len(response.text) < 2500


def test_metric_labels_from_requests_are_bounded(tmp_path, root, fault, monkeypatch):
    """Workspace and tool labels come from clients: past a bound, new values share one series."""
    import serve.gateway.metrics as metrics

    monkeypatch.setattr(metrics, "LABEL_VALUES_MAX", 5)
    path = write_config(tmp_path / "gw", [fault.url], root, extra='[capture]\nmode = "descriptor"\nsample_rate = 1.0\n')
    with RunningGateway(path) as gw:
        for i in range(12):
            messages = [{"role": "user", "content": "x"},
                        {"role": "assistant", "content": None, "tool_calls": [
                            {"id": "c1", "type": "function", "function": {"name": f"tool-{i}", "arguments": "{}"}}]},
                        {"role": "tool", "tool_call_id": "c1", "content": "Traceback (most recent call last):"}]
            response = gw.client.post("/v1/chat/completions", json={"model": "worker", "messages": messages},
                                      headers={"X-Workspace-Id": f"ws-{i}", "X-Session-Id": f"s-{i}"})
            assert response.status_code == 200, response.text
        wait_for(lambda: sample(gw, "worker_capture_descriptors_total", workspace="_other") >= 7, "captures")
        families = {f.name: f for f in text_string_to_metric_families(gw.metrics())}
        workspaces = {s.labels["workspace"] for s in families["worker_capture_descriptors"].samples}
        assert len(workspaces) == 6 and "_other" in workspaces
        tools = {s.labels["tool"] for s in families["worker_guard_anomalies"].samples}
        assert len(tools) <= 6


# --- item 3: capture keeps a session's order whatever the thread pool does --------------------

TOOLS = [{"type": "function", "function": {"name": "lookup", "parameters": {"type": "object"}}}]
STREAMED_CALL = {"role": "assistant", "content": None, "tool_calls": [  # what the stand-in streams
    {"id": "call-1", "type": "function", "function": {"name": "lookup", "arguments": '{"id": "1"}'}}]}


def test_no_outcome_label_is_lost_when_the_thread_pool_is_slow(tmp_path, root, fault, monkeypatch):
    """Fast clients in tool loops while every thread-pool task waits 0–80 ms: each decision that
    called a tool gets the outcome label of the next turn's tool result."""
    import starlette.background
    import starlette.concurrency

    rng = random.Random(22)
    lock = threading.Lock()

    def delay() -> float:
        with lock:
            return rng.uniform(0, 0.08)

    original_pool = starlette.concurrency.run_in_threadpool
    original_to_thread = asyncio.to_thread

    async def slow_pool(func, *args, **kwargs):  # type: ignore[no-untyped-def]
        await asyncio.sleep(delay())
        return await original_pool(func, *args, **kwargs)

    async def slow_to_thread(func, /, *args, **kwargs):  # type: ignore[no-untyped-def]
        await asyncio.sleep(delay())
        return await original_to_thread(func, *args, **kwargs)

    monkeypatch.setattr(starlette.background, "run_in_threadpool", slow_pool)
    monkeypatch.setattr(starlette.concurrency, "run_in_threadpool", slow_pool)
    monkeypatch.setattr(asyncio, "to_thread", slow_to_thread)
    path = write_config(tmp_path / "gw", [fault.url], root, extra='[capture]\nmode = "descriptor"\nsample_rate = 1.0\n')
    turns, sessions = 12, 4
    with RunningGateway(path) as gw:

        def loop(session: str) -> None:
            with httpx.Client(base_url=gw.url, timeout=60) as client:
                messages: list[dict] = [{"role": "user", "content": "find it"}]
                for i in range(turns):
                    stream = i % 3 == 2  # streams too: their capture is queued at the engine's [DONE]
                    response = client.post("/v1/chat/completions", json={
                        "model": "worker", "messages": messages, "tools": TOOLS, "stream": stream},
                        headers={"X-Workspace-Id": "ws", "X-Session-Id": session})
                    assert response.status_code == 200, response.text
                    message = STREAMED_CALL if stream else response.json()["choices"][0]["message"]
                    messages += [message, {"role": "tool", "tool_call_id": message["tool_calls"][0]["id"],
                                           "content": '{"found": true}'}]

        threads = [threading.Thread(target=loop, args=(f"s-{i}",)) for i in range(sessions)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        capture = gw.gateway.capture
        wait_for(lambda: capture.queue.empty() and capture.queue.unfinished_tasks == 0, "captures")
        store = gw.config.capture.db
    decisions = read_decisions(store)
    assert len(decisions) == turns * sessions
    for session in (f"s-{i}" for i in range(sessions)):
        outcomes = [d.outcome for d in decisions if d.session == session]
        assert outcomes[:-1] == ["ok"] * (turns - 1), outcomes  # the last turn's result never came
        assert outcomes[-1] is None


# --- a client's correlation id is passed on, never a reason to refuse ---------------------------

KEPT_IDS = ["acme/s-1#0", "Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=1",
            "!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~", "r" * 200, "a"]
REPLACED_IDS = ["has space", "r" * 201, "caf\u00e9", "tab\there", "r" * 100_000]


def test_a_correlation_id_of_visible_ascii_is_stored_and_echoed_as_sent(tmp_path, root, fault):
    path = write_config(tmp_path / "gw", [fault.url], root, extra='[capture]\nmode = "descriptor"\nsample_rate = 1.0\n')
    with RunningGateway(path) as gw:
        for request_id in KEPT_IDS:
            response = gw.chat(headers={"X-Request-Id": request_id, "X-Workspace-Id": "ws", "X-Session-Id": "s"})
            assert response.status_code == 200, response.text
            assert response.headers["x-request-id"] == request_id
            assert "x-worker-request-id-replaced" not in response.headers
        capture = gw.gateway.capture
        wait_for(lambda: capture.queue.empty() and capture.queue.unfinished_tasks == 0, "captures")
        gw.on_loop(gw.gateway.registry.flush)
        logged = [row["request_id"] for row in gw.admin("GET", "/requests").json()["requests"]]
        store = gw.config.capture.db
    assert sorted(logged) == sorted(KEPT_IDS)
    decisions = read_decisions(store)
    assert sorted(d.request_id or "" for d in decisions) == sorted(KEPT_IDS)
    assert len({d.id for d in decisions}) == len(KEPT_IDS)  # the capture key is still the gateway's own


@pytest.mark.parametrize("request_id", REPLACED_IDS)
@pytest.mark.parametrize("stream", [False, True])
def test_any_other_request_id_is_replaced_and_the_response_says_so(tmp_path, root, fault, request_id, stream):
    with start_gateway(tmp_path, root, [fault]) as gw:
        response = gw.chat(headers={"X-Request-Id": request_id.encode("latin-1")}, stream=stream)  # type: ignore[dict-item]
        assert response.status_code == 200, response.text
        echoed = response.headers["x-request-id"]
        assert echoed != request_id and is_name(echoed)  # the gateway's own id
        assert response.headers["x-worker-request-id-replaced"] == "invalid"
        gw.on_loop(gw.gateway.registry.flush)
        assert gw.admin("GET", "/requests").json()["requests"][0]["request_id"] == echoed


def test_a_refused_request_with_a_replaced_id_still_says_so(tmp_path, root, no_upstream):
    with start_gateway(tmp_path, root, [no_upstream]) as gw:
        response = post(gw, b"{", {"X-Request-Id": "has space"})
        assert response.status_code == 400 and response.json()["error"]["code"] == "invalid_json"
        assert response.headers["x-worker-request-id-replaced"] == "invalid"
        other = gw.client.get("/v1/models", headers={"X-Request-Id": "has space"})  # not a forwarded request
        assert other.status_code == 200 and "x-worker-request-id-replaced" not in other.headers
