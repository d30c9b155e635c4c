"""Gateway overhead, measured side by side in one run, loopback only, bounded request counts.

For two upstreams, the real vLLM engine and the planted instant upstream (scripts/bench_instant_upstream.py,
which isolates the gateway's own cost), the same request loop runs three times:

* direct to the upstream;
* through the gateway (`worker-serve gateway`, its own process) with shadow at 0%, capture off;
* through a second gateway with capture `full` at sample rate 1 for the requests' workspace:
  every answered request is guarded, described and stored (with its text) off the request path;
* through the gateway with shadow at 100%: every request is sampled for a copy to a candidate
  adapter, run in the background with the shipped bounds (`[shadow]` queue 32, concurrency 1),
  so what the queue cannot take is dropped and counted. On the engine the shadow copies
  compete with production for the same engine.

Printed per upstream: throughput ratio gateway/direct and the added p50/p99 latency.
Usage: `python scripts/bench_gateway.py` (starts its own engine) or `--engine-url URL`.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import tempfile
import time
import urllib.request
import uuid
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from core.process import ServiceProcess, free_port, run_main  # noqa: E402
from serve.engine.launcher import EngineProcess, load_engine_config  # noqa: E402

TOKEN = "bench-token"
# A tool loop's second turn: the guard classifies the tool result, capture stores the decision.
MESSAGES = [
    {"role": "user", "content": "Say hi to the finance team."},
    {"role": "assistant", "content": None, "tool_calls": [{"id": "call-1", "type": "function", "function": {
        "name": "find_team", "arguments": "{\"name\": \"finance\"}"}}]},
    {"role": "tool", "tool_call_id": "call-1", "content": "{\"team\": \"finance\", \"members\": 4}"},
]
TOOLS = [{"type": "function", "function": {"name": "find_team", "parameters": {
    "type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}}}]
HEADERS = {"X-Workspace-Id": "ws-bench", "X-Session-Id": "bench-session"}
CAPTURE = '[capture]\nmode = "full"\nworkspaces = ["ws-bench"]\nsample_rate = 1.0\n'


@dataclass(frozen=True)
class Result:
    requests: int
    errors: int
    seconds: float
    p50_ms: float
    p99_ms: float

    @property
    def rps(self) -> float:
        return self.requests / self.seconds


def http(method: str, url: str, body: dict | None = None) -> dict:
    request = urllib.request.Request(url, method=method, data=None if body is None else json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json", "Authorization": f"Bearer {TOKEN}"})
    with urllib.request.urlopen(request, timeout=600) as response:
        return json.loads(response.read() or b"{}")


async def load(base_url: str, model: str, requests: int, concurrency: int,
               max_tokens: int) -> tuple[Result, list[float]]:
    """`requests` chat completions from `concurrency` workers; latency per request to the last byte."""
    import aiohttp

    latencies: list[float] = []
    errors = 0
    body = {"model": model, "messages": MESSAGES, "tools": TOOLS, "max_tokens": max_tokens, "temperature": 0}
    todo = iter(range(requests))

    async def worker(session: aiohttp.ClientSession) -> None:
        nonlocal errors
        for _ in todo:
            started = time.perf_counter()
            async with session.post(f"{base_url}/v1/chat/completions", json=body, headers=HEADERS) as response:
                await response.read()
                errors += response.status != 200
            latencies.append(time.perf_counter() - started)

    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=600)) as session:
        started = time.perf_counter()
        await asyncio.gather(*(worker(session) for _ in range(concurrency)))
        seconds = time.perf_counter() - started
    cuts = statistics.quantiles(latencies, n=100)
    return Result(requests, errors, seconds, 1000 * statistics.median(latencies), 1000 * cuts[98]), latencies


class Gateway:
    """`worker-serve gateway` in its own process, in front of one upstream, with a candidate adapter."""

    def __init__(self, work: Path, upstream: str, adapter_root: Path, candidate: str, extra: str = "") -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        config = work / f"gateway-{self.port}.toml"
        config.write_text(
            f'[gateway]\nport = {self.port}\nstate_db = "state-{self.port}.sqlite"\n'
            f'[base]\nserved_model_name = "worker-base"\nmodel = "SmolLM2-135M-Instruct"\n'
            f'[adapters]\nroot = "{adapter_root}"\n[[upstreams]]\nname = "engine-0"\nurl = "{upstream}"\n'
            f'[admin]\ntoken = "{TOKEN}"\n[metrics]\nnvml = false\n{extra}')
        self.service = ServiceProcess("gateway", [sys.executable, "-m", "serve", "gateway", "--config", str(config),
                                                  "--log-level", "warning"], dict(os.environ), self.url, 120)
        self.service.__enter__()
        try:
            http("POST", f"{self.url}/admin/adapters", {"name": candidate, "path": "candidate"})
            http("POST", f"{self.url}/admin/adapters/{candidate}/load")
        except BaseException:
            self.service.stop()
            raise
        self.candidate = candidate

    def shadow(self, rate: float) -> None:
        http("POST", f"{self.url}/admin/routes/worker/shadow", {"candidate": self.candidate, "sample_rate": rate})

    def drain(self) -> dict:
        """Wait for queued shadows to finish, so the next measurement starts from an idle engine."""
        while True:
            state = http("GET", f"{self.url}/admin/state")["shadow"]
            if state["queued"] == 0 and state["running"] == 0:
                return state
            time.sleep(0.2)

    def counter(self, name: str) -> float:
        with urllib.request.urlopen(f"{self.url}/metrics") as response:
            text = response.read().decode()
        return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines() if line.startswith(name + "{"))

    def settled(self) -> float:
        """Stored captures, once the capture worker has finished what is queued (no change for 1 s)."""
        last = -1.0
        while (now := self.counter("worker_capture_descriptors_total")) != last:
            last = now
            time.sleep(1)
        return now

    def stop(self) -> None:
        self.service.stop()


def merge(results: list[Result], latencies: list[list[float]]) -> Result:
    flat = sorted(x for run in latencies for x in run)
    cuts = statistics.quantiles(flat, n=100)
    return Result(sum(r.requests for r in results), sum(r.errors for r in results),
                  sum(r.seconds for r in results), 1000 * statistics.median(flat), 1000 * cuts[98])


def measure(name: str, upstream: str, work: Path, adapter_root: Path, requests: int, concurrency: int,
            max_tokens: int) -> dict[str, object]:
    """Direct and gateway runs alternate (twice each, half the requests per run) after the
    candidate adapter is loaded, so drift and engine state weigh on both alike."""
    def run(url: str, model: str, n: int) -> tuple[Result, list[float]]:
        return asyncio.run(load(url, model, n, concurrency, max_tokens))

    with ExitStack() as stack:
        gateway = Gateway(work, upstream, adapter_root, f"bench-{uuid.uuid4().hex[:8]}")
        stack.callback(gateway.stop)
        capturing = Gateway(work, upstream, adapter_root, f"bench-{uuid.uuid4().hex[:8]}", CAPTURE)
        stack.callback(capturing.stop)
        run(upstream, "worker-base", max(concurrency, requests // 10))  # warm-up
        run(gateway.url, "worker", max(concurrency, requests // 10))
        run(capturing.url, "worker", max(concurrency, requests // 10))
        stored_before, dropped_before = capturing.settled(), capturing.counter("worker_capture_errors_total")
        runs: dict[str, list[tuple[Result, list[float]]]] = {
            "direct": [], "gateway, shadow 0%": [], "gateway, capture full": []}
        for _ in range(2):
            runs["direct"].append(run(upstream, "worker-base", requests // 2))
            runs["gateway, shadow 0%"].append(run(gateway.url, "worker", requests // 2))
            runs["gateway, capture full"].append(run(capturing.url, "worker", requests // 2))
        captured = capturing.settled() - stored_before
        capture_dropped = capturing.counter("worker_capture_errors_total") - dropped_before
        gateway.shadow(1.0)
        runs["gateway, shadow 100%"] = [run(gateway.url, "worker", requests)]
        compared = sum(sum(levels.values()) for levels in gateway.drain()["agreement"].values())
        dropped = gateway.counter("worker_gateway_shadow_dropped_total")
    rows = {label: merge([r for r, _ in done], [lat for _, lat in done]) for label, done in runs.items()}
    direct = rows["direct"]
    print(f"\n### {name}: {requests} requests per measurement, concurrency {concurrency}, max_tokens {max_tokens}")
    header = ("req/s", "p50 ms", "p99 ms", "errors", "ratio", "+p50 ms", "+p99 ms")
    print(f"  {'':<22} " + " ".join(f"{h:>9}" for h in header))
    out: dict[str, object] = {}
    for label, r in rows.items():
        ratio, add50, add99 = r.rps / direct.rps, r.p50_ms - direct.p50_ms, r.p99_ms - direct.p99_ms
        print(f"  {label:<22} {r.rps:>9.2f} {r.p50_ms:>9.2f} {r.p99_ms:>9.2f} {r.errors:>9} {ratio:>8.3f}x "
              f"{add50:>9.2f} {add99:>9.2f}")
        out[label] = {"rps": round(r.rps, 3), "p50_ms": round(r.p50_ms, 2), "p99_ms": round(r.p99_ms, 2),
                      "errors": r.errors, "throughput_ratio": round(ratio, 4), "added_p50_ms": round(add50, 2),
                      "added_p99_ms": round(add99, 2)}
    print(f"  capture full: {captured:.0f} of {2 * (requests // 2)} requests stored, "
          f"{capture_dropped:.0f} dropped (queue full) or failed")
    print(f"  shadow at 100%: {compared} compared, {dropped:.0f} dropped (queue full)")
    out["capture_stored"], out["capture_dropped"] = captured, capture_dropped
    out["shadow_compared"], out["shadow_dropped"] = compared, dropped
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--engine-url", help="use this running engine instead of starting one")
    parser.add_argument("--engine-requests", type=int, default=32)
    parser.add_argument("--engine-concurrency", type=int, default=4)
    parser.add_argument("--max-tokens", type=int, default=8)
    parser.add_argument("--fast-requests", type=int, default=2000)
    parser.add_argument("--fast-concurrency", type=int, default=16)
    args = parser.parse_args()

    from serve.engine.adapters import make_random_adapter
    from serve.engine.modelbuild import default_model_dir

    results: dict[str, object] = {}
    with tempfile.TemporaryDirectory(prefix="bench-gateway-") as tmp:
        work = Path(tmp)
        adapter_root = work / "adapters"
        make_random_adapter(default_model_dir(), adapter_root / "candidate", seed=7)

        fast_port = free_port()
        fast = ServiceProcess("fast upstream", [sys.executable, str(REPO / "scripts" / "bench_instant_upstream.py"),
                                                str(fast_port)], dict(os.environ), f"http://127.0.0.1:{fast_port}", 120)
        with fast:
            results["fast_upstream"] = measure("minimal instant upstream (the gateway's own cost)",
                                               f"http://127.0.0.1:{fast_port}", work, adapter_root,
                                               args.fast_requests, args.fast_concurrency, args.max_tokens)

        with ExitStack() as stack:
            url = args.engine_url
            if url is None:
                config = load_engine_config(REPO / "configs" / "engine" / "cpu-smollm2.toml", port=free_port())
                print("starting the engine (about a minute on CPU)...", flush=True)
                url = stack.enter_context(EngineProcess(config, log_path=work / "vllm.log")).base_url
            name = "real vLLM engine (CPU, SmolLM2-135M)" if args.engine_url is None else f"real vLLM engine at {url}"
            results["engine"] = measure(name, url, work, adapter_root,
                                        args.engine_requests, args.engine_concurrency, args.max_tokens)
    print(json.dumps({"gateway": results}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(run_main(main))
