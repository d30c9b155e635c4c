"""Class names say which concept they are (#53 items 3, 4): no two classes in `core`, `serve`, `replay`
and `demo` share a name, and every exception class ends in `Error` and derives from
`core.errors.WorkerTierError`, so a CLI prints it as one `error: …` line. A private exception (a
leading underscore: control flow inside one module that never reaches a user) only has to end in
`Error`. Every module is imported, as in tests/core/test_errors.py: none needs a GPU, and
`serve.engine.vllm_plugins` needs only vLLM, which every setup installs (the `cpu` or `gpu` extra)."""

from __future__ import annotations

import importlib
import inspect
from collections import defaultdict

from starlette.exceptions import HTTPException

from core.errors import WorkerTierError
from tests.support.modules import project_modules


def _classes() -> list[type]:
    """Every class the project defines at a module's top level (not the ones a module imports)."""
    found = []
    for name in project_modules():
        module = importlib.import_module(name)
        found += [value for value in vars(module).values() if inspect.isclass(value) and value.__module__ == name]
    return found


CLASSES = _classes()


def test_the_walk_sees_every_package():
    assert {cls.__module__.split(".")[0] for cls in CLASSES} == {"core", "serve", "replay", "demo"}


def test_no_two_classes_share_a_name():
    where: dict[str, list[str]] = defaultdict(list)
    for cls in CLASSES:
        where[cls.__name__].append(cls.__module__)
    assert {name: modules for name, modules in where.items() if len(modules) > 1} == {}


def test_every_exception_ends_in_error_and_derives_from_the_root():
    # An HTTPException (serve.gateway.errors.GatewayError) is an HTTP answer the gateway sends a client,
    # not an error a CLI prints: it keeps Starlette's root.
    exceptions = [cls for cls in CLASSES if issubclass(cls, Exception) and not issubclass(cls, HTTPException)]
    assert len(exceptions) > 40
    wrong = sorted(f"{cls.__module__}.{cls.__name__}" for cls in exceptions
                   if not cls.__name__.endswith("Error")
                   or not (cls.__name__.startswith("_") or issubclass(cls, WorkerTierError)))
    assert wrong == []
