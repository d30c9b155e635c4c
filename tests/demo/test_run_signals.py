"""`worker-demo run` and `worker-demo deferred` stopped with SIGTERM (`timeout make demo`, CI) stop
the engine and the gateway they started. Each runs its real CLI path with its real gateway; only the
engine is the cheap fake (the launcher's `SERVER_MODULE` seam), the adapters are none, and the work
done while serving is a wait that says it has begun."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.fake_engine import MODULE
from tests.support.procs import driver, sigterm_leaves_nothing, wait_until

DEMO = """
import sys, time
from pathlib import Path
import serve.engine.launcher as launcher
launcher.SERVER_MODULE = {module!r}
import demo.run, demo.deferred, demo.serving

def serving_then_wait(*_args, **_kwargs):
    Path({ready!r}).touch()
    time.sleep(3600)

demo.run.build_demo_adapters = lambda *a, **k: {{}}
demo.deferred.build_demo_adapters = lambda *a, **k: {{"recovery": Path("unused")}}
demo.serving.register_adapters = lambda *a, **k: {{}}
demo.run.run_config = serving_then_wait
demo.deferred.play = serving_then_wait
from demo.cli import main
sys.exit(main({argv!r}))
"""


@pytest.mark.parametrize("argv", [["run", "--quick"], ["deferred"]])
def test_sigterm_stops_the_engine_and_the_gateway(tmp_path: Path, argv: list[str]) -> None:
    ready, log = tmp_path / "ready", tmp_path / "demo.log"
    code = DEMO.format(module=MODULE, ready=str(ready), argv=[*argv, "--out", str(tmp_path / "out")])
    proc = driver(code, log, env={"WORKER_TIER_CACHE": str(tmp_path / "cache")})
    wait_until(ready.exists, proc, log, limit_s=300)
    sigterm_leaves_nothing(proc, log, at_least=3)  # the fake engine, its worker, the gateway
