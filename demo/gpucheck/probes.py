"""The requests the check sends through the running gateway, and what each answer must show: the model
list, a chat completion, an Anthropic Messages request, a LoRA adapter answering, the prefix cache hitting
on a repeated prefix, and the NVML series. Plain HTTP (urllib), as any client would send it."""

from __future__ import annotations

import json
import secrets
import time
import urllib.error
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

from core.jsonfile import JsonFileError, loads_bounded
from demo.gpucheck.check_context import CheckFailedError, Done, GpuCheckContext, StepSkippedError, run_bounded
from demo.gpucheck.steps import Figure
from serve.gateway.metrics import parse_engine_metrics

UPSTREAM = "engine-0"  # the one upstream of the check's gateway (demo.serving.gateway_config)
# A long shared system prompt, so the repeated request's prefix spans whole KV-cache blocks.
PREFIX_TEXT = " ".join(f"Rule {i}: answer briefly, name the tool you would call and why." for i in range(40))


@dataclass(frozen=True)
class Reply:
    status: int
    headers: Mapping[str, str]
    """Lower-cased names."""
    text: str
    ms: float

    def json(self, where: str) -> Any:
        try:
            return loads_bounded(self.text, where)
        except JsonFileError as exc:
            raise CheckFailedError(f"{where}: HTTP {self.status}, not JSON ({exc})") from None


def call(method: str, url: str, body: Any = None, headers: Mapping[str, str] | None = None,
         timeout_s: float = 30.0) -> Reply:
    """One request; an HTTP error status is a reply, a connection that fails is a CheckFailedError."""
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(url, data=data, method=method,
                                     headers={"Content-Type": "application/json", **(headers or {})})
    started = time.perf_counter()
    try:
        with urllib.request.urlopen(request, timeout=max(timeout_s, 1.0)) as resp:
            status, raw, got = resp.status, resp.read(), resp.headers
    except urllib.error.HTTPError as err:
        status, raw, got = err.code, err.read(), err.headers
    except (urllib.error.URLError, OSError) as exc:
        raise CheckFailedError(f"{method} {url}: {getattr(exc, 'reason', exc)}") from None
    ms = 1000 * (time.perf_counter() - started)
    return Reply(status, {k.lower(): v for k, v in got.items()}, raw.decode("utf-8", errors="replace"), ms)


def expect(reply: Reply, status: int, what: str) -> None:
    if reply.status != status:
        raise CheckFailedError(f"{what}: HTTP {reply.status} (expected {status}): {reply.text[:300]}")


def admin(ctx: GpuCheckContext, method: str, path: str, body: Any = None, timeout_s: float = 30.0) -> Reply:
    return call(method, f"{ctx.gateway()}/admin{path}", body, {"Authorization": f"Bearer {ctx.token}"}, timeout_s)


def chat(ctx: GpuCheckContext, model: str, messages: list[dict[str, str]], timeout_s: float,
         max_tokens: int = 8) -> Reply:
    body = {"model": model, "messages": messages, "max_tokens": max_tokens, "temperature": 0}
    return call("POST", f"{ctx.gateway()}/v1/chat/completions", body,
                {"X-Workspace-Id": "ws-gpu-check", "X-Session-Id": "gpu-check"}, timeout_s)


def answer_text(reply: Reply, what: str) -> tuple[str, int]:
    """A chat completion's text and completion tokens; anything else is a failure naming `what`."""
    expect(reply, 200, what)
    body = reply.json(what)
    try:
        content, tokens = body["choices"][0]["message"]["content"], body["usage"]["completion_tokens"]
    except (KeyError, IndexError, TypeError):
        raise CheckFailedError(f"{what}: not a chat completion: {reply.text[:300]}") from None
    if not isinstance(content, str) or not isinstance(tokens, int) or tokens < 1:
        raise CheckFailedError(f"{what}: no generated text: {reply.text[:300]}")
    return content, tokens


def check_models(ctx: GpuCheckContext, timeout_s: float) -> Done:
    """The gateway lists the route and the base model; the engine serves the base model (vLLM's version)."""
    listed = {m["id"]: m for m in call("GET", f"{ctx.gateway()}/v1/models", timeout_s=timeout_s)
              .json("gateway /v1/models").get("data", [])}
    kinds = {name: entry.get("kind") for name, entry in listed.items()}
    if kinds.get("worker") != "route" or kinds.get("worker-base") != "base":
        raise CheckFailedError(f"gateway /v1/models: expected the route worker and the base worker-base, got {kinds}")
    served = [m["id"] for m in call("GET", f"{ctx.engine()}/v1/models", timeout_s=timeout_s)
              .json("engine /v1/models").get("data", [])]
    if "worker-base" not in served:
        raise CheckFailedError(f"engine /v1/models: worker-base is not served (got {served})")
    version = call("GET", f"{ctx.gateway()}/version", timeout_s=timeout_s).json("gateway /version").get("version")
    return Done(f"gateway: {', '.join(sorted(listed))}; engine: {', '.join(served)}; vLLM {version}",
                {"vllm_version": version})


