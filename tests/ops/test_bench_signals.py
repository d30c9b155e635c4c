"""The benchmark scripts stopped with SIGTERM leave nothing running: the fast upstream and the engine
`scripts/bench_gateway.py` starts, the engine `scripts/bench.py` starts. The engine is the cheap fake
(the launcher's `SERVER_MODULE` seam); the measurement is a wait that says it has begun."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.fake_engine import MODULE
from tests.support.procs import ROOT, driver, sigterm_leaves_nothing, wait_until

SCRIPT = """
import runpy, sys, time
from pathlib import Path
import serve.engine.launcher as launcher
import serve.engine.adapters
from core.process import run_main
launcher.SERVER_MODULE = {module!r}
serve.engine.adapters.make_random_adapter = lambda *a, **k: None
calls = []

def measure(*_args, **_kwargs):
    calls.append(1)
    if len(calls) == {hold_at}:
        Path({ready!r}).touch()
        time.sleep(3600)
    return {result}

sys.argv = [{script!r}, *{args!r}]
main = runpy.run_path({script!r})["main"]
main.__globals__["measure"] = measure
sys.exit(run_main(main))
"""


@pytest.mark.parametrize(("script", "args", "hold_at", "result", "children"), [
    ("bench_gateway.py", [], 1, "{}", 1),  # while measuring through the fast upstream
    ("bench_gateway.py", [], 2, "{}", 2),  # while measuring through the (fake) engine and its worker
    ("bench.py", ["--skip-gateway", "--skip-engine-settings"], 1,
     "{'decisions_per_s': 1.0, 'seconds': 1.0, 'hit_rate': 0.0}", 2),
])
def test_sigterm_stops_what_a_benchmark_started(tmp_path: Path, script: str, args: list[str], hold_at: int,
                                                result: str, children: int) -> None:
    ready, log = tmp_path / "ready", tmp_path / "bench.log"
    code = SCRIPT.format(module=MODULE, hold_at=hold_at, ready=str(ready), result=result,
                         script=str(ROOT / "scripts" / script), args=args)
    proc = driver(code, log, env={"WORKER_TIER_CACHE": str(tmp_path / "cache")})
    wait_until(ready.exists, proc, log, limit_s=300)
    sigterm_leaves_nothing(proc, log, at_least=children)
