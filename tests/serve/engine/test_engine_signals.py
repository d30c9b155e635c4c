"""`worker-serve engine` stopped with SIGTERM (what systemd and `timeout` send) leaves no process of
the engine behind. The launcher's seam (`SERVER_MODULE`) points it at the cheap fake engine, whose
worker ignores SIGTERM like a wedged vLLM worker."""

from __future__ import annotations

from pathlib import Path

from core.process import free_port
from tests.support.fake_engine import MODULE
from tests.support.procs import descendants, driver, sigterm_leaves_nothing, wait_until

ENGINE = """
import sys
import serve.engine.launcher as launcher
launcher.SERVER_MODULE = {module!r}
from serve.cli import main
sys.exit(main(["engine", "--config", "configs/engine/cpu-smollm2.toml", "--port", {port!r}]))
"""


def test_sigterm_stops_the_engine_and_its_workers(tmp_path: Path) -> None:
    log = tmp_path / "engine.log"
    proc = driver(ENGINE.format(module=MODULE, port=str(free_port())), log)
    wait_until(lambda: "engine healthy" in log.read_text(errors="replace"), proc, log)
    sigterm_leaves_nothing(proc, log, at_least=2)


def test_sigterm_before_the_engine_is_healthy_stops_it_too(tmp_path: Path) -> None:
    """Stopped while it waits for /health: the fake is up (its worker forked) but not asked yet."""
    log = tmp_path / "engine.log"
    proc = driver(ENGINE.format(module=MODULE, port=str(free_port())), log)
    wait_until(lambda: len(descendants(proc.pid)) >= 2, proc, log)
    sigterm_leaves_nothing(proc, log, at_least=2)
