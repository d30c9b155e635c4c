"""This gateway beside the gateways users would pick instead, in one run, on the same planted instant upstream.

Targets, each in front of one instant upstream (scripts/bench_instant_upstream.py), loopback only:

* `direct`: the upstream itself;
* `this gateway`: `worker-serve gateway` with client keys, the fair share, capture (`full`, sample rate 1) and
  the prefix-cache salt on (scripts/bench_gateway_cost.py's `all on`);
* `baseline` (with `--baseline CHECKOUT`): the same config on another checkout's gateway (before/after a change);
* `LiteLLM proxy` (pip `litellm[proxy]`, installed into its own venv, `--litellm-venv`, never the project's);
* `Portkey gateway` (npm `@portkey-ai/gateway`, installed into `--portkey-dir`, run by node).

A peer that cannot be installed or started is skipped, and the run says so. Printed per target: p50/p99 at c=1
and what it adds to direct, requests/s at c=16 and its ratio to direct, and on a streamed chat answer (`--tokens`
chunks) the time to the first event and the cost per chunk beyond direct; for direct and this gateway also a streamed
Messages answer. Rounds alternate over the targets so drift falls on all alike.
Usage: `python scripts/bench_gateway_peers.py [--requests N] [--concurrent-requests N] [--baseline PATH]`.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import os
import secrets
import shutil
import subprocess
import sys
import tempfile
import time
from contextlib import ExitStack
from pathlib import Path

from bench_gateway_cost import FEATURES, gateway_config
from bench_loops import REPO, WORKSPACE, BenchGateway, Target, cut, latency, stream, throughput

from core.process import ServiceProcess, free_port, run_main
from serve.gateway.keys import make_key

PORTKEY_PACKAGE = "@portkey-ai/gateway"


def start_litellm(stack: ExitStack, work: Path, upstream: str, venv: Path) -> Target | None:
    """LiteLLM's proxy, one worker, in front of the upstream as an OpenAI-compatible model (pip-installed into
    `venv` first when it is not there)."""
    binary = venv / "bin" / "litellm"
    if not binary.exists():
        print(f"installing litellm[proxy] into {venv} ...", file=sys.stderr, flush=True)
        made = subprocess.run([sys.executable, "-m", "venv", str(venv)], capture_output=True, check=False)
        pip = subprocess.run([str(venv / "bin" / "pip"), "install", "-q", "litellm[proxy]"], capture_output=True,
                             text=True, check=False) if made.returncode == 0 else made
        if pip.returncode != 0 or not binary.exists():
            print(f"skipped LiteLLM: it could not be installed ({str(pip.stderr)[-300:]!r})", file=sys.stderr)
            return None
    config = work / "litellm.yaml"
    config.write_text("model_list:\n  - model_name: worker-base\n    litellm_params:\n"
                      f"      model: openai/worker-base\n      api_base: {upstream}/v1\n      api_key: none\n"
                      "litellm_settings:\n  telemetry: false\n  drop_params: true\n")
    port = free_port()
    master = "sk-" + secrets.token_hex(16)  # it refuses to start without one
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True", "LITELLM_LOG": "ERROR", "NO_DOCS": "True",
           "LITELLM_MASTER_KEY": master}
    service = ServiceProcess("LiteLLM proxy", [str(binary), "--config", str(config), "--port", str(port),
                                               "--host", "127.0.0.1", "--num_workers", "1"], env,
                             f"http://127.0.0.1:{port}", 180, log_path=work / "litellm.log")
    return _started(stack, service, Target("LiteLLM proxy", service.base_url, "worker-base",
                                                {"Authorization": f"Bearer {master}"}))


def start_portkey(stack: ExitStack, work: Path, upstream: str, directory: Path) -> Target | None:
    """Portkey's gateway (node), told per request to forward to the upstream as an OpenAI provider."""
    script = directory / "node_modules" / "@portkey-ai" / "gateway" / "build" / "start-server.js"
    node = shutil.which("node")
    if node is None:
        print("skipped Portkey: node is not installed", file=sys.stderr)
        return None
    if not script.exists():
        print(f"installing {PORTKEY_PACKAGE} into {directory} ...", file=sys.stderr, flush=True)
        directory.mkdir(parents=True, exist_ok=True)
        npm = subprocess.run(["npm", "install", "--silent", PORTKEY_PACKAGE], cwd=directory, capture_output=True,
                             text=True, check=False) if shutil.which("npm") else None
        if npm is None or npm.returncode != 0 or not script.exists():
            print(f"skipped Portkey: {PORTKEY_PACKAGE} could not be installed", file=sys.stderr)
            return None
    port = free_port()
    service = ServiceProcess("Portkey gateway", [node, str(script), f"--port={port}", "--headless"],
                             {**os.environ, "NODE_ENV": "production"}, f"http://127.0.0.1:{port}", 120,
                             log_path=work / "portkey.log")
    headers = {"x-portkey-provider": "openai", "x-portkey-custom-host": f"{upstream}/v1",
               "Authorization": "Bearer none"}
    return _started(stack, service, Target("Portkey gateway", service.base_url, "worker-base", headers))


