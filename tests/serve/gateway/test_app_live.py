"""The gateway in front of the real vLLM engine (CPU build, SmolLM2-135M) with real seeded LoRA
adapters: the official openai client, every routing kind, shadow comparison, rollback,
client disconnects and timeouts that abort the generation, a load the engine refuses, and
the engine's own metrics re-exported. Generation is kept to a few tokens per request."""

from __future__ import annotations

import json
import re
import shutil
import uuid

import httpx
import pytest
from openai import NotFoundError, OpenAI

from core.lineage import model_sha256
from serve.engine.modelbuild import default_model_dir
from tests.support.gateway_harness import TOKEN, RunningGateway, wait_for, write_config
from tests.support.gpu_host import nvml_gpu_count
from tests.support.live import engine_value, http_json

pytestmark = pytest.mark.engine

RUN = uuid.uuid4().hex[:6]  # adapter names are never reused on an engine, also across test runs
A, B = f"gw-a-{RUN}", f"gw-b-{RUN}"
# A short call (an enum keeps the argument short): the whole call is ~30 tokens.
TOOLS = [{"type": "function", "function": {
    "name": "lookup", "description": "Look up one invoice by its id.", "strict": True,
    "parameters": {"type": "object", "additionalProperties": False, "required": ["id"],
                   "properties": {"id": {"type": "string", "enum": ["INV-7", "INV-8"]}}}}}]
ASK = [{"role": "user", "content": "Look up invoice INV-7."}]


@pytest.fixture(scope="module")
def gw(engine, seeded_adapters, tmp_path_factory):
    """One gateway for the module, with adapters A (seed 1) and B (seed 2) loaded on the engine."""
    root = seeded_adapters[1].parent
    config = write_config(tmp_path_factory.mktemp("gateway"), [engine.base_url], root)
    with RunningGateway(config) as gateway:
        for name, seed in ((A, 1), (B, 2)):
            gateway.ok("POST", "/adapters", {"name": name, "path": seeded_adapters[seed].name})
            gateway.ok("POST", f"/adapters/{name}/load")
        yield gateway


def reset(gw: RunningGateway, production: str) -> None:
    gw.ok("DELETE", "/routes/worker/canary")
    gw.ok("DELETE", "/routes/worker/shadow")
    gw.ok("POST", "/routes/worker/production", {"version": production})


def test_official_openai_client_works_streaming_and_not(gw):
    reset(gw, "worker-base")
    client = OpenAI(base_url=f"{gw.url}/v1", api_key="not-checked", max_retries=0)
    raw = client.chat.completions.with_raw_response.create(model="worker", messages=ASK, max_tokens=6, temperature=0)
    completion = raw.parse()
    assert raw.headers["x-worker-kind"] == "production" and completion.model == "worker-base"
    assert isinstance(completion.choices[0].message.content, str) and completion.usage.completion_tokens > 0
    chunks = list(client.chat.completions.create(model="worker", messages=ASK, max_tokens=6, temperature=0,
                                                 stream=True))
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text and chunks[-1].choices[0].finish_reason in ("length", "stop")
    assert text == completion.choices[0].message.content  # temperature 0: the same answer both ways
    legacy = client.completions.create(model="worker", prompt="Invoices are", max_tokens=4, temperature=0)
    assert legacy.choices[0].text
    assert {"worker", "worker-base", A, B} <= {m.id for m in client.models.list()}
    with pytest.raises(NotFoundError, match="does not exist"):
        client.chat.completions.create(model="no-such-version", messages=ASK, max_tokens=1)


def test_production_canary_pinned_and_shadow_each_reach_the_engine(gw):
    reset(gw, A)
    gw.ok("POST", "/routes/worker/canary", {"candidate": B, "percent": 30, "sticky_by": "workspace"})
    gw.ok("POST", "/routes/worker/shadow", {"candidate": "worker-base", "sample_rate": 1.0})
    kinds = {w: gw.ok("GET", "/resolve", workspace=w)["kind"] for w in (f"ws-{i}" for i in range(40))}
    in_canary = next(w for w, k in kinds.items() if k == "canary")
    in_production = next(w for w, k in kinds.items() if k == "production")

    production = gw.chat(headers={"X-Workspace-Id": in_production}, messages=ASK, tools=TOOLS,
                         tool_choice="required", max_tokens=64)
    assert production.status_code == 200, production.text
    assert production.headers["x-worker-kind"] == "production" and production.json()["model"] == A
    canary = gw.chat(headers={"X-Workspace-Id": in_canary})
    assert canary.headers["x-worker-kind"] == "canary" and canary.json()["model"] == B
    pinned = gw.chat(A, headers={"X-Workspace-Id": in_canary})
    assert pinned.headers["x-worker-kind"] == "pinned" and pinned.json()["model"] == A

    result = wait_for(lambda: gw.ok("GET", "/shadow")["results"], "the shadow comparison", limit_s=180)[0]
    assert result["production"] == A and result["candidate"] == "worker-base"
    assert result["production_answer"] == production.json()["choices"][0]["message"]
    shadow_message = result["shadow_answer"]
    assert result["agreement"] == expected_agreement(result["production_answer"], shadow_message)
    text = gw.metrics()
    for kind, adapter in (("production", A), ("canary", B), ("pinned", A), ("shadow", "worker-base")):
        assert re.search(rf'worker_gateway_requests_total\{{adapter="{adapter}",api="chat",kind="{kind}",route="[^"]*",'
                         rf'status="200"\}} [1-9]', text), kind


