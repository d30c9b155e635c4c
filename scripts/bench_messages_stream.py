"""Streaming through the gateway on the Messages API: time to the first SSE event and to the stream's end,
gateway vs the engine directly, measured side by side in one run on the real engine (loopback only).

The same streamed `/v1/messages` request (a short prompt, a fixed number of tokens) is sent in pairs,
one direct and one through the gateway (`worker-serve gateway`, its own process; capture off, no
shadow), the order within each pair alternating so that drift in the engine's speed falls on both.
Printed: the medians of both times per path and their ratios (gateway / direct).
Usage: `python scripts/bench_messages_stream.py [--engine-url URL] [--pairs N] [--max-tokens N]`.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from contextlib import ExitStack
from pathlib import Path

import httpx

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from core.process import ServiceProcess, free_port, run_main  # noqa: E402
from serve.engine.launcher import EngineProcess, load_engine_config  # noqa: E402

ASK = [{"role": "user", "content": "Write a short note to the finance team about invoice INV-7."}]


def stream_once(client: httpx.Client, url: str, model: str, max_tokens: int) -> tuple[float, float]:
    """(seconds to the first SSE event, seconds to the end of the stream) of one streamed message."""
    body = {"model": model, "max_tokens": max_tokens, "messages": ASK, "stream": True, "temperature": 0,
            "ignore_eos": True}
    started = time.perf_counter()
    first = None
    with client.stream("POST", f"{url}/v1/messages", json=body, headers={"anthropic-version": "2023-06-01"}) as resp:
        resp.raise_for_status()
        for chunk in resp.iter_bytes():
            if first is None and b"event:" in chunk:
                first = time.perf_counter() - started
    assert first is not None, "the stream had no event"
    return first, time.perf_counter() - started


def gateway_config(work: Path, engine_url: str) -> Path:
    port = free_port()
    config = work / "gateway.toml"
    config.write_text(
        f'[gateway]\nport = {port}\nstate_db = "state.sqlite"\n'
        f'[base]\nserved_model_name = "worker-base"\nmodel = "SmolLM2-135M-Instruct"\n'
        f'[adapters]\nroot = "{work}"\n[[upstreams]]\nname = "engine-0"\nurl = "{engine_url}"\n'
        f'[metrics]\nnvml = false\n')
    return config


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--engine-url", help="use this running engine instead of starting one")
    parser.add_argument("--pairs", type=int, default=16)
    parser.add_argument("--max-tokens", type=int, default=32)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-messages-") as tmp, ExitStack() as stack:
        work = Path(tmp)
        engine = args.engine_url
        if engine is None:
            config = load_engine_config(REPO / "configs" / "engine" / "cpu-smollm2.toml", port=free_port())
            print("starting the engine (about a minute on CPU)...", flush=True)
            engine = stack.enter_context(EngineProcess(config, log_path=work / "vllm.log")).base_url
        gateway_toml = gateway_config(work, engine)
        port = int(gateway_toml.read_text().split("port = ")[1].split("\n")[0])
        gateway = f"http://127.0.0.1:{port}"
        stack.enter_context(ServiceProcess("gateway", [sys.executable, "-m", "serve", "gateway", "--config",
                                                       str(gateway_toml), "--log-level", "warning"],
                                           dict(os.environ), gateway, 120))
        client = stack.enter_context(httpx.Client(timeout=300))
        paths = {"direct": (engine, "worker-base"), "gateway": (gateway, "worker")}
        for url, model in paths.values():  # warm both paths (and the prefix cache) before timing
            stream_once(client, url, model, args.max_tokens)
        times: dict[str, list[tuple[float, float]]] = {name: [] for name in paths}
        for pair in range(args.pairs):
            order = list(paths) if pair % 2 == 0 else list(reversed(paths))
            for name in order:
                times[name].append(stream_once(client, *paths[name], args.max_tokens))
            print(f"\r{pair + 1}/{args.pairs} pairs", end="", flush=True)
        print()
    medians = {name: {"first_event_ms": round(statistics.median(t[0] for t in runs) * 1000, 1),
                      "whole_stream_ms": round(statistics.median(t[1] for t in runs) * 1000, 1)}
               for name, runs in times.items()}
    ratios = {key: round(medians["gateway"][key] / medians["direct"][key], 3) for key in medians["direct"]}
    print(f"{'':10}{'first event (ms)':>18}{'whole stream (ms)':>20}")
    for name, row in medians.items():
        print(f"{name:10}{row['first_event_ms']:>18}{row['whole_stream_ms']:>20}")
    print(f"{'ratio':10}{ratios['first_event_ms']:>17}x{ratios['whole_stream_ms']:>19}x")
    print(json.dumps({"messages_stream": {"pairs": args.pairs, "max_tokens": args.max_tokens, "median": medians,
                                          "gateway_over_direct": ratios}}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(run_main(main))
