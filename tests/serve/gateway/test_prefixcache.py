"""Each workspace's own prefix cache: the `cache_salt` the real gateway puts on what it forwards, over HTTP.

The upstream is the named fault injector (tests/support/fault_upstream.py), used here only because it
records each body exactly as the gateway sent it; that vLLM honours the field on every API is
test_prefixcache_live.py's.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from serve.gateway.keys import make_key
from tests.serve.gateway.test_tenancy import API_BODIES, entry, gateway_config
from tests.support.fault_upstream import FaultUpstream
from tests.support.gateway_harness import RunningGateway, fake_adapter, wait_for

KEY_A, HASH_A = make_key()
KEY_B, HASH_B = make_key()
KEY_SVC, HASH_SVC = make_key()
KEYS = entry("a-1", HASH_A, "ws-a") + entry("b-1", HASH_B, "ws-b") + entry("replay", HASH_SVC, workspaces='"*"')
PROMPT = {"model": "worker", "messages": [{"role": "user", "content": "Summarise invoice INV-7 for me."}],
          "max_tokens": 4}
SALTING = sorted(p for p in API_BODIES if not p.endswith("count_tokens"))


@pytest.fixture
def gw(tmp_path: Path, fault: FaultUpstream) -> Iterator[RunningGateway]:
    """A gateway with client keys and no scope set: `workspace`, the default with keys."""
    with RunningGateway(gateway_config(tmp_path, fault.url, KEYS)) as gateway:
        yield gateway


def forwarded(gw: RunningGateway, fault: FaultUpstream, key: str | None, body: dict[str, Any] = PROMPT,
              path: str = "/v1/chat/completions", **headers: str) -> dict[str, Any]:
    """The body the engine got for one request."""
    sent = len(fault.requests)
    response = gw.client.post(path, json=body, headers={**({"x-api-key": key} if key else {}), **headers})
    assert response.status_code == 200, response.text
    assert len(fault.requests) == sent + 1
    return fault.requests[-1]


def salt(gw: RunningGateway, fault: FaultUpstream, key: str | None, body: dict[str, Any] = PROMPT, **headers: str) -> str:
    value = forwarded(gw, fault, key, body, **headers)["cache_salt"]
    assert isinstance(value, str)
    return value


def test_two_workspaces_with_the_same_prompt_get_different_salts_and_each_keeps_its_own(gw, fault):
    a, b = salt(gw, fault, KEY_A), salt(gw, fault, KEY_B)
    assert a != b
    assert salt(gw, fault, KEY_A) == a and salt(gw, fault, KEY_B) == b
    assert salt(gw, fault, KEY_SVC, **{"X-Workspace-Id": "ws-a"}) == a  # the workspace's, whoever's key sent it
    assert salt(gw, fault, KEY_SVC) not in (a, b)  # no workspace named: a cache of its own
    # Not the workspace's name, nor a hash anyone could compute from it: vLLM's 128-character alphabet.
    assert re.fullmatch(r"[0-9a-f]{64}", a) and a != hashlib.sha256(b"ws-a").hexdigest()


@pytest.mark.parametrize("path", SALTING)
def test_every_api_that_fills_the_cache_carries_the_workspace_salt_and_count_tokens_none(gw, fault, path):
    chat = salt(gw, fault, KEY_A)
    assert forwarded(gw, fault, KEY_A, API_BODIES[path], path)["cache_salt"] == chat
    counted = forwarded(gw, fault, KEY_A, {**API_BODIES["/v1/messages/count_tokens"], "cache_salt": chat},
                        "/v1/messages/count_tokens")
    assert "cache_salt" not in counted  # vLLM's count_tokens has no such field and fills no cache


def test_the_salt_survives_a_restart_and_another_gateways_state_gives_another(tmp_path, fault):
    with RunningGateway(gateway_config(tmp_path, fault.url, KEYS)) as gw:
        first = salt(gw, fault, KEY_A)
    with RunningGateway(gateway_config(tmp_path, fault.url, KEYS)) as gw:
        assert salt(gw, fault, KEY_A) == first
    with RunningGateway(gateway_config(tmp_path / "other", fault.url, KEYS)) as gw:
        assert salt(gw, fault, KEY_A) != first  # a secret of the state store, not a function of the name


def test_a_client_salt_cannot_select_another_workspaces_cache(gw, fault):
    a, b = salt(gw, fault, KEY_A), salt(gw, fault, KEY_B)
    stolen = salt(gw, fault, KEY_B, {**PROMPT, "cache_salt": a})
    assert stolen not in (a, b)  # folded into ws-b's own
    assert salt(gw, fault, KEY_B, {**PROMPT, "cache_salt": a}) == stolen  # and still ws-b's, request after request
    assert salt(gw, fault, KEY_A, {**PROMPT, "cache_salt": "user-1"}) != salt(
        gw, fault, KEY_B, {**PROMPT, "cache_salt": "user-1"})  # the same client salt in two workspaces
    for bad in ("", 7, ["x"]):
        response = gw.client.post("/v1/chat/completions", json={**PROMPT, "cache_salt": bad},
                                  headers={"x-api-key": KEY_A})
        assert response.status_code == 400 and response.json()["error"]["code"] == "invalid_cache_salt"


def test_a_shadow_copy_carries_its_requests_salt(tmp_path, fault):
    with RunningGateway(gateway_config(tmp_path, fault.url, KEYS)) as gw:
        fake_adapter(tmp_path / "adapters", "cand-v1")
        gw.ok("POST", "/adapters", {"name": "cand-v1", "path": "cand-v1"})
        gw.ok("POST", "/adapters/cand-v1/load")
        gw.ok("POST", "/routes/worker/shadow", {"candidate": "cand-v1", "sample_rate": 1.0})
        assert gw.client.post("/v1/chat/completions", json=PROMPT, headers={"x-api-key": KEY_B}).status_code == 200
        wait_for(lambda: gw.ok("GET", "/shadow")["results"], "the shadow comparison")
        production, shadow = (next(r for r in fault.requests if r["model"] == m) for m in ("worker-base", "cand-v1"))
        assert re.fullmatch(r"[0-9a-f]{64}", production["cache_salt"]) and shadow["cache_salt"] == production["cache_salt"]


@pytest.mark.parametrize(("keys", "scope"), [(KEYS, 'prefix_cache_scope = "shared"'), (None, "")])
def test_shared_scope_forwards_the_body_as_sent(tmp_path, fault, keys, scope):
    """Set explicitly, or the default without keys: today's behaviour, a client's salt passed on unchanged."""
    config = gateway_config(tmp_path, fault.url, keys)
    config.write_text(config.read_text().replace("[gateway]\n", f"[gateway]\n{scope}\n", 1))
    key = KEY_A if keys else None
    with RunningGateway(config) as gw:
        assert "cache_salt" not in forwarded(gw, fault, key, **{"X-Workspace-Id": "ws-a"})
        assert forwarded(gw, fault, key, {**PROMPT, "cache_salt": "mine"}, **{"X-Workspace-Id": "ws-a"})[
            "cache_salt"] == "mine"


def test_workspace_scope_without_keys_salts_by_the_header(tmp_path, fault):
    config = gateway_config(tmp_path, fault.url, None)
    config.write_text(config.read_text().replace("[gateway]\n", '[gateway]\nprefix_cache_scope = "workspace"\n', 1))
    with RunningGateway(config) as gw:
        a = salt(gw, fault, None, **{"X-Workspace-Id": "ws-a"})
        assert salt(gw, fault, None, **{"X-Workspace-Id": "ws-b"}) != a
        assert salt(gw, fault, None, **{"X-Workspace-Id": "ws-a"}) == a
