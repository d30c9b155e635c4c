"""core/process.py: a stop signal unwinds like Ctrl-C, and a service's whole process group goes with
it — a leader that already exited, a worker that ignores SIGTERM, a start that never got healthy.
The child is the cheap fake engine (tests/support/fake_engine.py), never vLLM."""

from __future__ import annotations

import os
import signal
import sys
import time
from pathlib import Path

import psutil
import pytest

from core.process import ServiceProcess, Terminated, free_port, run_main, run_to_end, unwinding_stop_signals
from tests.support.fake_engine import STUBBORN_WORKER
from tests.support.procs import alive, descendants, driver, sigterm_leaves_nothing, terminate_tree, wait_until

# A leader that starts a worker ignoring SIGTERM, says its pid, and exits: only the group outlives it.
ORPHANING = (f"import subprocess, sys; w = subprocess.Popen([sys.executable, '-c', {STUBBORN_WORKER!r}]); "
             "print(w.pid, flush=True)")


def service(tmp_path: Path, code: str | None = None, health_s: float = 60) -> ServiceProcess:
    port = free_port()
    command = ([sys.executable, "-c", code] if code else
               [sys.executable, "-m", "tests.support.fake_engine", "--port", str(port)])
    return ServiceProcess("fake", command, dict(os.environ), f"http://127.0.0.1:{port}", health_s,
                          tmp_path / "service.log")


def worker_pid(log: Path) -> int:
    """The stubborn worker's pid, as its leader printed it."""
    for _ in range(600):
        if log.exists() and log.read_text().strip():
            return int(log.read_text().split()[0])
        time.sleep(0.1)
    raise AssertionError("the leader never said its worker's pid")


def test_stop_kills_the_group_even_after_its_leader_exited(tmp_path: Path) -> None:
    svc = service(tmp_path, ORPHANING)
    svc.start()
    try:
        worker = psutil.Process(worker_pid(tmp_path / "service.log"))
        assert svc.proc is not None
        svc.proc.wait(30)
        assert alive([worker])
    finally:
        svc.stop()
    worker.wait(10)
    assert not alive([worker])


def test_a_service_that_never_gets_healthy_leaves_nothing(tmp_path: Path) -> None:
    svc = service(tmp_path, ORPHANING + "; import time; time.sleep(3600)", health_s=1)
    with pytest.raises(TimeoutError):
        svc.__enter__()  # stops the group on the way out; a leak here is what the test is for
    worker = psutil.Process(worker_pid(tmp_path / "service.log"))
    worker.wait(10)
    assert not alive([worker])


SUPERVISED = """
import os, sys, time
from pathlib import Path
from core.process import ServiceProcess, free_port, run_main
port = free_port()
svc = ServiceProcess("fake", [sys.executable, "-m", "tests.support.fake_engine", "--port", str(port)],
                     dict(os.environ), f"http://127.0.0.1:{{port}}", 60)
def main():
    with svc:
        Path({ready!r}).touch()
        time.sleep(3600)
    return 0
sys.exit(run_main(main))
"""


def test_sigterm_to_a_supervisor_stops_its_service_and_the_services_workers(tmp_path: Path) -> None:
    ready, log = tmp_path / "ready", tmp_path / "driver.log"
    proc = driver(SUPERVISED.format(ready=str(ready)), log)
    wait_until(ready.exists, proc, log)
    sigterm_leaves_nothing(proc, log, at_least=2)  # the fake engine and its stubborn worker


STUCK = """
import os, sys, time
from pathlib import Path
from core.process import ServiceProcess, run_main
svc = ServiceProcess("stuck", [sys.executable, "-c", {stubborn!r}], dict(os.environ), "http://127.0.0.1:9", 60)
def main():
    svc.start()
    try:
        Path({ready!r}).touch()
        time.sleep(3600)
    finally:
        Path({stopping!r}).touch()
        svc.stop(grace_s=3600)
    return 0
sys.exit(run_main(main))
"""


def test_a_second_stop_signal_cuts_the_grace_short_with_sigkill(tmp_path: Path) -> None:
    """The service ignores SIGTERM; the first signal starts the (hour-long) grace, the second ends it."""
    ready, stopping, log = tmp_path / "ready", tmp_path / "stopping", tmp_path / "driver.log"
    proc = driver(STUCK.format(stubborn=STUBBORN_WORKER, ready=str(ready), stopping=str(stopping)), log)
    try:
        wait_until(ready.exists, proc, log)
        children = descendants(proc.pid)
        proc.send_signal(signal.SIGTERM)
        wait_until(stopping.exists, proc, log)
        proc.send_signal(signal.SIGTERM)
        proc.wait(60)
        psutil.wait_procs(children, timeout=10)
        assert not alive(children) and children
        assert proc.returncode == -signal.SIGTERM
    finally:
        terminate_tree(proc)


RUN_TO_END = """
import sys
from pathlib import Path
from core.process import run_main, run_to_end
sys.exit(run_main(lambda: run_to_end([sys.executable, "-c", {child!r}])))
"""


def test_run_to_end_passes_the_stop_signal_on_and_waits(tmp_path: Path) -> None:
    """A foreground child (bench.py runs bench_gateway.py so) gets the SIGTERM and its time to stop."""
    ready, log = tmp_path / "ready", tmp_path / "driver.log"
    child = (f"import signal, sys, time; from pathlib import Path; Path({str(ready)!r}).touch(); "
             "signal.signal(signal.SIGTERM, lambda *_: sys.exit(0)); time.sleep(3600)")
    proc = driver(RUN_TO_END.format(child=child), log)
    wait_until(ready.exists, proc, log)
    sigterm_leaves_nothing(proc, log, at_least=1)


def test_run_to_end_returns_the_status() -> None:
    assert run_to_end([sys.executable, "-c", "raise SystemExit(3)"]) == 3


def test_inside_a_caller_that_unwinds_run_main_passes_the_stop_on_instead_of_dying() -> None:
    """The test session (tests/conftest.py) runs CLIs in-process: a SIGTERM must reach its teardown."""
    def stopped() -> int:
        raise Terminated(signal.SIGTERM)

    with unwinding_stop_signals(), pytest.raises(Terminated):
        run_main(stopped)
