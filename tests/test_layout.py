"""The arrows between the packages go one way (README, Layout): `core` imports none of ours,
`serve` and `replay` import `core` and never each other, `demo` sits on top of all three.
Every import counts, also one inside a function."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
FORBIDDEN = {"core": {"serve", "replay", "demo"}, "serve": {"replay", "demo"}, "replay": {"serve", "demo"}}


def imported_packages(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module.split(".")[0])
    return names


@pytest.mark.parametrize("package", sorted(FORBIDDEN))
def test_no_package_imports_against_the_arrows(package: str) -> None:
    wrong = {str(p.relative_to(REPO)): sorted(imported_packages(p) & FORBIDDEN[package])
             for p in sorted((REPO / package).rglob("*.py"))}
    assert {f: names for f, names in wrong.items() if names} == {}


def test_the_check_sees_an_import_inside_a_function(tmp_path: Path) -> None:
    module = tmp_path / "m.py"
    module.write_text("def f():\n    from replay.runner import run\n    import serve.cli\n")
    assert imported_packages(module) == {"replay", "serve"}
