"""Client keys and the fair share through the real gateway over HTTP, with the real OpenAI client.

The upstream is the named fault injector (tests/support/fault_upstream.py): it answers, or hangs
until released, which is what makes a full engine and a queue in the gateway observable without
timing anything. What a key lets through, and which workspace every store then sees, does not
depend on the engine.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import openai
import pytest

from core.capture_store import read_decisions
from core.tomlfile import ConfigError
from serve.app import create_app
from serve.gateway.config import load_gateway_config
from serve.gateway.keys import make_key
from serve.gateway.service import UnprotectedError
from serve.gateway.tenancy import ACCESS_LOG_FILTER
from tests.support.fault_upstream import FaultUpstream
from tests.support.gateway_harness import RunningGateway, sample, wait_for, write_config

KEY_A, HASH_A = make_key()
KEY_A2, HASH_A2 = make_key()
KEY_B, HASH_B = make_key()
KEY_SVC, HASH_SVC = make_key()
KEY_CP, HASH_CP = make_key()
TOOLS = [{"type": "function", "function": {"name": "lookup", "parameters": {"type": "object"}}}]


def entry(name: str, digest: str, workspace: str | None = None, workspaces: str | None = None,
          extra: str = "") -> str:
    bound = f'workspace = "{workspace}"\n' if workspace else f"workspaces = {workspaces}\n"
    return f'[[keys]]\nname = "{name}"\n{bound}hash = "{digest}"\n{extra}'


KEYS = (entry("a-1", HASH_A, "ws-a") + entry("b-1", HASH_B, "ws-b")
        + entry("replay", HASH_SVC, workspaces='"*"', extra="weight = 0.25\n")
        + entry("control", HASH_CP, workspaces='["ws-c"]'))


def write_keys(path: Path, text: str, mode: int = 0o600) -> Path:
    """Replace the keys file at once (a new file renamed over the old), as `install` does."""
    new = path.with_suffix(".new")
    new.write_text(text)
    new.chmod(mode)
    os.replace(new, path)
    return path


def gateway_config(tmp_path: Path, upstream: str, keys: str | None = KEYS, extra: str = "") -> Path:
    root, directory = tmp_path / "adapters", tmp_path / "gw"
    root.mkdir(parents=True, exist_ok=True)
    directory.mkdir(parents=True, exist_ok=True)
    auth = ""
    if keys is not None:
        write_keys(directory / "keys.toml", keys)
        auth = '[auth]\nkeys_file = "keys.toml"\nreload_interval_s = 0.05\n'
    return write_config(directory, [upstream], root, extra=auth + extra)


@pytest.fixture
def gw(tmp_path: Path, fault: FaultUpstream) -> Iterator[RunningGateway]:
    capture = '[capture]\nmode = "descriptor"\nsample_rate = 1.0\n'
    with RunningGateway(gateway_config(tmp_path, fault.url, extra=capture)) as gateway:
        yield gateway


def client(gw: RunningGateway, key: str, **headers: str) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{gw.url}/v1", api_key=key, max_retries=0, default_headers=headers or None)


def ask(c: openai.OpenAI, content: str = "Say hi.", model: str = "worker") -> str:
    answer = c.chat.completions.create(model=model, messages=[{"role": "user", "content": content}],
                                       max_tokens=4, tools=TOOLS)  # type: ignore[arg-type]
    return answer.id


def post(gw: RunningGateway, headers: dict[str, str], path: str = "/v1/chat/completions") -> httpx.Response:
    return gw.client.post(path, headers=headers, json={"model": "worker", "messages": [{"role": "user",
                                                                                       "content": "hi"}]})


def test_the_openai_client_with_a_key_is_served_and_without_one_gets_a_401_it_understands(gw, fault):
    assert ask(client(gw, KEY_A))
    for key in ("wt_not-a-key", KEY_A + "x", KEY_A[:-1]):
        with pytest.raises(openai.AuthenticationError) as info:
            ask(client(gw, key))
        assert info.value.status_code == 401 and info.value.code == "unknown_key"
        assert info.value.response.headers["www-authenticate"].startswith("Bearer")
    missing = post(gw, {})
    assert missing.status_code == 401 and missing.json()["error"] == {
        "message": "this gateway needs a client key: send the key as `Authorization: Bearer KEY` or "
                   "`x-api-key: KEY`", "type": "authentication_error", "code": "missing_key"}
    assert len(fault.requests) == 1  # nothing unauthenticated reached the engine
    assert post(gw, {"x-api-key": KEY_A}).status_code == 200  # the Anthropic SDKs' header
    both = post(gw, {"x-api-key": KEY_A, "Authorization": f"Bearer {KEY_B}"})
    assert both.status_code == 401 and both.json()["error"]["code"] == "two_keys"
    assert sample(gw, "worker_gateway_auth_refused_total", reason="unknown_key") == 3
    assert gw.client.get("/health").status_code == 200 and gw.client.get("/metrics").status_code == 200
    assert gw.client.get("/version").status_code == 200


def test_the_model_list_needs_a_key_like_every_model_api_call(gw):
    """vLLM's --api-key guards every /v1 path, and OpenAI's and Anthropic's model lists need a key: the
    routes, production versions and trials the list shows are not for an unknown caller."""
    listing = gw.client.get("/v1/models")
    assert listing.status_code == 401 and listing.json()["error"]["code"] == "missing_key"
    assert "worker" not in listing.text
    assert gw.client.get("/v1/models", headers={"Authorization": "Bearer wt_not-a-key"}).status_code == 401
    known = gw.client.get("/v1/models", headers={"x-api-key": KEY_A})
    assert known.status_code == 200 and "worker" in {m["id"] for m in known.json()["data"]}


def test_a_key_in_the_url_is_refused_and_never_logged(gw, fault, caplog):
    caplog.set_level(logging.DEBUG)
    for query in (f"api_key={KEY_A}", f"x={KEY_A}", "key=anything"):
        response = gw.client.post(f"/v1/chat/completions?{query}", headers={"Authorization": f"Bearer {KEY_A}"},
                                  json={"model": "worker", "messages": [{"role": "user", "content": "hi"}]})
        assert response.status_code == 401 and response.json()["error"]["code"] == "key_in_query"
        assert KEY_A not in response.text
    assert fault.requests == []
    server_side = [r.getMessage() for r in caplog.records if r.name.startswith(("serve", "uvicorn", "fastapi"))]
    assert not [m for m in server_side if KEY_A in m]  # (the test's own HTTP client logs its URLs)
    record = logging.LogRecord("uvicorn.access", logging.INFO, "", 0, '%s - "%s %s HTTP/%s" %d',
                               ("127.0.0.1:1", "POST", f"/v1/chat/completions?api_key={KEY_A}", "1.1", 401), None)
    assert ACCESS_LOG_FILTER.filter(record) and KEY_A not in record.getMessage()
    assert "/v1/chat/completions?…" in record.getMessage()


def test_a_one_mebibyte_key_is_refused_without_hurting_the_gateway(gw, fault):
    try:
        status = post(gw, {"Authorization": "Bearer " + "k" * (1 << 20)}).status_code
    except httpx.TransportError:  # the HTTP server may drop a header this large before the app sees it
        status = 400
    assert status in (400, 401, 431)
    assert fault.requests == [] and ask(client(gw, KEY_A))


def test_the_workspace_comes_from_the_key_and_another_workspaces_header_is_refused(gw, fault):
    spoof = client(gw, KEY_A, **{"X-Workspace-Id": "ws-b"})
    with pytest.raises(openai.PermissionDeniedError) as info:
        ask(spoof)
    assert info.value.code == "workspace_mismatch" and fault.requests == []
    ask(client(gw, KEY_A))  # no header: the key's workspace
    ask(client(gw, KEY_A, **{"X-Workspace-Id": "ws-a"}))
    ask(client(gw, KEY_SVC, **{"X-Workspace-Id": "ws-b"}))  # a service key names one
    ask(client(gw, KEY_CP, **{"X-Workspace-Id": "ws-c"}))
    with pytest.raises(openai.PermissionDeniedError) as info:
        ask(client(gw, KEY_CP, **{"X-Workspace-Id": "ws-a"}))  # one it may not name
    assert info.value.code == "workspace_not_allowed"
    db = gw.config.capture.db
    wait_for(lambda: db.exists() and len(read_decisions(db)) == 4, "four captured decisions")
    assert sorted(d.workspace for d in read_decisions(db)) == ["ws-a", "ws-a", "ws-b", "ws-c"]
    assert sample(gw, "worker_capture_descriptors_total", mode="descriptor", workspace="ws-a") == 2
    assert gw.ok("GET", "/resolve", workspace="ws-a")  # the admin API keeps its own token
    assert gw.client.get("/admin/state", headers={"Authorization": f"Bearer {KEY_A}"}).status_code == 401


def test_keys_reload_during_traffic_and_a_bad_file_keeps_the_keys_in_force(gw, tmp_path):
    path = tmp_path / "gw" / "keys.toml"
    statuses: list[int] = []
    stop = threading.Event()

    def traffic() -> None:
        with httpx.Client(base_url=gw.url, timeout=60) as c:
            while not stop.is_set():
                statuses.append(c.post("/v1/completions", headers={"Authorization": f"Bearer {KEY_A}"},
                                       json={"model": "worker", "prompt": "hi", "max_tokens": 1}).status_code)

    threads = [threading.Thread(target=traffic) for _ in range(3)]
    for thread in threads:
        thread.start()
    try:
        for i in range(6):  # rotation: the second key comes and goes while the first serves throughout
            write_keys(path, KEYS + (entry("a-2", HASH_A2, "ws-a") if i % 2 == 0 else ""))
            want = 200 if i % 2 == 0 else 401
            wait_for(lambda w=want: post(gw, {"Authorization": f"Bearer {KEY_A2}"}).status_code == w, f"reload {i}")
        write_keys(path, KEYS, mode=0o644)  # anyone may read it: refused, the keys in force kept
        wait_for(lambda: sample(gw, "worker_gateway_keys_reloads_total", result="refused") == 1, "a refused reload")
        write_keys(path, "[[keys]]\nname = 'broken'\n")
        wait_for(lambda: sample(gw, "worker_gateway_keys_reloads_total", result="refused") == 2, "a second one")
    finally:
        stop.set()
        for thread in threads:
            thread.join(60)
    assert statuses and set(statuses) == {200}  # the first key never stopped working
    assert sample(gw, "worker_gateway_keys_reloads_total", result="loaded") == 6
    assert sample(gw, "worker_gateway_client_keys") == 4 and ask(client(gw, KEY_A))


def test_without_a_keys_file_only_loopback_and_a_bad_keys_file_stops_the_start(tmp_path, fault):
    open_config = load_gateway_config(gateway_config(tmp_path / "open", fault.url, keys=None))
    exposed = open_config.model_copy(update={"gateway": open_config.gateway.model_copy(update={"host": "0.0.0.0"})})
    with pytest.raises(UnprotectedError, match="reachable from other machines"):
        create_app(exposed)
    path = gateway_config(tmp_path / "readable", fault.url)
    (tmp_path / "readable" / "gw" / "keys.toml").chmod(0o644)
    with pytest.raises(ConfigError, match=r"other users can access the client keys file \(mode 644\)"):
        create_app(load_gateway_config(path))


# --- the fair share: a full engine made observable by requests that hang until released ---------


def hanging(fault: FaultUpstream) -> None:
    fault.behaviour["worker-base"] = "hang"


def test_over_the_share_the_openai_client_gets_a_429_with_retry_after(tmp_path, fault):
    keys = KEYS.replace(f'hash = "{HASH_A}"\n', f'hash = "{HASH_A}"\nmax_in_flight = 2\n')
    config = gateway_config(tmp_path, fault.url, keys=keys, extra="[fair_share]\nretry_after_s = 7\n")
    with RunningGateway(config) as gw, ThreadPoolExecutor(3) as pool:
        hanging(fault)
        held = [pool.submit(ask, client(gw, KEY_A)) for _ in range(2)]
        wait_for(lambda: fault.in_flight == 2, "two requests at the engine")
        assert sample(gw, "worker_gateway_in_flight", workspace="ws-a") == 2
        with pytest.raises(openai.RateLimitError) as info:
            ask(client(gw, KEY_A))
        assert info.value.response.headers["retry-after"] == "7"
        assert info.value.code == "throttled_in_flight"
        other = pool.submit(ask, client(gw, KEY_B))
        wait_for(lambda: fault.in_flight == 3, "another workspace's request at the engine meanwhile")
        fault.release()
        assert other.result() and all(f.result() for f in held)
        assert sample(gw, "worker_gateway_throttled_total", workspace="ws-a", reason="in_flight") == 1
        assert sample(gw, "worker_gateway_in_flight", workspace="ws-a") == 0


def test_a_greedy_workspace_backlog_does_not_delay_another_workspace_and_a_stream_holds_its_slot(tmp_path, fault):
    extra = "[fair_share]\nengine_slots = 2\nslot_wait_s = 120\n"
    with RunningGateway(gateway_config(tmp_path, fault.url, extra=extra)) as gw, ThreadPoolExecutor(12) as pool:
        hanging(fault)
        greedy = [pool.submit(ask, client(gw, KEY_A), f"greedy {i}") for i in range(10)]
        wait_for(lambda: fault.in_flight == 2 and sample(gw, "worker_gateway_engine_slots_waiting") == 8,
                 "two greedy requests at the engine and eight waiting in the gateway")
        quiet = pool.submit(ask, client(gw, KEY_B), "quiet")
        wait_for(lambda: sample(gw, "worker_gateway_engine_slots_waiting") == 9, "the quiet request waiting")
        fault.release()
        assert quiet.result() and all(f.result() for f in greedy)
        order = [r["messages"][0]["content"] for r in fault.requests]
        assert order.index("quiet") <= 3, order  # first in line once a slot is free (FIFO: 11th)

        fault.behaviour["worker-base"] = "endless_stream"
        body = {"model": "worker", "messages": [{"role": "user", "content": "go"}], "stream": True}
        with httpx.Client(base_url=gw.url, timeout=60, headers={"Authorization": f"Bearer {KEY_A}"}) as c:
            with c.stream("POST", "/v1/chat/completions", json=body) as one, \
                    c.stream("POST", "/v1/chat/completions", json=body) as two:
                streams = [one.iter_bytes(), two.iter_bytes()]  # kept: a dropped iterator closes its stream
                assert all(next(s) for s in streams)
                waiting = pool.submit(ask, client(gw, KEY_B), "after the streams")
                wait_for(lambda: sample(gw, "worker_gateway_engine_slots_waiting") == 1, "a request behind streams")
                fault.behaviour["worker-base"] = "ok"
                assert not waiting.done()
            assert waiting.result()  # served once the streams closed and gave their slots back
        assert sample(gw, "worker_gateway_in_flight", workspace="ws-b") == 0



def test_a_slot_wait_too_long_is_a_429_and_a_client_that_leaves_the_queue_frees_its_place(tmp_path, fault):
    extra = "[fair_share]\nengine_slots = 1\nslot_wait_s = 0.3\nretry_after_s = 4\n"
    with RunningGateway(gateway_config(tmp_path, fault.url, extra=extra)) as gw, ThreadPoolExecutor(1) as pool:
        hanging(fault)
        held = pool.submit(ask, client(gw, KEY_A))
        wait_for(lambda: fault.in_flight == 1, "one request holding the only slot")
        with pytest.raises(openai.RateLimitError) as info:
            ask(client(gw, KEY_B))
        assert info.value.code == "throttled_engine_busy" and info.value.response.headers["retry-after"] == "4"
        assert sample(gw, "worker_gateway_throttled_total", workspace="ws-b", reason="engine_busy") == 1
        gw.gateway.tenancy.settings = gw.gateway.tenancy.settings.model_copy(update={"slot_wait_s": 300.0})
        with pytest.raises(httpx.ReadTimeout):  # this client gives up while its request waits for the slot
            httpx.post(f"{gw.url}/v1/completions", headers={"Authorization": f"Bearer {KEY_B}"}, timeout=0.5,
                       json={"model": "worker", "prompt": "hi"})
        wait_for(lambda: sample(gw, "worker_gateway_engine_slots_waiting") == 0, "the waiting place given up")
        assert sample(gw, "worker_gateway_in_flight", workspace="ws-b") == 0
        fault.release()
        assert held.result() and ask(client(gw, KEY_B))  # the slot was not lost to either

# --- every API: the same refusals, each in its own shape ---------------------------------------

API_BODIES = {
    "/v1/chat/completions": {"model": "worker", "messages": [{"role": "user", "content": "hi"}]},
    "/v1/completions": {"model": "worker", "prompt": "hi"},
    "/v1/messages": {"model": "worker", "max_tokens": 4, "messages": [{"role": "user", "content": "hi"}]},
    "/v1/messages/count_tokens": {"model": "worker", "messages": [{"role": "user", "content": "hi"}]},
    "/v1/responses": {"model": "worker", "input": "hi"},
}


def error_code(path: str, response: httpx.Response) -> str:
    """The refusal's code, read from the API's own error shape (Anthropic's has a type, no code)."""
    body = response.json()
    if path.startswith("/v1/messages"):
        assert body["type"] == "error" and set(body["error"]) == {"type", "message"}, body
        return str(body["error"]["type"])
    assert set(body["error"]) >= {"message", "type", "code"}, body
    return str(body["error"]["code"])


@pytest.mark.parametrize("path", sorted(API_BODIES))
def test_every_api_refuses_no_key_a_wrong_key_a_url_key_and_a_spoofed_workspace(gw, fault, path):
    def send(headers: dict[str, str], query: str = "") -> httpx.Response:
        return gw.client.post(path + query, headers=headers, json=API_BODIES[path])

    anthropic_shape = path.startswith("/v1/messages")
    for headers, query, status, code, anthropic_type in (
            ({}, "", 401, "missing_key", "authentication_error"),
            ({"x-api-key": "wt_wrong"}, "", 401, "unknown_key", "authentication_error"),
            ({"x-api-key": KEY_A}, f"?beta=true&key={KEY_A}", 401, "key_in_query", "authentication_error"),
            ({"x-api-key": KEY_A, "X-Workspace-Id": "ws-b"}, "", 403, "workspace_mismatch", "permission_error")):
        response = send(headers, query)
        assert response.status_code == status, response.text
        assert error_code(path, response) == (anthropic_type if anthropic_shape else code)
    assert fault.requests == []  # none of them reached the engine
    accepted = send({"Authorization": f"Bearer {KEY_A}"}, "?beta=true" if anthropic_shape else "")
    assert accepted.status_code not in (401, 403, 429)  # let through (the stand-in may not serve this API)


def test_the_anthropic_client_with_its_key_headers_and_a_429_it_retries_on(tmp_path, fault):
    import anthropic

    keys = KEYS.replace(f'hash = "{HASH_A}"\n', f'hash = "{HASH_A}"\nrequests_per_s = 0.001\nrequest_burst = 1\n')
    with RunningGateway(gateway_config(tmp_path, fault.url, keys=keys)) as gw:
        def tokens(**auth: str) -> None:
            anthropic.Anthropic(base_url=gw.url, max_retries=0, **auth).messages.count_tokens(  # type: ignore[arg-type]
                model="worker", messages=[{"role": "user", "content": "hi"}])

        with pytest.raises(anthropic.AuthenticationError):
            tokens(api_key="wt_wrong")  # sent as x-api-key
        with pytest.raises(anthropic.AuthenticationError):
            tokens(auth_token="wt_wrong")  # ANTHROPIC_AUTH_TOKEN: sent as Authorization: Bearer
        spoof = anthropic.Anthropic(base_url=gw.url, api_key=KEY_A, max_retries=0,
                                    default_headers={"X-Workspace-Id": "ws-b"})
        with pytest.raises(anthropic.PermissionDeniedError):
            spoof.messages.create(model="worker", max_tokens=4, messages=[{"role": "user", "content": "hi"}])
        client_a = anthropic.Anthropic(base_url=gw.url, auth_token=KEY_A, max_retries=0)
        admitted = client_a.messages.create(model="worker", max_tokens=4, messages=[{"role": "user", "content": "hi"}])
        assert admitted.content[0].type == "text"
        with pytest.raises(anthropic.RateLimitError) as info:  # the bucket held one request
            client_a.messages.create(model="worker", max_tokens=4, messages=[{"role": "user", "content": "hi"}])
        assert info.value.body == {"type": "error", "error": {"type": "rate_limit_error", "message": (
            "over the fair share of workspace 'ws-a' (requests per second); retry in 1000 s")}}
        assert info.value.response.headers["retry-after"] == "1000"
        assert sample(gw, "worker_gateway_throttled_total", workspace="ws-a", reason="requests") == 1


# --- the real engine: the clients as a container runs them, keys from their environment --------


@pytest.mark.engine
def test_real_clients_with_keys_from_their_environment_reach_the_engine_as_their_keys_workspace(
        engine, tmp_path, monkeypatch):
    import anthropic

    capture = '[capture]\nmode = "descriptor"\nsample_rate = 1.0\n'
    with RunningGateway(gateway_config(tmp_path, engine.base_url, extra=capture)) as gw:
        monkeypatch.setenv("OPENAI_API_KEY", KEY_A)
        monkeypatch.setenv("ANTHROPIC_AUTH_TOKEN", KEY_B)  # what Claude Code reads: sent as a bearer token
        monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
        chat = openai.OpenAI(base_url=f"{gw.url}/v1", max_retries=0).chat.completions.create(
            model="worker", messages=[{"role": "user", "content": "Say hi."}], max_tokens=2, temperature=0)
        assert chat.choices[0].message is not None
        claude = anthropic.Anthropic(base_url=gw.url, max_retries=0)
        with claude.messages.stream(model="worker", max_tokens=2,
                                    messages=[{"role": "user", "content": "Say hi."}]) as stream:
            assert stream.get_final_message().role == "assistant"
        with pytest.raises(anthropic.PermissionDeniedError):  # a tenant cannot write another's evidence
            claude.messages.create(model="worker", max_tokens=2, messages=[{"role": "user", "content": "x"}],
                                   extra_headers={"X-Workspace-Id": "ws-a"})
        db = gw.config.capture.db
        wait_for(lambda: db.exists() and len(read_decisions(db)) == 2, "both decisions captured")
        assert sorted((d.workspace, d.api) for d in read_decisions(db)) == [("ws-a", "chat"), ("ws-b", "messages")]
        assert sample(gw, "worker_gateway_in_flight", workspace="ws-b") == 0  # the stream gave its share back
