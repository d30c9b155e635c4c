"""Prometheus metrics of one gateway app (its own CollectorRegistry, so several apps can live in
one process, e.g. in tests).

Gateway series carry `route`, `adapter` and `kind` labels (kind = production | canary |
shadow | pinned), and the request series `api` (chat | completions | messages | count_tokens |
responses: serve/gateway/apis/). A request that never resolved to a version (bad JSON, unknown model,
body too large) is counted with empty `route`, `adapter` and `kind`; a pinned request has an
empty `route`. vLLM counts adapter traffic under the base model name, so per-adapter traffic
exists only here.

Engine series are re-read from each upstream's `/metrics` when the gateway is scraped; an
upstream that cannot be read right now has no engine series (absent, not zero).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, disable_created_metrics, generate_latest
from prometheus_client.core import CounterMetricFamily, Metric
from prometheus_client.parser import text_string_to_metric_families

from core.names import is_name
from serve.gateway.gpu import GpuCollector

LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600)
ENGINE_QUERIES = ("vllm:prefix_cache_queries_total", "vllm:gpu_prefix_cache_queries_total")
ENGINE_HITS = ("vllm:prefix_cache_hits_total", "vllm:gpu_prefix_cache_hits_total")
ENGINE_FINISHED = "vllm:request_success_total"
LABEL_VALUES_MAX = 100
"""Distinct values each label that comes from requests (workspace, tool) may take; later ones share `_other`."""
OTHER = "_other"  # no name starts with "_", so it is never a real workspace's or tool's


@dataclass(frozen=True)
class EngineSample:
    """The engine counters the gateway re-exports, summed over vLLM's engine/model labels."""

    prefix_cache_queries: float | None = None
    prefix_cache_hits: float | None = None
    finished: Mapping[str, float] = field(default_factory=dict)


def parse_engine_metrics(text: str) -> EngineSample:
    """Sum the counters over vLLM's label sets. The prefix-cache counters are read under their
    current names, else under the `gpu_` names that older vLLM versions used (never both)."""
    sums: dict[str, float] = {}
    finished: dict[str, float] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == ENGINE_FINISHED:
                reason = sample.labels.get("finished_reason", "")
                finished[reason] = finished.get(reason, 0.0) + sample.value
            elif sample.name in ENGINE_QUERIES + ENGINE_HITS:
                sums[sample.name] = sums.get(sample.name, 0.0) + sample.value

    def first(names: tuple[str, ...]) -> float | None:
        return next((sums[n] for n in names if n in sums), None)

    return EngineSample(first(ENGINE_QUERIES), first(ENGINE_HITS), finished)


class EngineCollector:
    """Yields the last engine samples; the app refreshes them right before each scrape."""

    def __init__(self) -> None:
        self.samples: dict[str, EngineSample] = {}

    def collect(self) -> Iterator[Metric]:
        queries = CounterMetricFamily("worker_engine_prefix_cache_queries", "Prefix-cache queries (tokens) "
                                      "reported by the engine", labels=["upstream"])
        hits = CounterMetricFamily("worker_engine_prefix_cache_hits", "Prefix-cache hits (tokens) reported by "
                                   "the engine", labels=["upstream"])
        finished = CounterMetricFamily("worker_engine_requests_finished", "Requests the engine finished, by "
                                       "finish reason (stop, length, abort, error, ...)",
                                       labels=["upstream", "finished_reason"])
        for upstream, sample in sorted(self.samples.items()):
            if sample.prefix_cache_queries is not None:
                queries.add_metric([upstream], sample.prefix_cache_queries)
            if sample.prefix_cache_hits is not None:
                hits.add_metric([upstream], sample.prefix_cache_hits)
            for reason, value in sorted(sample.finished.items()):
                finished.add_metric([upstream, reason], value)
        yield from (queries, hits, finished)


