"""Engine series re-read from vLLM's /metrics text, and the gateway's metric names."""

from __future__ import annotations

from serve.gateway.metrics import GatewayMetrics, parse_engine_metrics

# As vLLM 0.32 writes it (two engine label sets to check summing).
VLLM_TEXT = """# HELP vllm:prefix_cache_queries Prefix cache queries
# TYPE vllm:prefix_cache_queries counter
vllm:prefix_cache_queries_total{engine="0",model_name="worker-base"} 18810.0
vllm:prefix_cache_queries_total{engine="1",model_name="worker-base"} 190.0
# HELP vllm:prefix_cache_hits Prefix cache hits
# TYPE vllm:prefix_cache_hits counter
vllm:prefix_cache_hits_total{engine="0",model_name="worker-base"} 13568.0
# HELP vllm:request_success Count of successfully processed requests.
# TYPE vllm:request_success counter
vllm:request_success_total{engine="0",finished_reason="stop",model_name="worker-base"} 6.0
vllm:request_success_total{engine="0",finished_reason="length",model_name="worker-base"} 2.0
vllm:request_success_total{engine="0",finished_reason="abort",model_name="worker-base"} 0.0
vllm:request_success_total{engine="1",finished_reason="stop",model_name="worker-base"} 1.0
# HELP vllm:num_requests_running Number of requests in model execution batches.
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{engine="0",model_name="worker-base"} 6.0
"""


def test_engine_counters_are_summed_over_vllm_label_sets():
    sample = parse_engine_metrics(VLLM_TEXT)
    assert sample.prefix_cache_queries == 19000.0
    assert sample.prefix_cache_hits == 13568.0
    assert dict(sample.finished) == {"stop": 7.0, "length": 2.0, "abort": 0.0}


def test_engine_series_are_exported_per_upstream_and_absent_when_unread():
    metrics = GatewayMetrics(nvml=False)
    metrics.engine.samples = {"engine-0": parse_engine_metrics(VLLM_TEXT)}
    value = metrics.registry.get_sample_value
    assert value("worker_engine_prefix_cache_queries_total", {"upstream": "engine-0"}) == 19000.0
    assert value("worker_engine_prefix_cache_hits_total", {"upstream": "engine-0"}) == 13568.0
    assert value("worker_engine_requests_finished_total", {"upstream": "engine-0", "finished_reason": "stop"}) == 7.0
    metrics.engine.samples = {}
    assert value("worker_engine_prefix_cache_queries_total", {"upstream": "engine-0"}) is None


def test_gateway_series_have_the_documented_names_and_labels():
    metrics = GatewayMetrics(nvml=False)
    metrics.observe("worker", "a-v1", "canary", 200, 0.2, api="messages")
    metrics.observe("worker", "a-v1", "canary", 502, 0.1, "upstream_error", api="messages")
    metrics.set_canaries({("worker", "a-v1"): 30.0})
    value = metrics.registry.get_sample_value
    labels = {"route": "worker", "adapter": "a-v1", "kind": "canary", "api": "messages"}
    assert value("worker_gateway_requests_total", {**labels, "status": "200"}) == 1
    assert value("worker_gateway_errors_total", {**labels, "reason": "upstream_error"}) == 1
    assert value("worker_gateway_request_duration_seconds_count", labels) == 2
    assert value("worker_gateway_canary_percent", {"route": "worker", "candidate": "a-v1"}) == 30.0
    metrics.set_canaries({})
    assert value("worker_gateway_canary_percent", {"route": "worker", "candidate": "a-v1"}) is None
    assert "_created" not in metrics.render().decode()


def test_older_vllm_prefix_cache_names_are_read_when_the_current_ones_are_absent():
    old = ('vllm:gpu_prefix_cache_queries_total{engine="0",model_name="m"} 50.0\n'
           'vllm:gpu_prefix_cache_hits_total{engine="0",model_name="m"} 20.0\n')
    assert (parse_engine_metrics(old).prefix_cache_queries, parse_engine_metrics(old).prefix_cache_hits) == (50, 20)
    both = old + 'vllm:prefix_cache_queries_total{engine="0",model_name="m"} 70.0\n'
    assert parse_engine_metrics(both).prefix_cache_queries == 70.0
    assert parse_engine_metrics("").prefix_cache_queries is None
