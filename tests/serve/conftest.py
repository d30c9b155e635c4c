"""Fixtures of the gateway tests: the named fault injector, an address no upstream answers on,
and an adapter root."""

from dataclasses import dataclass

import pytest

from tests.support.fault_upstream import FaultUpstream
from tests.support.live import free_port


@pytest.fixture
def fault():
    with FaultUpstream() as upstream:
        yield upstream


@dataclass(frozen=True)
class NoUpstream:
    """An upstream address nothing listens on: for gateway-side checks (admin and request
    validation) that must answer before any upstream call, so no stand-in can pass for an engine."""

    url: str


@pytest.fixture
def no_upstream() -> NoUpstream:
    return NoUpstream(f"http://127.0.0.1:{free_port()}")


@pytest.fixture
def root(tmp_path):
    directory = tmp_path / "adapters"
    directory.mkdir()
    return directory
