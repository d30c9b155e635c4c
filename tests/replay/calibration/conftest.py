"""The demo suite and memory, written once per module (no engine: the planted endpoint answers)."""

from __future__ import annotations

from pathlib import Path

import pytest

from demo.suite import write_demo
from replay.suite import Suite, load_suite


@pytest.fixture(scope="package")
def demo_dirs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    return write_demo(tmp_path_factory.mktemp("demo") / "out")


@pytest.fixture(scope="package")
def demo_suite(demo_dirs: tuple[Path, Path]) -> Suite:
    return load_suite(demo_dirs[0])