def expected_agreement(production: dict, shadow: dict) -> str:
    """Agreement worked out by hand for this test's one tool (flat string arguments); both
    answers must hold a structured call, as `tool_choice: required` makes vLLM write one."""
    def call(message: dict) -> tuple[str, dict]:
        function = message["tool_calls"][0]["function"]
        return function["name"], json.loads(function["arguments"])

    p, s = call(production), call(shadow)
    if p[0] != s[0]:
        return "different"
    if set(p[1]) != set(s[1]):
        return "same_tool"
    return "exact" if p[1] == s[1] else "same_shape"


def test_rollback_takes_effect_on_the_next_request(gw):
    reset(gw, A)
    gw.ok("POST", "/routes/worker/production", {"version": B})
    assert gw.chat(max_tokens=2).json()["model"] == B
    rolled = gw.ok("POST", "/routes/worker/rollback")["route"]
    assert (rolled["production"], rolled["previous"]) == (A, B)
    answer = gw.chat(max_tokens=2)
    assert answer.headers["x-worker-adapter"] == A and answer.json()["model"] == A


@pytest.mark.parametrize("stream", [True, False], ids=["mid-stream", "unstreamed"])
def test_client_leaving_aborts_the_generation(gw, engine, stream):
    reset(gw, "worker-base")
    tokens_before = engine_value(engine.base_url, "vllm:generation_tokens_total")
    body = {"model": "worker", "messages": ASK, "max_tokens": 400, "ignore_eos": True, "stream": stream}
    with httpx.Client(base_url=gw.url, timeout=httpx.Timeout(120, read=1.0)) as client:
        if stream:
            with client.stream("POST", "/v1/chat/completions", json=body) as response:
                assert response.status_code == 200
                next(response.iter_bytes())
        else:
            with pytest.raises(httpx.ReadTimeout):
                client.post("/v1/chat/completions", json=body)
    wait_for(lambda: engine_value(engine.base_url, "vllm:num_requests_running") == 0, "the engine to drop the request")
    assert engine_value(engine.base_url, "vllm:generation_tokens_total") - tokens_before < 400
    logged = wait_for(lambda: gw.ok("GET", "/requests", limit=1)["requests"], "the request log")
    assert logged[0]["status"] == 499


def test_upstream_timeout_is_504_and_the_generation_is_aborted(engine, seeded_adapters, tmp_path):
    config = write_config(tmp_path, [engine.base_url], seeded_adapters[1].parent, gateway="request_timeout_s = 1")
    tokens_before = engine_value(engine.base_url, "vllm:generation_tokens_total")
    with RunningGateway(config) as gw:
        slow = gw.chat(max_tokens=400, ignore_eos=True)
        assert slow.status_code == 504 and slow.json()["error"]["code"] == "upstream_timeout"
    wait_for(lambda: engine_value(engine.base_url, "vllm:num_requests_running") == 0, "the engine to drop the request")
    assert engine_value(engine.base_url, "vllm:generation_tokens_total") - tokens_before < 400


