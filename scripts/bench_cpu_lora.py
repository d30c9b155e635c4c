"""LoRA on the CPU engine: vLLM's own per-token ops vs the grouped ones (serve/engine/cpulora.py).

Two measurements, side by side in one run:

* the ops alone, at the served model's projection shapes and the demo adapters' rank: one
  shrink + expand for a decode step of 8 tokens and prefill chunks of 64 and 512 tokens;
* the real engine, twice from cold, once with the grouped wrapper (the shipped default) and once
  with vLLM's own (`VLLM_PLUGINS` without this package's plugin): the same demo decisions
  replayed through the demo's `recovery` adapter and through the base model, decisions/s, the
  adapter's rate as a share of the base's, and how many adapter answers the two engines agree on;
  then a third fresh engine with the grouped ops and 3 requests in flight instead of 8 (other
  batches): its adapter answers must be the first engine's (a bfloat16 engine is deterministic).

Usage: `python scripts/bench_cpu_lora.py [--decisions 16]` (also run by `make bench`).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import torch
from bench import ENGINE_CONFIG, marked_slice
from vllm.lora.ops.torch_ops import bgmv_expand, bgmv_shrink

from core.process import free_port, run_main
from demo.trained_adapters import build_demo_adapters, cached_demo_dir
from replay.run.decisions import run
from replay.run.directory import load_results
from replay.run.run_config import RunConfig
from replay.suite import load_suite
from serve.engine.cpulora import expand, shrink, token_groups
from serve.engine.launcher import EngineProcess, load_engine_config
from serve.engine.modelbuild import cache_dir, default_model_dir

ADAPTER = "recovery"
RANK = 16
MAX_LORAS = 4


def _ms(step: Callable[[], None], repeats: int = 20) -> float:
    step()
    started = time.perf_counter()
    for _ in range(repeats):
        step()
    return (time.perf_counter() - started) / repeats * 1e3


def op_ms(tokens: int, d_in: int, d_out: int, dtype: torch.dtype) -> tuple[float, float]:
    """(vLLM's per-token, grouped) milliseconds for one shrink + expand of one adapter's tokens."""
    x = torch.randn(tokens, d_in).to(dtype)
    a = torch.randn(MAX_LORAS, 1, RANK, d_in).to(dtype)
    b = torch.randn(MAX_LORAS, 1, d_out, RANK).to(dtype)
    mid = torch.zeros(tokens, RANK)
    y = torch.zeros(tokens, d_out).to(dtype)
    indices = torch.zeros(tokens, dtype=torch.long)
    groups = token_groups(indices)

    def per_token() -> None:
        bgmv_shrink(x, a, mid, indices, 1.0)
        bgmv_expand(mid, b, y, indices, True)

    def grouped() -> None:
        shrink(x, a, mid, groups, 1.0)
        expand(mid, b, y, groups, 0, None, True)

    return _ms(per_token), _ms(grouped)


def op_rows(dtype: torch.dtype) -> list[tuple[str, str]]:
    """vLLM's per-token shrink + expand vs the grouped one, one adapter, at the model's shapes."""
    model = json.loads((default_model_dir(cache_dir()) / "config.json").read_text())
    hidden, inner = model["hidden_size"], model["intermediate_size"]
    rows = []
    for tokens in (8, 64, 512):
        for name, (d_in, d_out) in (("up/gate", (hidden, inner)), ("down", (inner, hidden))):
            old, new = op_ms(tokens, d_in, d_out, dtype)
            rows.append((f"{tokens:>3} tokens, {name} ({d_in}->{d_out})",
                         f"vLLM {old:7.3f} ms, grouped {new:6.3f} ms: {old / new:5.1f}x"))
    return rows


def load_adapter(engine: EngineProcess, name: str, path: Path) -> None:
    body = json.dumps({"lora_name": name, "lora_path": str(path)}).encode()
    request = urllib.request.Request(f"{engine.base_url}/v1/load_lora_adapter", data=body, method="POST",
                                     headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=300) as resp:
        resp.read()


def replay(engine: EngineProcess, suite: Path, out: Path, model: str,
           concurrency: int = 8) -> tuple[float, dict[str, str]]:
    """Decisions/s of one arm, and each decision's parsed answer."""
    config = RunConfig.model_validate({
        "endpoint": {"base_url": f"{engine.base_url}/v1"}, "decoding": {"max_tokens": 128},
        "runner": {"concurrency": concurrency, "order": "prefix"}, "arms": [{"name": model, "model": model}]})
    started = time.monotonic()
    sent, _ = run(load_suite(suite), config, out, label=f"{out.name:>24}")
    rate = sent / (time.monotonic() - started)
    return rate, {r.decision_id: r.parsed.model_dump_json() for r in load_results(out)}


@contextmanager
def engine_with_adapter(plugins: str | None, adapter: Path, log: Path) -> Iterator[EngineProcess]:
    """A fresh engine with the adapter loaded; `plugins`: VLLM_PLUGINS ("" = vLLM's own LoRA ops)."""
    config = load_engine_config(ENGINE_CONFIG, port=free_port())
    if plugins is not None:
        config.env["VLLM_PLUGINS"] = plugins
    with EngineProcess(config, log_path=log) as engine:
        load_adapter(engine, ADAPTER, adapter)
        yield engine


def engine_rows(decisions: int) -> list[tuple[str, str]]:
    demo = cached_demo_dir(cache_dir())
    adapter = build_demo_adapters(demo, cache_dir())[ADAPTER]
    rates: dict[str, dict[str, float]] = {}
    answers: dict[str, dict[str, str]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        suites = {arm: marked_slice(demo / "suite", work / f"suite-{arm}", f"lora-{arm}", decisions)
                  for arm in ("adapter", "base")}
        for ops, plugins in (("grouped", None), ("vLLM", "")):
            with engine_with_adapter(plugins, adapter, work / f"vllm-{ops}.log") as engine:
                rates[ops] = {}
                rates[ops]["adapter"], answers[ops] = replay(engine, suites["adapter"], work / f"{ops}-adapter",
                                                             ADAPTER)
                rates[ops]["base"], _ = replay(engine, suites["base"], work / f"{ops}-base",
                                               engine.config.vllm.served_model_name)
        # Another fresh engine, other batches (3 in flight): bfloat16 grouped ops give each row the same bits.
        with engine_with_adapter(None, adapter, work / "vllm-grouped-c3.log") as engine:
            _, answers["grouped, 3 in flight"] = replay(engine, suites["adapter"], work / "grouped-c3", ADAPTER, 3)
    rows = []
    for ops, rate in rates.items():
        rows.append((f"{ops} ops: adapter / base", f"{rate['adapter']:.3f} / {rate['base']:.3f} decisions/s "
                                                   f"= {rate['adapter'] / rate['base']:.2f}x"))
    rows.append(("ratio adapter decisions/s, grouped / vLLM",
                 f"{rates['grouped']['adapter'] / rates['vLLM']['adapter']:.2f}x"))
    for label, other in (("adapter answers, grouped vs vLLM's ops", "vLLM"),
                         ("adapter answers, grouped: 8 vs 3 in flight", "grouped, 3 in flight")):
        same = sum(answers["grouped"][d] == answers[other].get(d) for d in answers["grouped"])
        rows.append((label, f"{same}/{len(answers['grouped'])} the same"))
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--decisions", type=int, default=16, help="demo decisions per replay")
    args = parser.parse_args()
    dtype = getattr(torch, load_engine_config(ENGINE_CONFIG).vllm.dtype)
    torch.set_num_threads(1)
    print(f"  ops alone, one thread, {dtype}, rank {RANK}:")
    for name, value in op_rows(dtype):
        print(f"    {name:<40} {value}", flush=True)
    print(f"  real engine, {args.decisions} demo decisions per arm, concurrency 8:")
    for name, value in engine_rows(args.decisions):
        print(f"    {name:<40} {value}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(run_main(main))
