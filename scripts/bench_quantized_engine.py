"""The quantised engine eager (as shipped) against compiled: start-up, decisions/s and agreement with the
high-precision engine on the same decisions.

Three engines from cold, one after another, each replaying the same held-out demo decisions at 8 in flight:
the high-precision engine (configs/engine/cpu-smollm2.toml: LoRA on, which vLLM's CPU platform runs without
torch.compile), then the embedded model's w8a8-int8 checkpoint on configs/engine/cpu-smollm2-quantized.toml
eager (as shipped) and compiled (vLLM's default without LoRA). Agreement with the high-precision answers:
identical answers, and the same tools with the same argument keys.

Usage: `python scripts/bench_quantized_engine.py [--decisions 32]` (also run by `make bench`).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

from bench import ENGINE_CONFIG, REPO, marked_slice, measure

from core.process import free_port, run_main
from demo.suite import write_demo
from replay.analysis.compare import load_results
from serve.engine.launcher import EngineConfig, EngineProcess, load_engine_config
from serve.engine.modelbuild import default_model_dir
from serve.engine.quantize import default_out, quantize_model

QUANTIZED_CONFIG = REPO / "configs" / "engine" / "cpu-smollm2-quantized.toml"
SCHEME = "w8a8-int8"

Answer = tuple[str | None, list[tuple[str, list[str]]]]


def engines() -> dict[str, EngineConfig]:
    """The three engines, by the label each row carries."""
    source = default_model_dir()
    checkpoint = quantize_model(source, default_out(source, SCHEME), SCHEME).out_dir
    quantized = load_engine_config(QUANTIZED_CONFIG, port=free_port())
    on_checkpoint = quantized.vllm.model_copy(update={"model": str(checkpoint)})
    return {"high precision (LoRA on)": load_engine_config(ENGINE_CONFIG, port=free_port()),
            f"{SCHEME} eager (shipped)": quantized.model_copy(update={"vllm": on_checkpoint}),
            f"{SCHEME} compiled": quantized.model_copy(update={"vllm": on_checkpoint.model_copy(
                update={"enforce_eager": None})})}


def answers(run_dir: Path) -> dict[str, Answer]:
    """Each decision's answer: its text and its calls as (tool, sorted argument keys)."""
    out = {}
    for record in load_results(run_dir):
        message = (record.raw_output or {}).get("message") or {}
        calls = [(c["function"]["name"], sorted(json.loads(c["function"]["arguments"] or "{}")))
                 for c in message.get("tool_calls") or []]
        out[record.decision_id] = (message.get("content"), calls)
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--decisions", type=int, default=32, help="demo decisions per engine")
    args = parser.parse_args()
    got: dict[str, dict[str, Answer]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        suite = marked_slice(write_demo(work / "demo", seed=0)[0], work / "slice", "quantized", args.decisions)
        for label, config in engines().items():
            started = time.monotonic()
            with EngineProcess(config, log_path=work / f"{len(got)}.log") as engine:
                start_s = time.monotonic() - started
                speed = measure(engine, suite, work / str(len(got)), 8, "prefix")
                got[label] = answers(work / str(len(got)) / f"run-{suite.name}")
            print(f"  {label:<28} start {start_s:5.0f} s   {speed['decisions_per_s']:.3f} decisions/s "
                  f"({speed['seconds']:.0f} s)", flush=True)
    reference, *others = got
    for label in others:
        same = [got[label][d] == got[reference][d] for d in got[reference]]
        keys = [got[label][d][1] == got[reference][d][1] for d in got[reference]]
        print(f"  {label:<28} against high precision: identical {sum(same)}/{len(same)}, same tools and "
              f"argument keys {sum(keys)}/{len(keys)}")
    return 0


if __name__ == "__main__":
    sys.exit(run_main(main))
