"""One exception root: every error class a user can cause derives from `WorkerTierError`."""

from __future__ import annotations

import importlib
import inspect

import pytest
from starlette.exceptions import HTTPException

from core.errors import WorkerTierError
from replay.errors import ReplayError
from serve.errors import ServeError
from tests.support.modules import project_modules


def _error_classes() -> list[type[BaseException]]:
    found: dict[str, type[BaseException]] = {}
    for name in project_modules():
        module = importlib.import_module(name)
        for attr, value in vars(module).items():
            if (inspect.isclass(value) and issubclass(value, BaseException) and value.__module__ == name
                    and attr.endswith("Error") and not issubclass(value, HTTPException)):
                found[f"{name}.{attr}"] = value
    return list(found.values())


def test_the_walk_finds_the_known_errors():
    names = {cls.__name__ for cls in _error_classes()}
    assert {"ConfigError", "SuiteError", "GateError", "LedgerError", "EvidenceError", "AdapterError"} <= names


@pytest.mark.parametrize("cls", _error_classes(), ids=lambda cls: f"{cls.__module__}.{cls.__name__}")
def test_every_error_derives_from_the_root(cls):
    assert issubclass(cls, WorkerTierError)
    if cls.__module__.startswith("serve."):
        assert issubclass(cls, ServeError)
    if cls.__module__.startswith("replay."):
        assert issubclass(cls, ReplayError)
