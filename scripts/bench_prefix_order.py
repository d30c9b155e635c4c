"""Prefix-ordered vs shuffled replay on the real CPU engine, with a KV cache smaller than the
suite's working set: does the runner's default order (`[runner] order = "prefix"`) pay?

In production every workspace's requests share a long prefix (system prompt, tools, injected
memory) and the cache cannot hold every workspace's at once (001 S23: 262k-token contexts). The
benchmark builds that case at the small model's scale: `--groups` workspaces, each with its own
preamble of `--prefix-tokens` tokens put before the system prompt of the same `--per-group`
demo decisions, and an engine whose KV cache holds `--cache-share` of the working set (all
groups' prefixes), set in bytes with vLLM's own `--kv-cache-memory-bytes`. The same work is
replayed by the real runner once in prefix order and once shuffled, each on a fresh engine, so
neither starts with the other's cache. Printed side by side: the engine's own prefix-cache hit
rate (`vllm:prefix_cache_hits_total / vllm:prefix_cache_queries_total`) and decisions/s, and
their ratios (target ≥ 1.5× hit rate at a cache of ≤ half the working set).

Usage: `python scripts/bench_prefix_order.py [--groups 8 --per-group 4 --prefix-tokens 1400]`
(also run by `make bench`).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

from bench import (  # scripts/ is this script's own directory
    ENGINE_CONFIG,
    frozen_suite,
    held_out,
    measure,
    with_system_prefix,
)
from transformers import AutoTokenizer

from core.process import free_port, run_main
from core.records import ParseOutcome
from demo.demo_data import write_demo
from replay.run.directory import load_results
from serve.engine.launcher import EngineConfig, EngineProcess, load_engine_config

# vLLM refuses a KV cache that cannot hold one request of max_model_len, so the cache is at least this.
MAX_MODEL_LEN = 4096
DTYPE_BYTES = {"float32": 4, "bfloat16": 2, "float16": 2}


def kv_bytes_per_token(model_dir: Path, dtype: str) -> int:
    """Keys and values of every layer for one token (vLLM's cache layout for a dense model)."""
    config = json.loads((model_dir / "config.json").read_text())
    head_dim = config.get("head_dim") or config["hidden_size"] // config["num_attention_heads"]
    return 2 * config["num_hidden_layers"] * config["num_key_value_heads"] * head_dim * DTYPE_BYTES[dtype]


def preamble(group: int, tokens: int, tokenizer: object) -> str:
    """A workspace's own standing text of about `tokens` tokens (distinct from its first line)."""
    lines = [f"Workspace {group:03d} handbook."]
    rule = 0
    while len(tokenizer.encode("\n".join(lines))) < tokens:  # type: ignore[attr-defined]
        rule += 1
        lines.append(f"Rule {group}.{rule}: when a customer of workspace {group} asks about order {rule * 37 + group}, "
                     f"check the ledger entry {rule * 11 + group * 7} before answering, and note it.")
    return "\n".join(lines)


def grouped_suite(source: Path, out: Path, marker: str, groups: int, per_group: int, prefix_tokens: int,
                  tokenizer: object) -> Path:
    """`groups` × the same `per_group` held-out decisions, each group's system prompt preceded by its preamble."""
    decisions = held_out(source)
    chosen = [d for d in decisions if d.workspace == decisions[0].workspace][:per_group]
    grouped = []
    for group in range(groups):
        text = f"[{marker}] " + preamble(group, prefix_tokens, tokenizer)
        grouped += [with_system_prefix(d, f"{text}\n\n", f"g{group:02d}-{d.id}") for d in chosen]
    return frozen_suite(out, marker, grouped)


def replay(config: EngineConfig, suite: Path, work: Path, order: str, concurrency: int) -> dict[str, float]:
    """The suite on a fresh engine (no cache from the other order), 8 tokens per answer: prefill dominates."""
    with EngineProcess(config, log_path=work / f"vllm-{order}.log") as engine:
        measured = measure(engine, suite, work, concurrency, order, max_tokens=8)
    failed = [r for r in load_results(work / f"run-{suite.name}") if r.parsed.outcome == ParseOutcome.TRANSPORT_ERROR]
    if failed:
        raise SystemExit(f"{len(failed)} request(s) failed ({failed[0].parsed.error}): the measurement is void")
    return measured


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--groups", type=int, default=8, help="workspaces, each with its own long prefix")
    parser.add_argument("--per-group", type=int, default=4, help="decisions per workspace")
    parser.add_argument("--prefix-tokens", type=int, default=1400, help="tokens of each workspace's preamble")
    parser.add_argument("--cache-share", type=float, default=0.4,
                        help="KV cache size as a share of the working set (all groups' prefixes)")
    parser.add_argument("--concurrency", type=int, default=2)
    args = parser.parse_args()
    config = load_engine_config(ENGINE_CONFIG, port=free_port())
    model_dir = Path(config.vllm.model)
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    per_token = kv_bytes_per_token(model_dir, config.vllm.dtype)
    working_set = args.groups * args.prefix_tokens
    cache_tokens = max(int(working_set * args.cache_share), MAX_MODEL_LEN)
    env = {k: v for k, v in config.env.items() if k != "VLLM_CPU_KVCACHE_SPACE"}  # it would override the bytes
    config = config.model_copy(update={"env": env, "vllm": config.vllm.model_copy(update={
        "max_model_len": MAX_MODEL_LEN, "kv_cache_memory_bytes": cache_tokens * per_token})})
    print(f"# prefix order vs shuffled ({time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}): "
          f"{args.groups} workspaces × {args.per_group} decisions, prefixes of {args.prefix_tokens} tokens "
          f"(working set ≥ {working_set} tokens: the preambles alone), KV cache {cache_tokens} tokens "
          f"({cache_tokens / working_set:.0%} of the working set), concurrency {args.concurrency}", flush=True)
    results = {}
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        source, _ = write_demo(work / "demo", seed=0)
        for order in ("prefix", "shuffled"):
            suite = grouped_suite(source, work / f"suite-{order}", order, args.groups, args.per_group,
                                  args.prefix_tokens, tokenizer)
            results[order] = replay(config, suite, work, order, args.concurrency)
    ordered, shuffled = results["prefix"], results["shuffled"]
    print(f"{'order':<10} {'hit rate':>9} {'decisions/s':>12} {'time':>7}")
    for order, r in results.items():
        print(f"{order:<10} {100 * r['hit_rate']:>8.1f}% {r['decisions_per_s']:>12.3f} {r['seconds']:>6.0f}s")
    print(f"ratio prefix/shuffled: hit rate {ordered['hit_rate'] / max(shuffled['hit_rate'], 1e-9):.2f}x, "
          f"decisions/s {ordered['decisions_per_s'] / shuffled['decisions_per_s']:.2f}x")
    print(json.dumps({"prefix_order": results}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(run_main(main))
