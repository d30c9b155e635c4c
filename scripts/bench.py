"""Every benchmark of the project, in one run, printed as ratios measured side by side.

* replay concurrency: decisions/s with the runner's concurrency vs one request at a time;
* replay order: engine prefix-cache hit rate and decisions/s, prefix-grouped vs shuffled;
* engine settings: float32 on every core (the AVX2 setting) vs bfloat16 with one core reserved for
  the API server (vLLM's CPU default, the AVX512-BF16 setting), quiet and beside one busy core;
* prefix order with a small KV cache: `scripts/bench_prefix_order.py` (hit rate and decisions/s,
  prefix-grouped vs shuffled, the cache holding less than half the working set);
* LoRA on the CPU engine: `scripts/bench_cpu_lora.py` (vLLM's per-token ops vs the grouped ones,
  alone and in the engine: an adapter's decisions/s as a share of the base model's);
* the quantised engine: `scripts/bench_quantized_engine.py` (eager as shipped vs compiled: start-up, decisions/s
  and agreement with the high-precision engine);
* the demo's engine phase: `scripts/bench_demo_phases.py` (replay then sandbox vs both at once sharing the
  engine's sequences, each with and without tcmalloc and Intel's OpenMP preloaded);
* gateway overhead: `scripts/bench_gateway.py` (gateway vs direct engine vs a minimal upstream; capture, shadow).
* Messages streams: `scripts/bench_messages_stream.py` (first SSE event and whole stream, gateway vs direct).
* gateway beside its peers: `scripts/bench_gateway_peers.py` (this gateway, LiteLLM's proxy and Portkey's gateway
  on the same instant upstream: added p50/p99 at c=1, throughput at c=16, first event and per-chunk cost of a
  stream; each peer installed on first use outside the project's environment, skipped when it cannot be).
* gateway cost per feature: `scripts/bench_gateway_cost.py` (keys, fair share, capture, salt, metrics: each one's
  share of what the gateway adds, against docs/design.md's budget).
* the capture worker: `scripts/bench_capture_worker.py` (its CPU per captured tool-loop turn, short and long, in one
  process: the figure of the capture thread's share that the machine's other work does not move).
* trial look: `scripts/bench_trial_look.py` (one look at 10k, 100k, 1M captured decisions; the event loop meanwhile).
* redaction: `scripts/bench_redact.py` (recall and over-redaction on the labelled corpus and on the planted set of
  structured tool results).
* Stop-QA checks: `scripts/bench_qa_checks.py` (`count_mismatch` and `unacknowledged_tool_error`: recall and
  false findings on the labelled phrasings).
* near-duplicates: `scripts/bench_near_duplicates.py` (curation's 8-gram rule: recall on planted near-copies of
  suite decisions, false flags on the other decisions).
* contamination: `scripts/bench_contamination.py` (the gate's check of a candidate's training rows against the
  suite: recall on planted rows of known overlap, false flags on other tasks' decisions).
* noise floor: `scripts/bench_noise.py` (an A/A pair's discordance at 1, 4, 8, 16 in flight, and with
  vLLM's batch-invariant mode asked for).
* fair share: `scripts/bench_fairshare.py` (quiet tenants' p50 latency beside a greedy one at 10x their rate,
  as a ratio of running alone, with and without the fair share).
* corpus audit: `scripts/bench_corpus.py` (`worker-replay corpus audit` on 485,070 generated records as a ratio
  of a plain `json.loads` loop over the same lines; peak memory of each).
* memory stats: `scripts/bench_memory_stats.py` (`worker-replay memory stats` on 1,000 workspaces as a ratio of
  reading every file of the same fleet once).

Each replay measurement uses its own copy of the suite slice with a distinct marker at the
start of the system prompt, so no measurement is served from another one's prefix cache.
Usage: `make bench` (or `python scripts/bench.py --decisions 24`).
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from core.process import free_port, run_main, run_to_end
from core.records import Decision
from demo.demo_data import write_demo
from replay.run.decisions import run
from replay.run.run_config import RunConfig
from replay.suite import freeze_suite, load_suite
from serve.engine.launcher import KERNEL_FLAGS, EngineProcess, host_cpu_flags, load_engine_config

REPO = Path(__file__).resolve().parent.parent
ENGINE_CONFIG = REPO / "configs" / "engine" / "cpu-smollm2.toml"


def engine_counter(base_url: str, name: str) -> float:
    with urllib.request.urlopen(f"{base_url}/metrics", timeout=10) as resp:
        text = resp.read().decode()
    return sum(float(v) for v in re.findall(rf"^{re.escape(name)}\{{[^}}]*\}} ([0-9.e+]+)$", text, re.M))


def held_out(source: Path) -> list[Decision]:
    """The suite's held-out decisions (every stratum but the training-sanity one)."""
    return [d for d in load_suite(source).decisions if d.stratum != "training_sanity"]


