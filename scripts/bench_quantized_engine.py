"""The quantised engine eager (as shipped) against compiled, and a candidate before and after quantisation:
start-up, decisions/s and agreement with high precision on the same decisions.

The same held-out demo decisions at 8 in flight, on engines started from cold one after another:

* high precision (configs/engine/cpu-smollm2.toml, LoRA on, which vLLM's CPU platform runs without
  torch.compile): the base model, and the demo's `recovery` adapter loaded at run time;
* the base's w8a8-int8 checkpoint on configs/engine/cpu-smollm2-quantized.toml, eager (as shipped) and compiled
  (vLLM's default without LoRA);
* the candidate as the gate judges it quantised: `recovery` merged into the base, then w8a8-int8, eager.

Agreement with the same model's high-precision answers: identical parsed answers, and the same tools with the
same argument keys.

Usage: `python scripts/bench_quantized_engine.py [--decisions 32]` (also run by `make bench`).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

from bench import ENGINE_CONFIG, REPO, marked_slice
from bench_cpu_lora import ADAPTER, load_adapter, replay

from core.process import free_port, run_main
from demo.trained_adapters import build_demo_adapters, cached_demo_dir
from serve.engine.adapters import merge_adapter
from serve.engine.launcher import EngineConfig, EngineProcess, load_engine_config
from serve.engine.modelbuild import cache_dir, default_model_dir
from serve.engine.quantize import default_out, quantize_model

QUANTIZED_CONFIG = REPO / "configs" / "engine" / "cpu-smollm2-quantized.toml"
SCHEME = "w8a8-int8"


def quantized(checkpoint: Path, eager: bool) -> EngineConfig:
    config = load_engine_config(QUANTIZED_CONFIG, port=free_port()).on_model(checkpoint)
    return config.model_copy(update={"vllm": config.vllm.model_copy(update={"enforce_eager": True if eager else None})})


def tools_and_keys(parsed: str) -> list[tuple[str, list[str]]]:
    return [(call["tool"], call["key_set"]) for call in json.loads(parsed)["calls"]]


def agreement(answers: dict[str, str], reference: dict[str, str]) -> str:
    same = sum(answers[d] == reference[d] for d in reference)
    keys = sum(tools_and_keys(answers[d]) == tools_and_keys(reference[d]) for d in reference)
    return f"identical {same}/{len(reference)}, same tools and argument keys {keys}/{len(reference)}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--decisions", type=int, default=32, help="demo decisions per model")
    args = parser.parse_args()
    demo = cached_demo_dir(cache_dir())
    adapter = build_demo_adapters(demo, cache_dir())[ADAPTER]
    source = default_model_dir()
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        suite = marked_slice(demo / "suite", work / "slice", "quantized", args.decisions)
        base = quantize_model(source, default_out(source, SCHEME), SCHEME).out_dir
        merged = merge_adapter(source, adapter, work / "merged", quiet=True)
        candidate = quantize_model(merged, work / f"{ADAPTER}-{SCHEME}", SCHEME).out_dir
        started = time.monotonic()
        with EngineProcess(load_engine_config(ENGINE_CONFIG, port=free_port()), log_path=work / "hp.log") as engine:
            start_s = time.monotonic() - started
            load_adapter(engine, ADAPTER, adapter)
            served = engine.config.vllm.served_model_name
            high = {"base": replay(engine, suite, work / "hp-base", served),
                    ADAPTER: replay(engine, suite, work / f"hp-{ADAPTER}", ADAPTER)}
        for model, (rate, _) in high.items():
            print(f"  {model + ', high precision':<32} start {start_s:5.0f} s   {rate:.3f} decisions/s", flush=True)
        for label, model, checkpoint, eager in ((f"base, {SCHEME} eager", "base", base, True),
                                                (f"base, {SCHEME} compiled", "base", base, False),
                                                (f"{ADAPTER} merged, {SCHEME} eager", ADAPTER, candidate, True)):
            started = time.monotonic()
            with EngineProcess(quantized(checkpoint, eager), log_path=work / f"{label}.log") as engine:
                start_s = time.monotonic() - started
                rate, answers = replay(engine, suite, work / label.replace(" ", "-").replace(",", ""),
                                       engine.config.vllm.served_model_name)
            print(f"  {label:<32} start {start_s:5.0f} s   {rate:.3f} decisions/s   against {model}, high precision: "
                  f"{agreement(answers, high[model][1])}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(run_main(main))