def check_chat(ctx: GpuCheckContext, timeout_s: float) -> Done:
    reply = chat(ctx, "worker", [{"role": "user", "content": "Say hi."}], timeout_s)
    _, tokens = answer_text(reply, "POST /v1/chat/completions")
    served = reply.headers.get("x-worker-adapter")
    if reply.headers.get("x-worker-route") != "worker" or not served:
        raise CheckFailedError(f"chat: routing headers missing: {dict(reply.headers)}")
    return Done(f"200 in {reply.ms:.0f} ms, {tokens} tokens, route worker -> {served} "
                f"({reply.headers.get('x-worker-kind')})", {"ms": round(reply.ms, 1), "tokens": tokens})


def check_messages(ctx: GpuCheckContext, timeout_s: float) -> Done:
    """`POST /v1/messages` (the Anthropic Messages API) through the gateway."""
    body = {"model": "worker", "max_tokens": 8, "messages": [{"role": "user", "content": "Hi"}]}
    reply = call("POST", f"{ctx.gateway()}/v1/messages", body, {"anthropic-version": "2023-06-01"}, timeout_s)
    expect(reply, 200, "POST /v1/messages")
    answer = reply.json("POST /v1/messages")
    if not isinstance(answer, dict) or answer.get("type") != "message":
        raise CheckFailedError(f"POST /v1/messages: not a Messages answer (type {answer!r:.100}): {reply.text[:300]}")
    usage = answer.get("usage") or {}
    return Done(f"200 in {reply.ms:.0f} ms, stop_reason {answer.get('stop_reason')}, "
                f"{usage.get('output_tokens')} output tokens", {"ms": round(reply.ms, 1)})


def check_lora(ctx: GpuCheckContext, timeout_s: float) -> Done:
    """A seeded adapter made (`worker-serve adapter make-random`), registered and loaded through the admin
    API, then asked by its version: the gateway must say that version answered. The name is new each run
    (names are never reused)."""
    deadline = time.monotonic() + timeout_s
    version = f"gpu-check-{secrets.token_hex(4)}"
    started = time.monotonic()
    run_bounded("worker-serve adapter make-random", ["-m", "serve", "adapter", "make-random", "--seed", "1",
                                                     str((ctx.adapter_root / version).absolute())],
                ctx.logs / "adapter.log", max(deadline - time.monotonic(), 1))
    made = time.monotonic() - started
    expect(admin(ctx, "POST", "/adapters", {"name": version, "path": version}, deadline - time.monotonic()), 201,
           f"register {version}")
    started = time.monotonic()
    expect(admin(ctx, "POST", f"/adapters/{version}/load", timeout_s=deadline - time.monotonic()), 200,
           f"load {version}")
    loaded = time.monotonic() - started
    reply = chat(ctx, version, [{"role": "user", "content": "Say hi."}], deadline - time.monotonic())
    _, tokens = answer_text(reply, f"chat with model {version}")
    if reply.headers.get("x-worker-adapter") != version or reply.headers.get("x-worker-kind") != "pinned":
        raise CheckFailedError(f"chat with model {version}: answered by {reply.headers.get('x-worker-adapter')} "
                               f"({reply.headers.get('x-worker-kind')})")
    served = [m["id"] for m in call("GET", f"{ctx.engine()}/v1/models", timeout_s=10).json("engine /v1/models")
              .get("data", [])]
    if version not in served:
        raise CheckFailedError(f"engine /v1/models does not list the loaded adapter {version}: {served}")
    return Done(f"{version}: made in {made:.1f} s, loaded in {loaded:.1f} s, answered in {reply.ms:.0f} ms "
                f"({tokens} tokens)", {"make_s": round(made, 1), "load_s": round(loaded, 2),
                                       "answer_ms": round(reply.ms, 1)})


def gateway_samples(ctx: GpuCheckContext, timeout_s: float) -> dict[str, list[tuple[dict[str, str], float]]]:
    """The gateway's /metrics by sample name: (labels, value) per series."""
    reply = call("GET", f"{ctx.gateway()}/metrics", timeout_s=timeout_s)
    expect(reply, 200, "gateway /metrics")
    out: dict[str, list[tuple[dict[str, str], float]]] = {}
    for family in text_string_to_metric_families(reply.text):
        for sample in family.samples:
            out.setdefault(sample.name, []).append((dict(sample.labels), float(sample.value)))
    return out


