"""The arrows between the packages go one way (README, Layout): `core` imports none of ours,
`serve` and `replay` import `core` and never each other, `demo` sits on top of all three.
Inside them the arrows go one way too: no two modules import each other, directly or round a
circle, and neither do two subpackages (`serve.gateway`, `replay.memory`, ...) or loose modules
(`serve.app`, `replay.run.decisions`, ...). Every import counts, also one inside a function or under
`TYPE_CHECKING`. No module of `replay.analysis` imports `replay.qa` (a gate reads Stop-QA through
`core/evidence.py`). No module is over 600 lines.

Every package's map is its `__init__.py` docstring (README's Layout points there): one line
``- `name.py`: what it holds`` per module and ``- `name/`: what it holds`` per subpackage. A module
or subpackage no map names fails, and so does a map line naming one that is not there. A module's file name is
used once, but where README's Layout says why."""

from __future__ import annotations

import ast
import re
from collections.abc import Mapping
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
PACKAGES = ("core", "serve", "replay", "demo")
FORBIDDEN = {"core": {"serve", "replay", "demo"}, "serve": {"replay", "demo"}, "replay": {"serve", "demo"}}
MAX_LINES = 600

Graph = Mapping[str, Mapping[str, str]]  # module -> {imported module: where (file:line)}


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
    module.write_text("def f():\n    from replay.run.decisions import run\n    import serve.cli\n")
    assert imported_packages(module) == {"replay", "serve"}


def modules(root: Path, packages: tuple[str, ...] = PACKAGES) -> dict[str, Path]:
    """Every module under `root`'s packages by its dotted name (a package by its own name)."""
    found: dict[str, Path] = {}
    for package in packages:
        for path in sorted((root / package).rglob("*.py")):
            parts = path.relative_to(root).with_suffix("").parts
            found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


def import_graph(root: Path, packages: tuple[str, ...] = PACKAGES) -> dict[str, dict[str, str]]:
    """Which of our modules each module imports (`from a import b` counts `a.b` where that is a module)."""
    known = modules(root, packages)

    def ours(name: str) -> str | None:
        while name and name not in known:
            name = name.rpartition(".")[0]
        return name or None

    graph: dict[str, dict[str, str]] = {}
    for module, path in known.items():
        package = module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]
        edges = graph.setdefault(module, {})
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = ".".join(package[:len(package) - node.level + 1]) if node.level else ""
                source = ".".join(p for p in (base, node.module or "") if p)
                targets = [source, *(f"{source}.{alias.name}" for alias in node.names)]
            else:
                continue
            for target in filter(None, map(ours, targets)):
                if target != module:
                    edges.setdefault(target, f"{path.relative_to(root)}:{node.lineno}")
    return graph


def unit(root: Path, module: str) -> str:
    """A subpackage directly under a top package (`serve.gateway`), else the module itself (`serve.app`)."""
    parts = module.split(".")
    if len(parts) > 2 or len(parts) == 2 and root.joinpath(*parts).is_dir():
        return ".".join(parts[:2])
    return module


def unit_graph(root: Path, graph: Graph) -> dict[str, dict[str, str]]:
    units: dict[str, dict[str, str]] = {}
    for module, edges in graph.items():
        out = units.setdefault(unit(root, module), {})
        for target, where in edges.items():
            if unit(root, target) != unit(root, module):
                out.setdefault(unit(root, target), f"{where} imports {target}")
    return units


def find_cycle(graph: Graph) -> list[str] | None:
    """One circle of imports, as the nodes in order with the first repeated at the end; None without one."""
    state: dict[str, str] = {}  # "open" while on the DFS path, "done" after

    def visit(node: str, path: list[str]) -> list[str] | None:
        state[node] = "open"
        path.append(node)
        for target in sorted(graph.get(node, {})):
            if state.get(target) == "open":
                return [*path[path.index(target):], target]
            if target not in state and (cycle := visit(target, path)):
                return cycle
        path.pop()
        state[node] = "done"
        return None

    for start in sorted(graph):
        if start not in state and (cycle := visit(start, [])):
            return cycle
    return None


