"""Every benchmark of the project, in one run, printed as ratios measured side by side.

* replay concurrency: decisions/s with the runner's concurrency vs one request at a time;
* replay order: engine prefix-cache hit rate and decisions/s, prefix-grouped vs shuffled;
* engine settings: the shipped CPU config (float32, every core) vs vLLM's CPU defaults for the
  same model (bfloat16, one core reserved for the API server), on the same slice;
* gateway overhead: `scripts/bench_gateway.py` (gateway vs direct engine vs a minimal upstream; capture, shadow).
* trial look: `scripts/bench_trial_look.py` (one look at 10k, 100k, 1M captured decisions; the event loop meanwhile).
* redaction: `scripts/bench_redact.py` (recall and over-redaction on the labelled corpus).

Each replay measurement uses its own copy of the suite slice with a distinct marker at the
start of the system prompt, so no measurement is served from another one's prefix cache.
Usage: `make bench` (or `python scripts/bench.py --decisions 24`).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

from core.process import free_port, run_main, run_to_end
from demo.suite import write_demo
from replay.config import RunConfig
from replay.runner import run
from replay.suite import freeze_suite, load_suite
from serve.engine.launcher import EngineProcess, load_engine_config

REPO = Path(__file__).resolve().parent.parent


def engine_counter(base_url: str, name: str) -> float:
    with urllib.request.urlopen(f"{base_url}/metrics", timeout=10) as resp:
        text = resp.read().decode()
    return sum(float(v) for v in re.findall(rf"^{re.escape(name)}\{{[^}}]*\}} ([0-9.e+]+)$", text, re.M))


def marked_slice(source: Path, out: Path, marker: str, count: int) -> Path:
    """The first `count` held-out decisions, system prompt prefixed by `marker`, frozen."""
    decisions = [d for d in load_suite(source).decisions if d.stratum != "training_sanity"][:count]
    out.mkdir(parents=True)
    (out / "suite.toml").write_text(f'name = "bench-{marker}"\nversion = "1"\ncreated = 2026-08-01T00:00:00Z\n')
    lines = []
    for decision in decisions:
        messages = [dict(m) for m in decision.request.messages]
        messages[0]["content"] = f"[{marker}] {messages[0]['content']}"
        request = decision.request.model_copy(update={"messages": messages})
        lines.append(decision.model_copy(update={"request": request}).model_dump_json() + "\n")
    (out / "decisions.jsonl").write_text("".join(lines))
    freeze_suite(out, synthetic=True)  # the demo suite's invented values
    return out


def measure(engine: EngineProcess, suite: Path, work: Path, concurrency: int, order: str) -> dict[str, float]:
    config = RunConfig.model_validate({
        "endpoint": {"base_url": f"{engine.base_url}/v1"}, "decoding": {"max_tokens": 96},
        "runner": {"concurrency": concurrency, "order": order},
        "arms": [{"name": "base", "model": engine.config.vllm.served_model_name}]})
    hits0 = engine_counter(engine.base_url, "vllm:prefix_cache_hits_total")
    queries0 = engine_counter(engine.base_url, "vllm:prefix_cache_queries_total")
    started = time.monotonic()
    sent, _ = run(load_suite(suite), config, work / f"run-{suite.name}", label=f"{suite.name:>22}")
    seconds = time.monotonic() - started
    hits = engine_counter(engine.base_url, "vllm:prefix_cache_hits_total") - hits0
    queries = engine_counter(engine.base_url, "vllm:prefix_cache_queries_total") - queries0
    return {"decisions_per_s": sent / seconds, "seconds": seconds, "hit_rate": hits / queries if queries else 0.0}


def replay_benchmarks(decisions: int) -> list[tuple[str, str]]:
    rows: list[tuple[str, str]] = []
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        suite, _ = write_demo(work / "demo", seed=0)
        config = load_engine_config(REPO / "configs" / "engine" / "cpu-smollm2.toml", port=free_port())
        with EngineProcess(config, log_path=work / "vllm.log") as engine:
            warm = marked_slice(suite, work / "warmup", "warmup", 2)
            measure(engine, warm, work, 2, "prefix")
            sequential = measure(engine, marked_slice(suite, work / "seq", "sequential", decisions), work, 1, "prefix")
            concurrent = measure(engine, marked_slice(suite, work / "conc", "concurrent", decisions), work, 8, "prefix")
            shuffled = measure(engine, marked_slice(suite, work / "shuf", "shuffled", decisions), work, 8, "shuffled")
    results = {"sequential (c=1, prefix order)": sequential, "concurrent (c=8, prefix order)": concurrent,
               "concurrent (c=8, shuffled order)": shuffled}
    for name, r in results.items():
        rows.append((name, f"{r['decisions_per_s']:.3f} decisions/s, {r['seconds']:.0f} s, "
                           f"prefix-cache hit rate {100 * r['hit_rate']:.1f}%"))
    rows.append(("ratio: concurrency 8 / 1 (decisions/s)",
                 f"{concurrent['decisions_per_s'] / sequential['decisions_per_s']:.2f}x"))
    rows.append(("ratio: prefix-grouped / shuffled (decisions/s)",
                 f"{concurrent['decisions_per_s'] / shuffled['decisions_per_s']:.2f}x"))
    rows.append(("prefix-cache hit rate: grouped vs shuffled",
                 f"{100 * concurrent['hit_rate']:.1f}% vs {100 * shuffled['hit_rate']:.1f}%"))
    return rows


def engine_settings_benchmark(decisions: int) -> list[tuple[str, str]]:
    speeds = {}
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        suite, _ = write_demo(work / "demo", seed=0)
        for label, dtype, reserved in (("vLLM CPU defaults (bfloat16, 1 core reserved)", "bfloat16", "1"),
                                       ("shipped config (float32, every core)", None, None)):
            config = load_engine_config(REPO / "configs" / "engine" / "cpu-smollm2.toml", port=free_port())
            if dtype:
                config.vllm.dtype = dtype
                config.env["VLLM_CPU_NUM_OF_RESERVED_CPU"] = reserved
            with EngineProcess(config, log_path=work / f"vllm-{dtype}.log") as engine:
                name = f"settings-{dtype or 'shipped'}"
                speeds[label] = measure(engine, marked_slice(suite, work / name, name, decisions), work, 8, "prefix")
    rows = [(label, f"{r['decisions_per_s']:.3f} decisions/s, {r['seconds']:.0f} s") for label, r in speeds.items()]
    slow, fast = speeds.values()
    ratio = fast["decisions_per_s"] / slow["decisions_per_s"]
    rows.append(("ratio: shipped / defaults (decisions/s)", f"{ratio:.2f}x"))
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--decisions", type=int, default=24, help="decisions per replay measurement")
    parser.add_argument("--skip-gateway", action="store_true")
    parser.add_argument("--skip-engine-settings", action="store_true")
    parser.add_argument("--skip-trial-look", action="store_true")
    parser.add_argument("--skip-redact", action="store_true")
    args = parser.parse_args()
    print(f"# benchmarks ({time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())})", flush=True)
    rows = replay_benchmarks(args.decisions)
    print(f"\n## replay (real CPU engine, demo suite slice of {args.decisions} decisions, base model)")
    for name, value in rows:
        print(f"  {name:<48} {value}")
    if not args.skip_engine_settings:
        settings = engine_settings_benchmark(args.decisions)
        print("\n## engine settings (cold prefix cache each, concurrency 8)")
        for name, value in settings:
            print(f"  {name:<48} {value}")
        rows += settings
    if not args.skip_gateway and (REPO / "scripts" / "bench_gateway.py").exists():
        print("\n## gateway", flush=True)
        if status := run_to_end([sys.executable, str(REPO / "scripts" / "bench_gateway.py")]):
            raise SystemExit(f"bench_gateway.py failed with status {status}")
    if not args.skip_trial_look:
        print("\n## trial look", flush=True)
        if status := run_to_end([sys.executable, str(REPO / "scripts" / "bench_trial_look.py")]):
            raise SystemExit(f"bench_trial_look.py failed with status {status}")
    if not args.skip_redact:
        print("\n## redaction", flush=True)
        if status := run_to_end([sys.executable, str(REPO / "scripts" / "bench_redact.py")]):
            raise SystemExit(f"bench_redact.py failed with status {status}")
    print(json.dumps({"replay": dict(rows)}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(run_main(main))
