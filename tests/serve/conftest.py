"""Fixtures of the gateway tests: the named fault injector and an adapter root."""

import pytest

from tests.support.fault_upstream import FaultUpstream


@pytest.fixture
def fault():
    with FaultUpstream() as upstream:
        yield upstream


@pytest.fixture
def root(tmp_path):
    directory = tmp_path / "adapters"
    directory.mkdir()
    return directory
