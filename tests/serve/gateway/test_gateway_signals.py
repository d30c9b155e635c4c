"""`worker-serve gateway` stopped with SIGTERM shuts down cleanly (uvicorn's own handler: exit 0),
with no traceback and nothing left behind (in front of the fault injector: no engine)."""

from __future__ import annotations

import signal
from pathlib import Path

from core.process import is_healthy
from tests.support.fault_upstream import FaultUpstream
from tests.support.gateway_harness import write_config
from tests.support.procs import driver, sigterm_leaves_nothing, wait_until

GATEWAY = """
import sys
from serve.cli import main
sys.exit(main(["gateway", "--config", {config!r}, "--log-level", "warning"]))
"""


def test_sigterm_stops_the_gateway(tmp_path: Path) -> None:
    with FaultUpstream() as fault:
        config = write_config(tmp_path / "gw", [fault.url], tmp_path / "adapters")
        port = next(line.split("=")[1].strip() for line in config.read_text().splitlines() if line.startswith("port"))
        log = tmp_path / "gateway.log"
        proc = driver(GATEWAY.format(config=str(config)), log)
        wait_until(lambda: is_healthy(f"http://127.0.0.1:{port}"), proc, log)
        sigterm_leaves_nothing(proc, log, at_least=0, statuses=(0, -signal.SIGTERM))