def show(graph: Graph, cycle: list[str]) -> str:
    return "\n".join(f"  {a} -> {b}  ({graph[a][b]})" for a, b in zip(cycle, cycle[1:], strict=False))


def test_no_two_modules_import_each_other() -> None:
    graph = import_graph(REPO)
    cycle = find_cycle(graph)
    assert cycle is None, "modules import each other in a circle:\n" + show(graph, cycle)


def test_no_two_subpackages_or_loose_modules_import_each_other() -> None:
    graph = unit_graph(REPO, import_graph(REPO))
    cycle = find_cycle(graph)
    assert cycle is None, "subpackages or loose modules import each other in a circle:\n" + show(graph, cycle)


def test_the_two_runners_share_their_parts_without_importing_each_other() -> None:
    """`worker-replay run` and `sandbox run` share the endpoint client, the run directory, memory
    loading and the status line through their own modules, so a fix there reaches both."""
    graph = import_graph(REPO)
    sandbox = {m for m in graph if m.split(".")[:2] == ["replay", "sandbox"]}
    assert sorted(m for m in sandbox if "replay.run.decisions" in graph[m]) == []
    assert sorted(sandbox & set(graph["replay.run.decisions"])) == []


def test_no_gate_reads_stop_qa_but_through_its_evidence_format() -> None:
    """The gates judge files whose formats are `core/evidence.py`'s, the reviewer agreement report included:
    no module of `replay.analysis` imports `replay.qa`."""
    graph = import_graph(REPO)
    analysis = {m for m in graph if m.split(".")[:2] == ["replay", "analysis"]}
    assert {m: sorted(t for t in graph[m] if t.split(".")[:2] == ["replay", "qa"]) for m in sorted(analysis)
            if any(t.split(".")[:2] == ["replay", "qa"] for t in graph[m])} == {}


def test_no_module_is_over_600_lines() -> None:
    lengths = {str(path.relative_to(REPO)): len(path.read_text(encoding="utf-8").splitlines())
               for path in modules(REPO).values()}
    assert {path: n for path, n in lengths.items() if n > MAX_LINES} == {}


def test_the_check_sees_a_circle_through_a_function_and_a_relative_import(tmp_path: Path) -> None:
    for name, text in {"a/__init__.py": "", "a/b/__init__.py": "", "a/b/x.py": "def f():\n    from a import y\n",
                       "a/y.py": "from .b import x\n", "a/z.py": "import a.y\n"}.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    graph = import_graph(tmp_path, ("a",))
    assert find_cycle(graph) == ["a.b.x", "a.y", "a.b.x"]
    assert find_cycle(unit_graph(tmp_path, graph)) == ["a.b", "a.y", "a.b"]
    assert "a/b/x.py:2" in show(graph, ["a.b.x", "a.y", "a.b.x"])


def test_the_check_passes_a_graph_without_a_circle() -> None:
    assert find_cycle({"a": {"b": ""}, "b": {"c": ""}, "c": {}, "d": {"b": ""}}) is None


MAP_LINE = re.compile(r"^- `(?P<entry>[A-Za-z_]\w*(?:\.py|/))`", re.MULTILINE)


def package_dirs(root: Path, packages: tuple[str, ...] = PACKAGES) -> list[Path]:
    """Every package and subpackage: a folder holding Python, at any depth."""
    dirs = {path.parent for package in packages for path in (root / package).rglob("*.py")}
    return sorted(d for d in dirs if "__pycache__" not in d.parts)


def entries(folder: Path) -> set[str]:
    """What a folder's map must name: its modules (`x.py`) and subpackages (`x/`)."""
    found = {p.name for p in folder.glob("*.py") if p.name != "__init__.py"}
    return found | {f"{d.name}/" for d in folder.iterdir()
                    if d.is_dir() and d.name != "__pycache__" and any(d.rglob("*.py"))}


