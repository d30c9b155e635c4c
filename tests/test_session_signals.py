"""The test session itself stopped with SIGTERM (a CI job's timeout): fixtures tear down as on
Ctrl-C, so a gateway process a test started (tests/support GatewayProcess) does not outlive it."""

from __future__ import annotations

from pathlib import Path

from tests.support.procs import driver, sigterm_leaves_nothing, wait_until

TEST_FILE = """
import time
from pathlib import Path

import pytest

from tests.support.fault_upstream import FaultUpstream
from tests.support.gateway_harness import GatewayProcess, write_config


@pytest.fixture
def gateway(tmp_path):
    with FaultUpstream() as fault:
        gw = GatewayProcess(write_config(tmp_path / "gw", [fault.url], tmp_path / "adapters"),
                            tmp_path / "gateway.log").start()
        yield gw
        gw.kill()


def test_waits(gateway):
    Path({ready!r}).touch()
    time.sleep(3600)
"""


def test_sigterm_to_pytest_tears_down_the_gateway_a_test_started(tmp_path: Path) -> None:
    ready, log = tmp_path / "ready", tmp_path / "pytest.log"
    (tmp_path / "test_waits.py").write_text(TEST_FILE.format(ready=str(ready)))
    code = ("import sys, pytest; sys.exit(pytest.main(['-q', '-p', 'tests.conftest', '-p', 'no:cacheprovider', "
            f"'--rootdir', {str(tmp_path)!r}, {str(tmp_path / 'test_waits.py')!r}]))")
    proc = driver(code, log)
    wait_until(ready.exists, proc, log)
    sigterm_leaves_nothing(proc, log, at_least=1, statuses=(2,))  # pytest's "interrupted"
