"""No function is over 80 lines (issue 61): one that long does several things, and a reader cannot hold it.
A function counts from its `def` to its last line, a nested one on its own too (and within the one around it).
The walk covers every module of `core`, `serve`, `replay` and `demo`."""

from __future__ import annotations

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PACKAGES = ("core", "serve", "replay", "demo")
MAX_LINES = 80


def long_functions(root: Path, packages: tuple[str, ...] = PACKAGES) -> list[str]:
    """`path:line name (n lines)` for every function over MAX_LINES lines under `root`'s packages."""
    found = []
    for package in packages:
        for path in sorted((root / package).rglob("*.py")):
            relative = path.relative_to(root)
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
                if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                    assert node.end_lineno is not None
                    if (lines := node.end_lineno - node.lineno + 1) > MAX_LINES:
                        found.append(f"{relative}:{node.lineno} {node.name} ({lines} lines)")
    return found


def test_no_function_is_over_80_lines() -> None:
    assert long_functions(REPO) == []


def test_the_check_names_a_long_method_anywhere_and_passes_one_of_80_lines(tmp_path: Path) -> None:
    body = "".join(f"    x{i} = {i}\n" for i in range(MAX_LINES - 1))
    (tmp_path / "a" / "later").mkdir(parents=True)
    (tmp_path / "a" / "m.py").write_text(f"def fits():\n{body}\n\nclass C:\n    async def long(self):\n"
                                         + body.replace("    ", "        ") + "        return 1\n")
    (tmp_path / "a" / "later" / "n.py").write_text(f"def long():\n{body}    return 1\n")
    assert long_functions(tmp_path, ("a",)) == ["a/later/n.py:1 long (81 lines)", "a/m.py:84 long (81 lines)"]