def _started(stack: ExitStack, service: ServiceProcess, target: Target) -> Target | None:
    """`service` started and answering a chat completion within its health timeout, else None (and why)."""
    service.start()
    stack.callback(service.stop)
    assert service.proc is not None
    target = dataclasses.replace(target, pid=service.proc.pid)
    deadline = time.monotonic() + service.health_timeout_s
    while True:
        try:
            asyncio.run(latency(target, "chat", 3))
            return target
        except Exception as exc:  # noqa: BLE001 (a peer that does not run is skipped, the rest are measured)
            assert service.proc is not None
            if service.proc.poll() is not None or time.monotonic() > deadline:
                print(f"skipped {target.name}: it did not answer ({exc!s:.300}); see {service.log_path}",
                      file=sys.stderr)
                service.stop()
                return None
            time.sleep(1)


def measure(targets: list[Target], messages: set[str], args: argparse.Namespace) -> dict[str, dict[str, object]]:
    """Every loop on every target, rounds alternating over the targets."""
    runs: dict[str, dict[str, list[float]]] = {t.name: {"c1": [], "ttfb": [], "stream": [], "m_ttfb": [],
                                                        "m_stream": []} for t in targets}
    rps: dict[str, list[float]] = {t.name: [] for t in targets}
    cpu = {t.name: 0.0 for t in targets}
    events = 0
    for target in targets:  # warm-up
        asyncio.run(latency(target, "chat", 30))
    for done in range(args.rounds):
        for target in targets:
            row = runs[target.name]
            before = target.cpu_seconds()
            row["c1"] += asyncio.run(latency(target, "chat", args.requests // args.rounds))
            cpu[target.name] += target.cpu_seconds() - before
            rps[target.name].append(asyncio.run(throughput(target, "chat", args.concurrent_requests // args.rounds,
                                                           args.concurrency)))
            try:
                first, total, events = asyncio.run(stream(target, "chat", args.streams // args.rounds, args.tokens))
            except RuntimeError as exc:  # a peer whose streams fail: its row says so
                print(f"{target.name}: streamed chat failed: {exc!s:.200}", file=sys.stderr)
                first, total = [], []
            row["ttfb"] += first
            row["stream"] += total
            if target.name in messages:
                first, total, _ = asyncio.run(stream(target, "messages", args.streams // args.rounds, args.tokens))
                row["m_ttfb"] += first
                row["m_stream"] += total
        print(f"\rround {done + 1}/{args.rounds}", end="", file=sys.stderr, flush=True)
    print(file=sys.stderr)
    out: dict[str, dict[str, object]] = {}
    for name, row in runs.items():
        out[name] = {"p50": cut(row["c1"], 50), "p99": cut(row["c1"], 99), "rps": sum(rps[name]) / len(rps[name]),
                     "cpu_us": 1e6 * cpu[name] / len(row["c1"]),
                     "ttfb": cut(row["ttfb"], 50) if row["ttfb"] else None,
                     "stream": cut(row["stream"], 50) if row["stream"] else None, "events": events}
        if row["m_ttfb"]:
            out[name] |= {"m_ttfb": cut(row["m_ttfb"], 50), "m_stream": cut(row["m_stream"], 50)}
    return out


def report(rows: dict[str, dict[str, object]], args: argparse.Namespace) -> None:
    direct = rows["direct"]
    d50, d99, drps, dttfb, dstream = (float(direct[k]) for k in ("p50", "p99", "rps", "ttfb", "stream"))  # type: ignore[arg-type]
    print(f"\n### {args.requests} requests at c=1, {args.concurrent_requests} at c={args.concurrency}, "
          f"{args.streams} streams of {args.tokens} chunks; load average {os.getloadavg()[0]:.2f}")
    print("| target | CPU µs/request | p50 ms | p99 ms | added p50 | added p99 | req/s c=16 | vs direct | "
          "first event ms | added first event | per chunk added µs |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for name, row in rows.items():
        p50, p99, rps = (float(row[k]) for k in ("p50", "p99", "rps"))  # type: ignore[arg-type]
        added = "—" if name == "direct" else f"+{p50 - d50:.2f} ms"
        streamed = "failed | — | —"
        if row["ttfb"] is not None:
            ttfb, whole = float(row["ttfb"]), float(row["stream"])  # type: ignore[arg-type]
            per_chunk = 1000 * ((whole - ttfb) - (dstream - dttfb)) / args.tokens
            streamed = f"{ttfb:.2f} | {ttfb - dttfb:+.2f} ms | {'—' if name == 'direct' else f'{per_chunk:+.1f}'}"
        added99 = "—" if name == "direct" else f"+{p99 - d99:.2f} ms"
        print(f"| {name} | {float(row['cpu_us']):.0f} | {p50:.2f} | {p99:.2f} | {added} | {added99} "  # type: ignore[arg-type]
              f"| {rps:,.0f} | {rps / drps:.3f}× | {streamed} |")
    for name, row in rows.items():
        if "m_ttfb" in row:
            print(f"{name}, streamed /v1/messages: first event {float(row['m_ttfb']):.2f} ms, whole stream "  # type: ignore[arg-type]
                  f"{float(row['m_stream']):.2f} ms")  # type: ignore[arg-type]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=1500, help="requests at c=1 per target")
    parser.add_argument("--concurrent-requests", type=int, default=4000, help="requests at c=16 per target")
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--streams", type=int, default=300, help="streamed answers per target")
    parser.add_argument("--tokens", type=int, default=64, help="chunks per streamed answer")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--baseline", type=Path, help="also measure this checkout's gateway, same config")
    parser.add_argument("--litellm-venv", type=Path, default=Path(tempfile.gettempdir()) / "litellm-venv")
    parser.add_argument("--portkey-dir", type=Path, default=Path(tempfile.gettempdir()) / "portkey")
    parser.add_argument("--skip-peers", action="store_true", help="only direct and this gateway (and baseline)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-peers-") as tmp, ExitStack() as stack:
        work = Path(tmp)
        key, digest = make_key()
        (work / "keys.toml").write_text(f'[[keys]]\nname = "bench"\nworkspace = "{WORKSPACE}"\nhash = "{digest}"\n')
        (work / "keys.toml").chmod(0o600)
        port = free_port()
        upstream = f"http://127.0.0.1:{port}"
        headers = {"X-Workspace-Id": WORKSPACE, "X-Session-Id": "bench-session", "Authorization": f"Bearer {key}"}
        upstream_service = stack.enter_context(ServiceProcess("instant upstream", [
            sys.executable, str(REPO / "scripts" / "bench_instant_upstream.py"), str(port)], dict(os.environ),
            upstream, 60))
        assert upstream_service.proc is not None
        targets = [Target("direct", upstream, "worker-base", pid=upstream_service.proc.pid)]
        ours = stack.enter_context(BenchGateway(work, "ours", gateway_config(work, upstream, set(FEATURES), "ours")))
        targets.append(Target("this gateway", ours.url, "worker", headers, ours.pid))
        if args.baseline:
            base = stack.enter_context(BenchGateway(work, "baseline", gateway_config(
                work, upstream, set(FEATURES), "baseline"), repo=args.baseline.resolve()))
            targets.append(Target("baseline", base.url, "worker", headers, base.pid))
        if not args.skip_peers:
            for peer in (start_litellm(stack, work, upstream, args.litellm_venv),
                         start_portkey(stack, work, upstream, args.portkey_dir)):
                if peer is not None:
                    targets.append(peer)
        rows = measure(targets, {"direct", "this gateway", "baseline"}, args)
    report(rows, args)
    print(json.dumps({"gateway_peers": rows}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(run_main(main))
