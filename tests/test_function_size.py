"""No function is over 80 lines (issue 61): one that long does several things, and a reader cannot hold it.
A function counts from its `def` to its last line, a nested one on its own too (and within the one around it).
The walk covers `core`, `serve`, `replay` and `demo`, less the folders in NOT_YET."""

from __future__ import annotations

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PACKAGES = ("core", "serve", "replay", "demo")
MAX_LINES = 80
# Not yet held to the limit: other branches are changing these folders (issue 61's structure work). Once they are
# merged and under the limit, move each folder out of this set.
NOT_YET = frozenset({"serve", "replay/analysis", "replay/curation", "replay/run", "replay/cli"})


def long_functions(root: Path, packages: tuple[str, ...] = PACKAGES,
                   not_yet: frozenset[str] = frozenset()) -> list[str]:
    """`path:line name (n lines)` for every function over MAX_LINES lines under `root`'s packages."""
    found = []
    for package in packages:
        for path in sorted((root / package).rglob("*.py")):
            relative = path.relative_to(root)
            if any(relative.is_relative_to(folder) for folder in not_yet):
                continue
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
                if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                    assert node.end_lineno is not None
                    if (lines := node.end_lineno - node.lineno + 1) > MAX_LINES:
                        found.append(f"{relative}:{node.lineno} {node.name} ({lines} lines)")
    return found


def test_no_function_is_over_80_lines() -> None:
    assert long_functions(REPO, not_yet=NOT_YET) == []


def test_every_folder_not_yet_held_to_the_limit_is_there() -> None:
    assert sorted(folder for folder in NOT_YET if not (REPO / folder).is_dir()) == []


def test_the_check_names_a_long_method_passes_one_of_80_lines_and_skips_what_is_not_yet_held(tmp_path: Path) -> None:
    body = "".join(f"    x{i} = {i}\n" for i in range(MAX_LINES - 1))
    (tmp_path / "a" / "later").mkdir(parents=True)
    (tmp_path / "a" / "m.py").write_text(f"def fits():\n{body}\n\nclass C:\n    async def long(self):\n"
                                         + body.replace("    ", "        ") + "        return 1\n")
    (tmp_path / "a" / "later" / "n.py").write_text(f"def long():\n{body}    return 1\n")
    assert long_functions(tmp_path, ("a",), frozenset({"a/later"})) == ["a/m.py:84 long (81 lines)"]
    assert long_functions(tmp_path, ("a",)) == ["a/later/n.py:1 long (81 lines)", "a/m.py:84 long (81 lines)"]
