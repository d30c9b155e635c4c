"""The demo's engine phase four ways: the replay, then the sandbox slice (as before), or both at once sharing the
engine's sequences (as `worker-demo run` does now), each on an engine with and without `[launch] preload`
(tcmalloc and Intel's OpenMP in LD_PRELOAD, as vLLM's CPU backend asks).

Each way starts its own engine from cold and replays the demo's 142 requests and 12 sandbox episodes into a
fresh directory (so nothing is served from another way's prefix cache); the table gives the seconds from the
first request to the last answer, each as a ratio of the first way's, and the engine's start.

Usage: `python scripts/bench_demo_phases.py` (also run by `make bench`; about 10 minutes on 2 cores).
"""

from __future__ import annotations

import asyncio
import sys
import tempfile
import time
from pathlib import Path

from bench import ENGINE_CONFIG

from core.process import free_port, run_main
from demo.run import demo_data, replay_beside_sandbox, run_config, sandbox_config, sandbox_pack
from demo.serving import serving
from demo.trained_adapters import build_demo_adapters
from replay.run.decisions import run
from replay.sandbox.runner import run_sandbox
from serve.engine.launcher import EngineConfig, EngineProcess, load_engine_config, preloaded
from serve.engine.modelbuild import cache_dir

WAYS = (("one after the other", False, False), ("one after the other", False, True),
        ("at once, sharing the sequences", True, False), ("at once, sharing the sequences", True, True))


def engine_config(preload: bool) -> EngineConfig:
    config = load_engine_config(ENGINE_CONFIG, port=free_port())
    return config if preload else config.model_copy(update={"launch": config.launch.model_copy(update={"preload": []})})


def phase(out: Path, together: bool, preload: bool) -> tuple[float, float]:
    """(seconds to a healthy engine, seconds from the first request to the last answer)."""
    suite, memory_root, data = demo_data(out, quick=False)
    adapters = build_demo_adapters(data, cache_dir(), verbose=False)
    pack = sandbox_pack(out)
    started = time.monotonic()
    with EngineProcess(engine_config(preload), log_path=out / "engine.log") as engine:
        start_s = time.monotonic() - started
        with serving(out, adapters, engine_url=engine.base_url) as (gateway_url, versions):
            config = run_config(gateway_url, versions, suite, memory_root)
            began = time.monotonic()
            if together:
                asyncio.run(replay_beside_sandbox(suite, config, out / "run", pack, out / "sandbox"))
            else:
                run(suite, config, out / "run", label="[bench] replay")
                run_sandbox(pack, sandbox_config(config), out / "sandbox", endpoint_kind="gateway")
            return start_s, time.monotonic() - began


def main() -> int:
    libraries = " and ".join(Path(name).name for name in preloaded(engine_config(True))) or "nothing (none found)"
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for i, (way, together, preload) in enumerate(WAYS):
            start_s, seconds = phase(Path(tmp) / str(i), together, preload)
            rows.append((way, libraries if preload else "nothing", start_s, seconds))
    first = rows[0][3]
    print(f"\n{'replay and sandbox':<32} {'preloaded':<44} {'engine start':>12} {'phase':>8} {'ratio':>6}")
    for way, loaded, start_s, seconds in rows:
        print(f"{way:<32} {loaded:<44} {start_s:>10.0f} s {seconds:>6.0f} s {first / seconds:>5.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(run_main(main))
