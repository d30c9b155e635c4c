"""Fair share: one greedy tenant at ten times the others' request rate, through the gateway, on the real engine.

Quiet tenants each send requests at `--rate` per second (Poisson arrivals, seeded, so every phase
sends the same schedule); the greedy tenant sends at ten times that. Three phases, one engine:

* the quiet tenants alone (the reference);
* with the greedy tenant, through a gateway with keys but no fair share;
* with the greedy tenant, through a gateway whose keys file gives the greedy key `max_in_flight`
  and `[fair_share] engine_slots`, so the greedy tenant's excess gets 429 and the quiet tenants'
  requests are let into the engine first.

Printed: the quiet tenants' p50 latency as a ratio of running alone, per phase, and what became of
the greedy tenant's requests (served, 429). Each request has its own prompt (no prefix-cache hits).
The phases run in the order ABC CBA and each figure pools both runs (each run's p50 is printed too),
so a machine that gets busier or quieter during the benchmark weighs on every phase alike.
Usage: `engine-slot python scripts/bench_fairshare.py` (starts its own engine).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import statistics
import sys
import tempfile
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from core.process import ServiceProcess, free_port, run_main  # noqa: E402
from serve.engine.launcher import EngineProcess, load_engine_config  # noqa: E402
from serve.gateway.keys import make_key  # noqa: E402

ENGINE_CONFIG = REPO / "configs" / "engine" / "cpu-smollm2.toml"
GREEDY_FACTOR = 10


@dataclass
class Tenant:
    name: str
    key: str
    digest: str
    rate: float
    latencies: list[float] = field(default_factory=list)
    throttled: int = 0
    failed: int = 0


def keys_file(path: Path, tenants: list[Tenant], greedy_limits: str) -> Path:
    path.write_text("".join(
        f'[[keys]]\nname = "{t.name}"\nworkspace = "ws-{t.name}"\nhash = "{t.digest}"\n'
        + (greedy_limits if t.name == "greedy" else "") for t in tenants))
    path.chmod(0o600)
    return path


def gateway(work: Path, name: str, engine_url: str, keys: Path, extra: str = "") -> ServiceProcess:
    port = free_port()
    config = work / f"gateway-{name}.toml"
    (work / "adapters").mkdir(exist_ok=True)
    config.write_text(
        f'[gateway]\nport = {port}\nstate_db = "state-{name}.sqlite"\n'
        f'[base]\nserved_model_name = "worker-base"\nmodel = "SmolLM2-135M-Instruct"\n'
        f'[adapters]\nroot = "{work / "adapters"}"\n[[upstreams]]\nname = "engine-0"\nurl = "{engine_url}"\n'
        f'[metrics]\nnvml = false\n[auth]\nkeys_file = "{keys}"\n{extra}')
    service = ServiceProcess(f"gateway-{name}", [sys.executable, "-m", "serve", "gateway", "--config", str(config),
                                                 "--log-level", "warning"], dict(os.environ),
                             f"http://127.0.0.1:{port}", 120, work / f"gateway-{name}.log")
    service.__enter__()
    return service


def schedule(rate: float, seconds: float, rng: random.Random) -> list[float]:
    """Poisson arrival times in [0, seconds)."""
    times, now = [], 0.0
    while (now := now + rng.expovariate(rate)) < seconds:
        times.append(now)
    return times


async def phase(base_url: str, tenants: list[Tenant], seconds: float, max_tokens: int, seed: int) -> None:
    """Every tenant's schedule, open loop; waits for the quiet tenants' answers, then abandons the rest."""
    import aiohttp

    async def one(session: aiohttp.ClientSession, tenant: Tenant, at: float, start: float, n: int) -> None:
        await asyncio.sleep(max(0.0, start + at - time.perf_counter()))
        body = {"model": "worker", "max_tokens": max_tokens, "temperature": 0, "messages": [
            {"role": "user", "content": f"[{tenant.name} {seed} {n}] Write one sentence about the sea."}]}
        sent = time.perf_counter()
        async with session.post(f"{base_url}/v1/chat/completions", json=body,
                                headers={"Authorization": f"Bearer {tenant.key}"}) as response:
            await response.read()
            if response.status == 200:
                tenant.latencies.append(time.perf_counter() - sent)
            elif response.status == 429:
                tenant.throttled += 1
            else:
                tenant.failed += 1

    rng = random.Random(seed)
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=900),
                                     connector=aiohttp.TCPConnector(limit=0)) as session:
        start = time.perf_counter()
        tasks = {t.name: [asyncio.ensure_future(one(session, t, at, start, n))
                          for n, at in enumerate(schedule(t.rate, seconds, rng))] for t in tenants}
        await asyncio.gather(*(task for name, ts in tasks.items() if name != "greedy" for task in ts))
        greedy = tasks.get("greedy", [])
        for task in greedy:
            task.cancel()  # the backlog left: closing the connections makes the engine abort it
        await asyncio.gather(*greedy, return_exceptions=True)


def engine_idle(engine_url: str) -> None:
    """Wait until the engine runs and queues nothing (the abandoned requests are aborted)."""
    while True:
        with urllib.request.urlopen(f"{engine_url}/metrics", timeout=10) as response:
            text = response.read().decode()
        busy = sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
                   if line.startswith(("vllm:num_requests_running", "vllm:num_requests_waiting")))
        if busy == 0:
            return
        time.sleep(0.5)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=30.0, help="length of each phase's schedule")
    parser.add_argument("--rate", type=float, default=0.5, help="requests/s of each quiet tenant")
    parser.add_argument("--quiet", type=int, default=2, help="quiet tenants")
    parser.add_argument("--max-tokens", type=int, default=32)
    parser.add_argument("--greedy-in-flight", type=int, default=2, help="the greedy key's max_in_flight")
    parser.add_argument("--engine-slots", type=int, default=16,
                        help="[fair_share] engine_slots (default: the engine's max_num_seqs)")
    args = parser.parse_args()
    made = [make_key() for _ in range(args.quiet + 1)]
    quiet = [Tenant(f"quiet-{i}", *made[i], args.rate) for i in range(args.quiet)]
    greedy = Tenant("greedy", *made[-1], args.rate * GREEDY_FACTOR)
    results: dict[str, list[list[Tenant]]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        plain_keys = keys_file(work / "keys-plain.toml", [*quiet, greedy], "")
        share_keys = keys_file(work / "keys-share.toml", [*quiet, greedy],
                               f"max_in_flight = {args.greedy_in_flight}\n")
        config = load_engine_config(ENGINE_CONFIG, port=free_port())
        with EngineProcess(config, log_path=work / "vllm.log") as engine:
            plain = gateway(work, "plain", engine.base_url, plain_keys)
            share = gateway(work, "share", engine.base_url, share_keys,
                            f"[fair_share]\nengine_slots = {args.engine_slots}\n")
            try:
                warm = [Tenant("warm", quiet[0].key, quiet[0].digest, 2.0)]
                asyncio.run(phase(plain.base_url, warm, 3, args.max_tokens, seed=99))
                phases = [("quiet tenants alone", plain.base_url, False),
                          ("with the greedy tenant, no fair share", plain.base_url, True),
                          ("with the greedy tenant, fair share", share.base_url, True)]
                for label, url, with_greedy in phases + phases[::-1]:  # ABC CBA: drift weighs on each alike
                    tenants = [Tenant(t.name, t.key, t.digest, t.rate) for t in quiet]
                    if with_greedy:
                        tenants.append(Tenant(greedy.name, greedy.key, greedy.digest, greedy.rate))
                    print(f"  running: {label} ({args.seconds:g} s)", flush=True)
                    asyncio.run(phase(url, tenants, args.seconds, args.max_tokens, seed=1))
                    engine_idle(engine.base_url)
                    results.setdefault(label, []).append(tenants)
            finally:
                plain.stop()
                share.stop()
    print(f"\nquiet tenants: {args.quiet} at {args.rate:g} req/s each; greedy: {greedy.rate:g} req/s; "
          f"max_tokens {args.max_tokens}; {args.seconds:g} s a phase; share: greedy max_in_flight "
          f"{args.greedy_in_flight}, engine_slots {args.engine_slots}")
    alone = None
    for label, runs in results.items():
        latencies = [x for tenants in runs for t in tenants if t.name != "greedy" for x in t.latencies]
        p50 = statistics.median(latencies)
        alone = alone or p50
        each = ", ".join(f"{1000 * statistics.median([x for t in r if t.name != 'greedy' for x in t.latencies]):.0f}"
                         for r in runs)
        line = f"  {label:<40} quiet p50 {1000 * p50:7.0f} ms (runs: {each})  ratio {p50 / alone:5.2f}x"
        line += f"  ({len(latencies)} answers, {sum(t.failed for r in runs for t in r if t.name != 'greedy')} failed"
        greedy_runs = [t for r in runs for t in r if t.name == "greedy"]
        if greedy_runs:
            line += (f"; greedy: {sum(len(t.latencies) for t in greedy_runs)} served, "
                     f"{sum(t.throttled for t in greedy_runs)} got 429, {sum(t.failed for t in greedy_runs)} failed")
        print(line + ")")
    return 0


if __name__ == "__main__":
    sys.exit(run_main(main))