def prefix_counters(ctx: GpuCheckContext, timeout_s: float) -> tuple[float, float, float, float]:
    """(queries, hits) as the gateway re-exports them for its upstream, then as the engine itself says."""
    samples = gateway_samples(ctx, timeout_s)

    def ours(name: str) -> float:
        values = [v for labels, v in samples.get(name, []) if labels.get("upstream") == UPSTREAM]
        if not values:
            raise CheckFailedError(f"gateway /metrics has no {name}{{upstream={UPSTREAM!r}}}")
        return values[0]

    engine = parse_engine_metrics(call("GET", f"{ctx.engine()}/metrics", timeout_s=timeout_s).text)
    if engine.prefix_cache_queries is None or engine.prefix_cache_hits is None:
        raise CheckFailedError("engine /metrics has no prefix-cache counters (is enable_prefix_caching on?)")
    return (ours("worker_engine_prefix_cache_queries_total"), ours("worker_engine_prefix_cache_hits_total"),
            engine.prefix_cache_queries, engine.prefix_cache_hits)


def check_prefix_cache(ctx: GpuCheckContext, timeout_s: float) -> Done:
    """The same long prompt twice (opened by a fresh nonce, so no earlier request shares it): the second
    must hit the cache, at the engine and in the counters the gateway re-exports."""
    deadline = time.monotonic() + timeout_s
    messages = [{"role": "system", "content": f"Session {secrets.token_hex(8)}. {PREFIX_TEXT}"},
                {"role": "user", "content": "Say hi."}]
    before = prefix_counters(ctx, timeout_s)
    answer_text(chat(ctx, "worker", messages, deadline - time.monotonic(), max_tokens=1), "first request")
    middle = prefix_counters(ctx, deadline - time.monotonic())
    answer_text(chat(ctx, "worker", messages, deadline - time.monotonic(), max_tokens=1), "repeated request")
    while True:
        after = prefix_counters(ctx, max(deadline - time.monotonic(), 1))
        gateway_hits, engine_hits = after[1] - middle[1], after[3] - middle[3]
        if (gateway_hits > 0 and engine_hits > 0) or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    queries = after[0] - middle[0]
    if gateway_hits <= 0 or engine_hits <= 0:
        raise CheckFailedError(f"the repeated prefix did not hit the cache: hits +{engine_hits:.0f} at the engine, "
                               f"+{gateway_hits:.0f} at the gateway, of {queries:.0f} prompt tokens")
    return Done(f"repeated request: {gateway_hits:.0f} of {queries:.0f} prompt tokens from the cache "
                f"(first request: {middle[1] - before[1]:.0f} of {middle[0] - before[0]:.0f})",
                {"first_hits": middle[1] - before[1], "first_queries": middle[0] - before[0],
                 "repeat_hits": gateway_hits, "repeat_queries": queries})


GPU_SERIES = ("worker_gpu_memory_used_bytes", "worker_gpu_memory_total_bytes", "worker_gpu_utilization_ratio",
              "worker_gpu_temperature_celsius", "worker_gpu_power_watts")


def check_nvml(ctx: GpuCheckContext, timeout_s: float) -> Done:
    """`worker_gpu_nvml_up 1` and each GPU's series at the gateway; with memory in use (the engine's)."""
    samples = gateway_samples(ctx, timeout_s)
    up = [v for _, v in samples.get("worker_gpu_nvml_up", [])]
    if not up:
        raise CheckFailedError("gateway /metrics has no worker_gpu_nvml_up")
    series = {name: {labels.get("gpu", ""): v for labels, v in samples.get(name, [])} for name in GPU_SERIES}
    if ctx.options.dry_run:
        if up[0] == 0 and any(series.values()):
            raise CheckFailedError(f"worker_gpu_nvml_up 0, yet GPU series are exported: {sorted(series)}")
        raise StepSkippedError(f"dry run: worker_gpu_nvml_up {up[0]:.0f}, "
                               f"{'GPU series absent, as on any host without a GPU' if up[0] == 0 else 'not judged'}")
    if up[0] != 1:
        raise CheckFailedError("worker_gpu_nvml_up is 0: the gateway cannot read NVML on this GPU host")
    used, total = series["worker_gpu_memory_used_bytes"], series["worker_gpu_memory_total_bytes"]
    if not used or not all(total.get(gpu, 0) > 0 for gpu in used) or max(used.values()) <= 0:
        raise CheckFailedError(f"GPU memory series missing or zero: used {used}, total {total}")
    figures: dict[str, Figure] = {"gpus": len(used)}
    for name in GPU_SERIES:
        for gpu, value in series[name].items():
            figures[f"{name.removeprefix('worker_gpu_')}{{gpu={gpu}}}"] = value
    absent = [name for name in GPU_SERIES if not series[name]]
    return Done(f"{len(used)} GPU(s); memory used {max(used.values()) / 2**30:.1f} of "
                f"{max(total.values()) / 2**30:.0f} GiB" + (f"; absent: {', '.join(absent)}" if absent else ""),
                figures)