def with_system_prefix(decision: Decision, prefix: str, new_id: str | None = None) -> Decision:
    """The decision with `prefix` before its system prompt (and `new_id`, where given)."""
    messages = [dict(m) for m in decision.request.messages]
    messages[0]["content"] = f"{prefix}{messages[0]['content']}"
    request = decision.request.model_copy(update={"messages": messages})
    return decision.model_copy(update={"request": request, **({"id": new_id} if new_id else {})})


def frozen_suite(out: Path, marker: str, decisions: list[Decision]) -> Path:
    """`decisions` written and frozen as the suite `bench-<marker>` in `out`."""
    out.mkdir(parents=True)
    (out / "suite.toml").write_text(f'name = "bench-{marker}"\nversion = "1"\ncreated = 2026-08-01T00:00:00Z\n')
    (out / "decisions.jsonl").write_text("".join(d.model_dump_json() + "\n" for d in decisions))
    freeze_suite(out, synthetic=True)  # the demo suite's invented values
    return out


def marked_slice(source: Path, out: Path, marker: str, count: int) -> Path:
    """The first `count` held-out decisions, system prompt prefixed by `marker`, frozen."""
    return frozen_suite(out, marker, [with_system_prefix(d, f"[{marker}] ") for d in held_out(source)[:count]])


