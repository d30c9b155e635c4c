"""The demo suite, memory and scenario pack, written once per package (no engine: the planted endpoint answers)."""

from __future__ import annotations

from pathlib import Path

import pytest

from demo.demo_data import write_demo
from demo.scenario_pack import write_pack
from replay.sandbox.pack import Pack, load_pack
from replay.suite import Suite, load_suite


@pytest.fixture(scope="package")
def demo_dirs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    return write_demo(tmp_path_factory.mktemp("demo") / "out")


@pytest.fixture(scope="package")
def demo_suite(demo_dirs: tuple[Path, Path]) -> Suite:
    return load_suite(demo_dirs[0])


@pytest.fixture(scope="package")
def demo_pack(tmp_path_factory: pytest.TempPathFactory) -> Pack:
    path = tmp_path_factory.mktemp("pack") / "pack"
    write_pack(path, seed=0)
    return load_pack(path)
