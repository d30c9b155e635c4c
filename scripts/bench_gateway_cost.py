"""What each gateway feature adds to a request, measured side by side in one run on the planted instant upstream.

Seven gateways (`worker-serve gateway`, each its own process) in front of one instant upstream
(scripts/bench_instant_upstream.py): `bare` (every feature below off), `all on`, and `all on` with one feature
off at a time — client keys (`[auth] keys_file`), the fair share (limits that are computed and never refuse, and
engine slots), capture (`full` at sample rate 1: every request is described and stored), the prefix-cache salt
(`prefix_cache_scope = "workspace"`) and the per-request metrics. Rounds alternate over every target, direct
included, so drift falls on all alike. A feature's price is `all on` minus `all on without it` (its share of
what the gateway adds), printed per API (chat completions, Messages) as added p50/p99 at c=1; the budget each
may spend is in docs/design.md ("The gateway's per-request cost budget").
Usage: `python scripts/bench_gateway_cost.py [--requests N] [--rounds N]`.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from contextlib import ExitStack
from pathlib import Path

from bench_loops import REPO, WORKSPACE, BenchGateway, Target, cut, latency, stream, throughput

from core.process import ServiceProcess, free_port, run_main
from serve.gateway.keys import make_key

FEATURES = ("keys", "fair_share", "capture", "salt", "metrics")
BUDGET_MS = {"keys": 0.05, "fair_share": 0.05, "capture": 0.15, "salt": 0.03, "metrics": 0.05}
"""What each feature may add at p50 (docs/design.md's budget): the table says when a feature is over."""
FAIR_SHARE = ('[fair_share]\nengine_slots = 64\nmax_in_flight = 64\nrequests_per_s = 1000000\n'
              'request_burst = 1000000\ntokens_per_min = 1000000000\n')


def gateway_config(work: Path, upstream: str, on: set[str], name: str) -> str:
    """The config text of a gateway with the features in `on` (metrics are the launcher's switch)."""
    text = (f'prefix_cache_scope = "{"workspace" if "salt" in on else "shared"}"\n'
            f'[base]\nserved_model_name = "worker-base"\nmodel = "SmolLM2-135M-Instruct"\n'
            f'[adapters]\nroot = "{work}"\n[[upstreams]]\nname = "engine-0"\nurl = "{upstream}"\n'
            f'[metrics]\nnvml = false\n')
    if "keys" in on:
        text += f'[auth]\nkeys_file = "{work / "keys.toml"}"\n'
    if "fair_share" in on:
        text += FAIR_SHARE
    if "capture" in on:
        text += (f'[capture]\nmode = "full"\nworkspaces = ["{WORKSPACE}"]\nsample_rate = 1.0\n'
                 f'db = "{work / f"capture-{name}.sqlite"}"\n')
    return text


def variants() -> dict[str, set[str]]:
    """`bare`, `all on`, and `all on` less each feature."""
    every = set(FEATURES)
    return {"bare": set(), "all on": every, **{f"all but {f}": every - {f} for f in FEATURES}}


def measure(targets: list[Target], requests: int, rounds: int) -> dict[str, dict[str, list[float]]]:
    """Latencies per target and API, rounds alternating over the targets (warm-up first, not kept)."""
    times: dict[str, dict[str, list[float]]] = {
        t.name: {"chat": [], "messages": [], "chat cpu": [], "messages cpu": []} for t in targets}
    for target in targets:
        for api in ("chat", "messages"):
            asyncio.run(latency(target, api, 50))
    for done in range(rounds):
        for target in targets:
            for api in ("chat", "messages"):
                before = target.cpu_seconds()
                times[target.name][api] += asyncio.run(latency(target, api, requests // rounds))
                times[target.name][f"{api} cpu"].append(target.cpu_seconds() - before)
        print(f"\rround {done + 1}/{rounds}", end="", file=sys.stderr, flush=True)
    print(file=sys.stderr)
    return times


def report(times: dict[str, dict[str, list[float]]]) -> dict[str, object]:
    """The added p50/p99 per target and each feature's share, printed; the same as JSON."""
    out: dict[str, object] = {}
    for api in ("chat", "messages"):
        direct = times["direct"][api]
        added = {name: (cut(t[api], 50) - cut(direct, 50), cut(t[api], 99) - cut(direct, 99))
                 for name, t in times.items() if name != "direct"}
        print(f"\n### {api}: {len(direct)} requests per target at c=1; direct p50 {cut(direct, 50):.3f} ms, "
              f"p99 {cut(direct, 99):.3f} ms")
        cpu = {name: 1e6 * sum(t[f"{api} cpu"]) / len(t[api]) for name, t in times.items()}
        print(f"  {'gateway':<22}{'+p50 ms':>10}{'+p99 ms':>10}{'CPU µs/request':>16}")
        for name, (p50, p99) in added.items():
            print(f"  {name:<22}{p50:>10.3f}{p99:>10.3f}{cpu[name]:>16.0f}")
        all_on = added["all on"]
        shares = {f: (all_on[0] - added[f"all but {f}"][0], all_on[1] - added[f"all but {f}"][1]) for f in FEATURES}
        print(f"  {'feature (all on - all but it)':<32}{'p50 ms':>8}{'p99 ms':>8}{'CPU µs':>8}{'budget p50':>12}")
        for feature, (p50, p99) in shares.items():
            over = "  OVER" if p50 > BUDGET_MS[feature] else ""
            print(f"  {feature:<32}{p50:>8.3f}{p99:>8.3f}{cpu['all on'] - cpu[f'all but {feature}']:>8.0f}"
                  f"{BUDGET_MS[feature]:>12.2f}{over}")
        out[api] = {"added_ms": {n: [round(a, 3), round(b, 3)] for n, (a, b) in added.items()},
                    "cpu_us": {n: round(c) for n, c in cpu.items()},
                    "feature_share_ms": {f: [round(a, 3), round(b, 3)] for f, (a, b) in shares.items()}}
    return out


def profile(work: Path, upstream: str, headers: dict[str, str], out: Path, requests: int) -> int:
    """py-spy attached to the `all on` gateway while chat, Messages and streamed Messages requests run (c=1 and
    c=16); its top frames by own time are printed, the folded stacks (a flame graph's input) written to `out`."""
    with BenchGateway(work, "profiled", gateway_config(work, upstream, set(FEATURES), "profiled")) as gateway:
        target = Target("all on", gateway.url, "worker", headers)
        asyncio.run(latency(target, "chat", 50))
        raw = work / "profile.txt"
        spy = subprocess.Popen([str(Path(sys.executable).parent / "py-spy"), "record", "--pid", str(gateway.pid),
                                "--rate", "500", "--gil", "--format", "raw", "--output", str(raw), "--nonblocking"],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(2)
        for api in ("chat", "messages"):
            asyncio.run(latency(target, api, requests))
            asyncio.run(throughput(target, api, requests, 16))
        asyncio.run(stream(target, "messages", requests // 4, 32))
        spy.send_signal(signal.SIGINT)
        spy.wait(60)
    stacks = [line.rsplit(" ", 1) for line in raw.read_text().splitlines() if line.strip()]
    own: Counter[str] = Counter()
    inclusive: Counter[str] = Counter()
    for frames, count in stacks:
        own[frames.split(";")[-1]] += int(count)
        for frame in set(frames.split(";")):
            inclusive[frame] += int(count)
    total = sum(own.values())
    print(f"{total} samples (the GIL's holder only); top frames by own time:")
    for frame, samples in own.most_common(25):
        print(f"  {100 * samples / total:5.1f}%  {frame}")
    print("the gateway's own functions (serve/, core/) by inclusive time:")
    ours = [(f, c) for f, c in inclusive.most_common() if "(serve/" in f or "(core/" in f]
    for frame, samples in ours[:25]:
        print(f"  {100 * samples / total:5.1f}%  {frame}")
    out.write_text(raw.read_text())
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=1000, help="requests per target and API (c=1)")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--profile", type=Path, metavar="STACKS",
                        help="instead: py-spy's folded stacks of the `all on` gateway under the loops, to STACKS")
    args = parser.parse_args()
    print(f"load average before: {os.getloadavg()[0]:.2f}", file=sys.stderr)
    with tempfile.TemporaryDirectory(prefix="bench-cost-") as tmp, ExitStack() as stack:
        work = Path(tmp)
        key, digest = make_key()
        keys = work / "keys.toml"
        keys.write_text(f'[[keys]]\nname = "bench"\nworkspace = "{WORKSPACE}"\nhash = "{digest}"\n')
        keys.chmod(0o600)
        port = free_port()
        upstream = f"http://127.0.0.1:{port}"
        upstream_service = stack.enter_context(ServiceProcess("instant upstream", [
            sys.executable, str(REPO / "scripts" / "bench_instant_upstream.py"), str(port)], dict(os.environ),
            upstream, 60))
        headers = {"X-Workspace-Id": WORKSPACE, "X-Session-Id": "bench-session", "Authorization": f"Bearer {key}"}
        assert upstream_service.proc is not None
        targets = [Target("direct", upstream, "worker-base", pid=upstream_service.proc.pid)]
        if args.profile:
            return profile(work, upstream, headers, args.profile, args.requests)
        for name, on in variants().items():
            gateway = stack.enter_context(BenchGateway(work, name.replace(" ", "-"),
                                                       gateway_config(work, upstream, on, name.replace(" ", "-")),
                                                       metrics="metrics" in on))
            targets.append(Target(name, gateway.url, "worker", headers, gateway.pid))
        times = measure(targets, args.requests, args.rounds)
    print(f"load average after: {os.getloadavg()[0]:.2f}", file=sys.stderr)
    print(json.dumps({"gateway_cost": report(times)}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(run_main(main))