def map_problems(root: Path, packages: tuple[str, ...] = PACKAGES) -> list[str]:
    """One sentence per gap between a package's map and its folder, saying what to change where."""
    problems = []
    for folder in package_dirs(root, packages):
        init = folder / "__init__.py"
        where = init.relative_to(root)
        if not init.is_file():
            problems.append(f"{folder.relative_to(root)}/ has no __init__.py: add one whose docstring maps it")
            continue
        named = set(MAP_LINE.findall(ast.get_docstring(ast.parse(init.read_text(encoding="utf-8"))) or ""))
        problems += [f"{folder.relative_to(root)}/{name} has no line in the map: add "
                     f'the line "- `{name}`: <what it holds>" to the docstring of {where}'
                     for name in sorted(entries(folder) - named)]
        problems += [f"{where}: the map line for `{name}` names nothing in {folder.relative_to(root)}/: "
                     "remove the line or correct the name"
                     for name in sorted(named - entries(folder))]
    return problems


def test_every_module_and_subpackage_has_a_line_in_its_package_map() -> None:
    problems = map_problems(REPO)
    assert not problems, "package maps (the __init__.py docstrings) out of date:\n" + "\n".join(problems)


def test_the_map_check_names_the_missing_line_the_stale_line_and_the_missing_init(tmp_path: Path) -> None:
    for name, text in {"a/__init__.py": '"""A.\n\n- `x.py`: x\n- `gone.py`: was here\n- `b/`: b\n"""\n',
                       "a/x.py": "", "a/new.py": "", "a/b/__init__.py": '"""B."""\n', "a/b/y.py": "",
                       "a/c/z.py": "", "a/__main__.py": ""}.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    missing = 'has no line in the map: add the line "- `{}`: <what it holds>" to the docstring of {}'
    assert map_problems(tmp_path, ("a",)) == [
        "a/__main__.py " + missing.format("__main__.py", "a/__init__.py"),
        "a/c/ " + missing.format("c/", "a/__init__.py"),
        "a/new.py " + missing.format("new.py", "a/__init__.py"),
        "a/__init__.py: the map line for `gone.py` names nothing in a/: remove the line or correct the name",
        "a/b/y.py " + missing.format("y.py", "a/b/__init__.py"),
        "a/c/ has no __init__.py: add one whose docstring maps it",
    ]


# A module's file name is used once across the packages (issue 61), but where README's Layout says why: Python's
# own files, a package's exceptions (`errors.py`), a CLI package's modules named for their commands
# (`replay/cli/gate.py` is `worker-replay gate`), and the demo's workspaces, one module each in `demo/scenarios/` and
# `demo/worlds/`.
SHARED_BY_LAYOUT = frozenset({"__init__.py", "__main__.py", "errors.py"})
CLI_PACKAGES = ("replay/cli", "serve/cli")
PER_WORKSPACE = ("demo/scenarios", "demo/worlds")


def shared_names(root: Path, packages: tuple[str, ...] = PACKAGES) -> dict[str, tuple[str, ...]]:
    """Each module file name two or more modules share, with their paths, less those the layout explains."""
    workspaces = set.intersection(*({p.name for p in (root / folder).glob("*.py")} for folder in PER_WORKSPACE))
    where: dict[str, list[str]] = {}
    for package in packages:
        for path in (root / package).rglob("*.py"):
            relative = path.relative_to(root)
            folder = relative.parent.as_posix()
            if (path.name in SHARED_BY_LAYOUT or folder in CLI_PACKAGES
                    or folder in PER_WORKSPACE and path.name in workspaces):
                continue
            where.setdefault(path.name, []).append(relative.as_posix())
    return {name: tuple(sorted(paths)) for name, paths in sorted(where.items()) if len(paths) > 1}


def test_each_module_name_is_used_once_but_where_the_layout_says_why() -> None:
    assert shared_names(REPO) == {}


def test_the_name_check_names_a_shared_name_and_passes_what_the_layout_explains(tmp_path: Path) -> None:
    for name in ("replay/x/util.py", "replay/y/util.py", "replay/x/errors.py", "replay/y/errors.py",
                 "replay/cli/util.py", "replay/cli/gate.py", "replay/y/gate.py", "demo/worlds/sales.py",
                 "demo/scenarios/sales.py", "demo/scenarios/base.py", "replay/y/base.py"):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text("")
    assert shared_names(tmp_path, ("replay", "demo")) == {"base.py": ("demo/scenarios/base.py", "replay/y/base.py"),
                                                          "util.py": ("replay/x/util.py", "replay/y/util.py")}