def test_a_load_the_engine_refuses_leaves_registry_routes_and_engine_unchanged(gw, engine, seeded_adapters):
    corrupt = seeded_adapters[1].parent / f"corrupt-{RUN}"
    corrupt.mkdir()
    shutil.copy(seeded_adapters[1] / "adapter_config.json", corrupt)
    (corrupt / "adapter_model.safetensors").write_bytes(b"\xff" * 1000)  # not safetensors
    name = f"gw-corrupt-{RUN}"
    gw.ok("POST", "/adapters", {"name": name, "path": corrupt.name})
    before = gw.ok("GET", "/state")
    refused = gw.admin("POST", f"/adapters/{name}/load")
    assert refused.status_code == 502 and refused.json()["error"]["code"] == "engine_load_failed"
    after = gw.ok("GET", "/state")
    assert {k: after[k] for k in ("revision", "routes", "adapters")} == {
        k: before[k] for k in ("revision", "routes", "adapters")}
    _, models = http_json("GET", f"{engine.base_url}/v1/models")
    assert name not in {m["id"] for m in models["data"]}
    assert gw.chat(max_tokens=1).status_code == 200  # the engine is still serving


def test_metrics_carry_gateway_engine_and_the_hosts_gpu_series(gw):
    text = gw.metrics()
    for name in ("worker_gateway_requests_total", "worker_gateway_request_duration_seconds_bucket",
                 "worker_gateway_errors_total", "worker_gateway_shadow_comparisons_total"):
        assert re.search(rf"^{name}\{{", text, re.M), name
    assert 'worker_gateway_upstream_healthy{upstream="engine-0"} 1.0' in text
    queries = re.search(r'^worker_engine_prefix_cache_queries_total\{upstream="engine-0"\} ([0-9.e+]+)$', text, re.M)
    assert queries and float(queries.group(1)) > 0
    assert re.search(r'^worker_engine_prefix_cache_hits_total\{upstream="engine-0"\} ', text, re.M)
    assert re.search(r'^worker_engine_requests_finished_total\{finished_reason="length",upstream="engine-0"\} '
                     r'[1-9]', text, re.M)
    gpus = nvml_gpu_count()
    if gpus is None:  # no GPU: the series are absent, not zero
        assert "worker_gpu_nvml_up 0.0" in text and "worker_gpu_memory_total_bytes" not in text
    else:
        assert "worker_gpu_nvml_up 1.0" in text
        assert len(re.findall(r'^worker_gpu_memory_total_bytes\{gpu="\d+"\} ', text, re.M)) == gpus


def test_a_replay_through_the_gateway_records_the_engine_and_the_serving_version(gw, engine, tmp_path):
    """Issue 14 item 6 on the real engine: run.json's engine version and each result's served_by."""
    import asyncio

    from core.records import Decision
    from replay.run.decisions import plan
    from replay.run.endpoint import fetch_models
    from replay.run.run_config import RunConfig
    from replay.suite import Suite, SuiteManifest
    from tests.support.runs import send

    reset(gw, A)
    _, engine_version = http_json("GET", f"{engine.base_url}/version")
    wait_for(lambda: gw.client.get("/version").json()["version"] == engine_version["version"], "the engine version")
    config = RunConfig.model_validate({"endpoint": {"base_url": f"{gw.url}/v1"}, "decoding": {"max_tokens": 4},
                                       "arms": [{"name": "route", "model": "worker"}]})
    assert asyncio.run(fetch_models(config))[1] == engine_version["version"]
    decision = Decision.model_validate({
        "id": "d-1", "stratum": "verified_action", "cluster": "c", "workspace": "ws-a", "session": "s-1",
        "captured_at": "2026-07-01T10:00:00Z", "request": {"messages": ASK, "tools": TOOLS},
        "target": {"tool": "lookup", "arg_keys": ["id"]}})
    suite = Suite(tmp_path, SuiteManifest(name="t", version="1", created="2026-08-01T00:00:00Z"), (decision,), "0" * 64)
    send(plan(suite, config, set()), config, tmp_path / "results.jsonl")
    assert json.loads((tmp_path / "results.jsonl").read_text())["served_by"] == A


def test_models_lists_routes_and_loaded_versions(gw):
    reset(gw, A)
    models = {m["id"]: m for m in gw.client.get("/v1/models").json()["data"]}
    assert models["worker"]["production"] == A and models["worker"]["kind"] == "route"
    assert models[B]["parent"] == "worker-base" and models["worker-base"]["kind"] == "base"
    assert gw.admin("GET", "/state", token=TOKEN).json()["upstreams"][0]["healthy"] is True
    # Every entry names the engine's model by digest: the embedded model, unquantised, built from no record.
    under = {"base_sha256": model_sha256(default_model_dir()), "quantization": None, "derived_from": None}
    for name in ("worker", B, "worker-base"):
        assert {key: models[name][key] for key in under} == under
    assert gw.admin("GET", "/state", token=TOKEN).json()["base_model"] == under
    assert gw.admin("GET", "/adapters", token=TOKEN).json()["base_model"] == under