def measure(engine: EngineProcess, suite: Path, work: Path, concurrency: int, order: str,
            max_tokens: int = 96) -> dict[str, float]:
    """One replay of `suite` through the real runner: decisions/s and the engine's own prefix-cache hit rate."""
    config = RunConfig.model_validate({
        "endpoint": {"base_url": f"{engine.base_url}/v1"}, "decoding": {"max_tokens": max_tokens},
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
        config = load_engine_config(ENGINE_CONFIG, port=free_port())
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


@contextmanager
def busy_core() -> Iterator[None]:
    """One process spinning on a core for the duration: the load a gateway, a replay client or a test
    run puts beside the engine on a small machine."""
    spinner = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        yield
    finally:
        spinner.kill()
        spinner.wait()


def engine_settings_benchmark(decisions: int) -> list[tuple[str, str]]:
    """float32 on every core (the AVX2 setting) vs bfloat16 with one core left to the front end (vLLM's
    CPU default, the AVX512-BF16 setting), each on a quiet machine and beside one busy core."""
    flags = host_cpu_flags()
    shipped = load_engine_config(ENGINE_CONFIG, port=free_port())
    speeds: dict[str, dict[str, float]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        suite, _ = write_demo(work / "demo", seed=0)
        for label, dtype, reserved in (("float32, every core", "float32", "0"),
                                       ("bfloat16, one core reserved", "bfloat16", "1")):
            config = load_engine_config(ENGINE_CONFIG, port=free_port(), cpu_flags=frozenset())
            config.vllm.dtype = dtype
            config.env["VLLM_CPU_NUM_OF_RESERVED_CPU"] = reserved
            if (dtype, reserved) == (shipped.vllm.dtype, shipped.env.get("VLLM_CPU_NUM_OF_RESERVED_CPU")):
                label += " (shipped for this CPU)"
            with EngineProcess(config, log_path=work / f"vllm-{dtype}.log") as engine:
                name = f"settings-{dtype}"
                speeds[f"{label}, quiet"] = measure(engine, marked_slice(suite, work / name, name, decisions),
                                                    work, 8, "prefix")
                busy = marked_slice(suite, work / f"{name}-busy", f"{name}-busy", decisions)
                with busy_core():
                    speeds[f"{label}, one busy core"] = measure(engine, busy, work, 8, "prefix")
    kernel = [f for f in KERNEL_FLAGS if f in flags]
    rows = [("CPU kernel flags", ", ".join(kernel) or "none of " + ", ".join(KERNEL_FLAGS))]
    rows += [(label, f"{r['decisions_per_s']:.3f} decisions/s, {r['seconds']:.0f} s") for label, r in speeds.items()]
    fp32, bf16 = ([r for label, r in speeds.items() if label.startswith(kind)] for kind in ("float32", "bfloat16"))
    for (quiet_or_busy, a, b) in (("quiet", fp32[0], bf16[0]), ("one busy core", fp32[1], bf16[1])):
        rows.append((f"ratio bfloat16/float32, {quiet_or_busy}", f"{b['decisions_per_s'] / a['decisions_per_s']:.2f}x"))
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--decisions", type=int, default=24, help="decisions per replay measurement")
    parser.add_argument("--skip-replay", action="store_true")
    parser.add_argument("--skip-gateway", action="store_true")
    parser.add_argument("--skip-messages-stream", action="store_true")
    parser.add_argument("--skip-gateway-peers", action="store_true")
    parser.add_argument("--skip-gateway-cost", action="store_true")
    parser.add_argument("--skip-engine-settings", action="store_true")
    parser.add_argument("--skip-trial-look", action="store_true")
    parser.add_argument("--skip-prefix-order", action="store_true")
    parser.add_argument("--skip-cpu-lora", action="store_true")
    parser.add_argument("--skip-quantized-engine", action="store_true")
    parser.add_argument("--skip-demo-phases", action="store_true")
    parser.add_argument("--skip-redact", action="store_true")
    parser.add_argument("--skip-near-duplicates", action="store_true")
    parser.add_argument("--skip-contamination", action="store_true")
    parser.add_argument("--skip-noise", action="store_true")
    parser.add_argument("--skip-fairshare", action="store_true")
    parser.add_argument("--skip-corpus", action="store_true")
    parser.add_argument("--skip-memory-stats", action="store_true")
    parser.add_argument("--skip-capture-worker", action="store_true")
    parser.add_argument("--skip-qa-checks", action="store_true")
    args = parser.parse_args()
    print(f"# benchmarks ({time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())})", flush=True)
    rows = [] if args.skip_replay else replay_benchmarks(args.decisions)
    if rows:
        print(f"\n## replay (real CPU engine, demo suite slice of {args.decisions} decisions, base model)")
    for name, value in rows:
        print(f"  {name:<48} {value}")
    if not args.skip_engine_settings:
        settings = engine_settings_benchmark(args.decisions)
        print("\n## engine settings (cold prefix cache each, concurrency 8)")
        for name, value in settings:
            print(f"  {name:<48} {value}")
        rows += settings
    for skip, heading, script in ((args.skip_gateway, "gateway", "bench_gateway.py"),
                                  (args.skip_messages_stream, "Messages API streams", "bench_messages_stream.py"),
                                  (args.skip_gateway_peers, "gateway beside LiteLLM and Portkey",
                                   "bench_gateway_peers.py"),
                                  (args.skip_gateway_cost, "gateway cost per feature", "bench_gateway_cost.py"),
                                  (args.skip_capture_worker, "the capture worker", "bench_capture_worker.py"),
                                  (args.skip_prefix_order, "prefix order, small KV cache", "bench_prefix_order.py"),
                                  (args.skip_cpu_lora, "LoRA on the CPU engine", "bench_cpu_lora.py"),
                                  (args.skip_quantized_engine, "the quantised engine", "bench_quantized_engine.py"),
                                  (args.skip_demo_phases, "the demo's engine phase", "bench_demo_phases.py"),
                                  (args.skip_trial_look, "trial look", "bench_trial_look.py"),
                                  (args.skip_redact, "redaction", "bench_redact.py"),
                                  (args.skip_qa_checks, "Stop-QA checks on labelled phrasings",
                                   "bench_qa_checks.py"),
                                  (args.skip_near_duplicates, "near-duplicates on planted copies",
                                   "bench_near_duplicates.py"),
                                  (args.skip_contamination, "contamination on planted rows of known overlap",
                                   "bench_contamination.py"),
                                  (args.skip_noise, "noise floor against concurrency", "bench_noise.py"),
                                  (args.skip_fairshare, "fair share", "bench_fairshare.py"),
                                  (args.skip_corpus, "corpus audit at S1's size", "bench_corpus.py"),
                                  (args.skip_memory_stats, "memory stats on 1,000 workspaces",
                                   "bench_memory_stats.py")):
        if not skip:
            print(f"\n## {heading}", flush=True)
            if status := run_to_end([sys.executable, str(REPO / "scripts" / script)]):
                raise SystemExit(f"{script} failed with status {status}")
    print(json.dumps({"replay": dict(rows)}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(run_main(main))