class GatewayMetrics:
    def __init__(self, nvml: bool = True) -> None:
        # `*_created` series double the output and no dashboard reads them (unannotated upstream).
        disable_created_metrics()  # type: ignore[no-untyped-call]
        self.registry = CollectorRegistry()
        r = self.registry
        route_labels = ["route", "adapter", "kind", "api"]
        self.requests = Counter("worker_gateway_requests_total", "Requests by route, adapter version, kind, API "
                                "and HTTP status", [*route_labels, "status"], registry=r)
        self.duration = Histogram("worker_gateway_request_duration_seconds", "Request latency through the "
                                  "gateway (to the last byte for streams)", route_labels, buckets=LATENCY_BUCKETS,
                                  registry=r)
        self.errors = Counter("worker_gateway_errors_total", "Failed requests by reason", [*route_labels, "reason"],
                              registry=r)
        self.shadow_comparisons = Counter("worker_gateway_shadow_comparisons_total", "Shadow answers compared with "
                                          "production, by agreement level", ["route", "candidate", "agreement"],
                                          registry=r)
        self.shadow_dropped = Counter("worker_gateway_shadow_dropped_total", "Shadow requests not run",
                                      ["route", "reason"], registry=r)
        self.upstream_healthy = Gauge("worker_gateway_upstream_healthy", "1 when the upstream passes health "
                                      "checks", ["upstream"], registry=r)
        self.upstream_probe_failures = Counter("worker_gateway_upstream_probe_failures_total", "Health probes "
                                               "that failed, whether or not they took the upstream out",
                                               ["upstream"], registry=r)
        self.canary_percent = Gauge("worker_gateway_canary_percent", "Percent of sticky keys sent to the canary",
                                    ["route", "candidate"], registry=r)
        self.capture_descriptors = Counter("worker_capture_descriptors_total", "Decisions captured, by capture "
                                           "mode and workspace (bounded: see `bounded`)", ["mode", "workspace"],
                                           registry=r)
        self.guard_anomalies = Counter("worker_guard_anomalies_total", "Tool results the guard classified as an "
                                       "anomaly, by workspace, tool (both bounded: see `bounded`) and kind",
                                       ["workspace", "tool", "kind"], registry=r)
        self.log_write_errors = Counter("worker_gateway_log_write_errors_total", "Failed writes of the request/"
                                        "shadow log to the state store (rows kept for the next try)", registry=r)
        self.log_rows_dropped = Counter("worker_gateway_log_rows_dropped_total", "Request/shadow log rows given up, "
                                        "by table and reason: unwritable (the row's own values cannot be stored; "
                                        "the others are written) or overflow (the store failed too long)",
                                        ["table", "reason"], registry=r)
        self.capture_errors = Counter("worker_capture_errors_total", "Capture jobs lost (queue_full) or failed "
                                      "(process), and failed retention passes (retention); the production request "
                                      "is never affected", ["reason"], registry=r)
        self.capture_rows = Gauge("worker_capture_rows", "Decisions the capture store holds (after the last "
                                  "retention pass)", registry=r)
        self.capture_bytes = Gauge("worker_capture_bytes", "Bytes of the capture store on disk, its write-ahead "
                                   "log included (after the last retention pass)", registry=r)
        self.capture_pruned = Counter("worker_capture_pruned_rows_total", "Captured decisions deleted by "
                                      "retention (age or max_rows)", registry=r)
        self.throttled = Counter("worker_gateway_throttled_total", "Requests refused with 429 by the fair share, by "
                                 "workspace (bounded: see `bounded`) and reason: in_flight, requests, tokens, "
                                 "engine_busy", ["workspace", "reason"], registry=r)
        self.in_flight = Gauge("worker_gateway_in_flight", "Model API requests admitted and not finished (waiting "
                               "for an engine slot included), by workspace (bounded: see `bounded`)", ["workspace"],
                               registry=r)
        self.slots_waiting = Gauge("worker_gateway_engine_slots_waiting", "Requests waiting for an engine slot "
                                   "([fair_share] engine_slots)", registry=r)
        self.auth_refused = Counter("worker_gateway_auth_refused_total", "Model API requests refused by client-key "
                                    "authentication, by reason (missing_key, unknown_key, workspace_mismatch, "
                                    "key_in_query, two_keys)", ["reason"], registry=r)
        self.keys_loaded = Gauge("worker_gateway_client_keys", "Client keys in force (from [auth] keys_file)",
                                 registry=r)
        self.keys_reloads = Counter("worker_gateway_keys_reloads_total", "Reads of a changed keys file, by result "
                                    "(loaded, refused: the keys in force are kept)", ["result"], registry=r)
        self._label_values: dict[str, set[str]] = {}
        self._series: dict[tuple[str, str, str, str, int], tuple[Counter, Histogram]] = {}
        self.engine = EngineCollector()
        r.register(self.engine)
        self.gpu = GpuCollector(enabled=nvml)
        r.register(self.gpu)

    def bounded(self, label: str, value: str) -> str:
        """A label value taken from a request, so that clients cannot grow the series without bound:
        itself while it is a name among the first LABEL_VALUES_MAX seen for `label`, else `_other`."""
        seen = self._label_values.setdefault(label, set())
        if value == "" or value in seen:
            return value
        if not is_name(value) or len(seen) >= LABEL_VALUES_MAX:
            return OTHER
        seen.add(value)
        return value

    def observe(self, route: str, adapter: str, kind: str, status: int, seconds: float,
                reason: str | None = None, *, api: str) -> None:
        """Count one finished request. The series of a label set are looked up once and kept (`labels` checks
        and locks on every call: a cost on every request's path)."""
        series = self._series.get((route, adapter, kind, api, status))
        if series is None:
            series = (self.requests.labels(route, adapter, kind, api, str(status)),
                      self.duration.labels(route, adapter, kind, api))
            self._series[(route, adapter, kind, api, status)] = series
        series[0].inc()
        series[1].observe(seconds)
        if reason is not None:
            self.errors.labels(route, adapter, kind, api, reason).inc()

    def set_canaries(self, canaries: Mapping[tuple[str, str], float]) -> None:
        """Show exactly the running canaries (stopped ones disappear rather than read 0)."""
        self.canary_percent.clear()
        for (route, candidate), percent in canaries.items():
            self.canary_percent.labels(route, candidate).set(percent)

    def render(self) -> bytes:
        return generate_latest(self.registry)

    def close(self) -> None:
        self.gpu.close()
