"""vLLM 0.32 honours the gateway's `cache_salt` on every API that fills the cache, read from the engine's
own counters (`vllm:prefix_cache_hits` / `_queries`): a workspace's repeated prompt hits its own blocks,
another workspace's same prompt hits none. One token per answer: only the prefill matters here."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from tests.support.gateway_harness import RunningGateway, wait_for, write_config
from tests.support.live import engine_value

pytestmark = pytest.mark.engine

RUN = uuid.uuid4().hex[:8]
TEXT = " ".join(f"Clause {i}: ledger {RUN} keeps entry {i * 7} for the audit." for i in range(40))  # many blocks
BODIES: dict[str, dict[str, Any]] = {
    "/v1/chat/completions": {"messages": [{"role": "user", "content": TEXT}], "max_tokens": 1},
    "/v1/completions": {"prompt": TEXT, "max_tokens": 1},
    "/v1/messages": {"messages": [{"role": "user", "content": TEXT}], "max_tokens": 1},
    "/v1/responses": {"input": TEXT, "max_output_tokens": 1},
}


@pytest.fixture(scope="module")
def gw(engine, tmp_path_factory):
    """No keys: the workspace is `X-Workspace-Id`, salted as a keyed gateway salts a key's workspace."""
    directory = tmp_path_factory.mktemp("prefix")
    (directory / "adapters").mkdir()
    config = write_config(directory / "gw", [engine.base_url], directory / "adapters",
                          gateway='prefix_cache_scope = "workspace"')
    with RunningGateway(config) as gateway:
        yield gateway


@pytest.mark.parametrize("path", sorted(BODIES))
def test_a_workspace_hits_its_own_prefix_and_never_anothers(gw, engine, path):
    def send(workspace: str) -> None:
        response = gw.client.post(path, json={"model": "worker", "temperature": 0, **BODIES[path]},
                                  headers={"X-Workspace-Id": f"{workspace}-{RUN}"})
        assert response.status_code == 200, response.text

    def counters() -> tuple[float, float]:
        return (engine_value(engine.base_url, "vllm:prefix_cache_hits_total"),
                engine_value(engine.base_url, "vllm:prefix_cache_queries_total"))

    name = path.strip("/").replace("/", "-")
    _, before = counters()
    send(f"a-{name}")
    hits, queries = wait_for(lambda: (c := counters())[1] > before and c, "the first prompt to be counted")
    send(f"a-{name}")
    hits, queries = wait_for(lambda: (c := counters())[0] > hits and c, "the workspace's own prefix to hit")
    send(f"b-{name}")  # the same prompt from another workspace
    after, _ = wait_for(lambda: (c := counters())[1] > queries and c, "the other workspace's prompt to be counted")
    assert after == hits
