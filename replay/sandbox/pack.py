"""Scenario packs: validate, load, freeze, stats and check (DESIGN §8).

A pack is a directory like a suite: `pack.toml` and `scenarios.jsonl`, one `Scenario` a line.

```toml
name = "demo-sandbox"
version = "1"
description = "..."
created = 2026-08-01T00:00:00Z
worlds = "demo.worlds"        # module whose WORLDS maps world names to `World`s

[frozen]                      # written by freeze_pack, never by hand
sha256 = "<sha256 of scenarios.jsonl>"
scenarios = 42
frozen_at = 2026-08-01T00:00:00Z
```

`worlds` names code, and a pack is data: the module is imported only from the installed
packages (or the project's own source tree), never from the pack directory or the current
directory, so `worker-replay sandbox validate .` run inside a pack never runs a `worlds.py`
that came with it.

Frozen packs are immutable like suites; problems name the file and line (the suite's
helpers in `replay/suite.py` read the manifest and write the frozen block). `check_pack`
proves a pack: every oracle completes with no unsupported completion and no critical
failure, every broken variant fails on the same initial state.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import sys
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from types import ModuleType
from typing import Any

from pydantic import Field, ValidationError

from core.jsonfile import read_jsonl_values, schema_errors
from core.names import excerpt
from core.records import Strict
from replay.errors import ReplayError
from replay.sandbox.measures import Scores, score
from replay.sandbox.scenario import Call, EndedBy, Scenario, Trajectory, Turn
from replay.sandbox.world import JSON, Episode, World, in_state, state_hash
from replay.suite import Manifest, SuiteProblem, read_manifest, write_frozen_block

PACK_TOML = "pack.toml"
SCENARIOS_JSONL = "scenarios.jsonl"
_PROJECT_ROOT = Path(__file__).resolve().parents[2]  # holds the project's packages (replay, demo, …)


class PackError(ReplayError):
    """A pack that cannot be used as it is; `problems` lists every reason with file:line."""

    def __init__(self, summary: str, problems: list[SuiteProblem]) -> None:
        self.problems = problems
        super().__init__("\n".join([summary, *(f"  {p}" for p in problems)]))


class PackFrozen(Strict):
    sha256: str = Field(pattern=r"^[0-9a-f]{64}$")
    scenarios: int = Field(ge=0)
    frozen_at: datetime


class PackManifest(Manifest):
    worlds: str = Field(pattern=r"^[A-Za-z_][A-Za-z0-9_.]*$")
    frozen: PackFrozen | None = None


@dataclass(frozen=True)
class Pack:
    path: Path
    manifest: PackManifest
    scenarios: tuple[Scenario, ...]
    worlds: Mapping[str, World]
    sha256: str

    @property
    def frozen(self) -> bool:
        return self.manifest.frozen is not None

    def world(self, scenario: Scenario) -> World:
        return self.worlds[scenario.world]


def scenarios_sha256(pack_dir: Path | str) -> str:
    with (Path(pack_dir) / SCENARIOS_JSONL).open("rb") as handle:
        return hashlib.file_digest(handle, "sha256").hexdigest()


def load_worlds(module: str, pack_dir: Path) -> Mapping[str, World]:
    """The `WORLDS` mapping of an installed module (named in pack.toml; imported, never evaluated),
    never one that lies in the pack directory or is found through the current directory."""
    try:
        worlds = _import_installed(module, pack_dir.resolve()).WORLDS
    except (ImportError, AttributeError) as exc:
        raise PackError(f"cannot load worlds from {module!r}: {exc}", []) from exc
    if not isinstance(worlds, Mapping) or not all(isinstance(w, World) for w in worlds.values()):
        raise PackError(f"{module}.WORLDS is not a mapping of World objects", [])
    return worlds


def _import_installed(module: str, pack_dir: Path) -> ModuleType:
    """Import `module` with the current and pack directories off `sys.path` (`python -m` puts the
    current one first), checking each package on the way before it runs: nothing whose file lies
    in the pack directory is executed."""
    local = {Path.cwd().resolve(), pack_dir} - {_PROJECT_ROOT}
    saved = list(sys.path)
    sys.path[:] = [entry for entry in saved if _resolved(entry) not in local]
    try:
        parts = module.split(".")
        for depth in range(1, len(parts) + 1):
            name = ".".join(parts[:depth])
            loaded = sys.modules.get(name)
            spec = loaded.__spec__ if loaded is not None else importlib.util.find_spec(name)
            if spec is None:
                raise ImportError(f"no installed module named {name!r}")
            origin = spec.origin if spec.has_location else None  # not "built-in" or "frozen"
            places = [_resolved(p) for p in (origin, *(spec.submodule_search_locations or [])) if p]
            if any(place is not None and place.is_relative_to(pack_dir) for place in places):
                raise ImportError(f"{name!r} lies in the pack directory {pack_dir}; a pack's worlds come from an "
                                  "installed package, never from the pack")
            importlib.import_module(name)
        return sys.modules[module]
    finally:
        sys.path[:] = saved


def _resolved(entry: str) -> Path | None:
    try:
        return Path(entry or ".").resolve()
    except (OSError, RuntimeError):  # unreadable, or a symlink loop
        return None


def validate_pack(pack_dir: Path | str) -> list[SuiteProblem]:
    return _read(Path(pack_dir))[3]


def load_pack(pack_dir: Path | str) -> Pack:
    path = Path(pack_dir)
    manifest, scenarios, worlds, problems = _read(path)
    if manifest is not None and manifest.frozen is not None and (path / SCENARIOS_JSONL).is_file():
        actual = scenarios_sha256(path)
        if actual != manifest.frozen.sha256:
            problems.insert(0, SuiteProblem(str(path / SCENARIOS_JSONL), None,
                                            f"changed since the pack was frozen: expected sha256 "
                                            f"{manifest.frozen.sha256}, actual {actual}. A frozen pack is immutable; "
                                            "put new scenarios into the next version"))
    if problems or manifest is None:
        raise PackError(f"pack {path} is not usable ({len(problems)} problem(s)):", problems)
    return Pack(path, manifest, tuple(scenarios), worlds, scenarios_sha256(path))


def freeze_pack(pack_dir: Path | str, at: datetime | None = None) -> PackFrozen:
    """Write `[frozen]` into pack.toml; an unchanged frozen pack is left as it is, a changed one refused."""
    path = Path(pack_dir)
    manifest, scenarios, _, problems = _read(path)
    if problems or manifest is None:
        raise PackError(f"refusing to freeze pack {path}: it is invalid", problems)
    actual = scenarios_sha256(path)
    if manifest.frozen is not None:
        if manifest.frozen.sha256 == actual:
            return manifest.frozen
        raise PackError(f"refusing to re-freeze pack {path}", [SuiteProblem(
            str(path / SCENARIOS_JSONL), None, f"already frozen with sha256 {manifest.frozen.sha256}, now {actual}: "
            f"a frozen pack is immutable; copy it to a new directory with a version after {manifest.version!r}")])
    write_frozen_block(path / PACK_TOML, actual, "scenarios", len(scenarios), at)
    frozen = read_manifest(path / PACK_TOML, PackManifest)[0]
    if frozen is None or frozen.frozen is None:
        raise PackError(f"pack {path}: pack.toml did not read back after freezing", [])
    return frozen.frozen


def pack_stats(pack: Pack) -> dict[str, Any]:
    s = pack.scenarios
    return {
        "name": pack.manifest.name, "version": pack.manifest.version, "frozen": pack.frozen, "sha256": pack.sha256,
        "scenarios": len(s),
        "policy_families": dict(sorted(Counter(x.policy_family for x in s).items())),
        "worlds": dict(sorted(Counter(x.world for x in s).items())),
        "oracle_tools": dict(sorted(Counter(c.tool for x in s for c in x.oracle).items())),
        "critical_categories": dict(sorted(Counter(c.category for x in s for c in x.critical).items())),
        "claims": sum(len(x.claims) for x in s),
    }


def format_pack_stats(stats: Mapping[str, Any]) -> str:
    frozen = f"frozen, sha256 {stats['sha256'][:12]}…" if stats["frozen"] else "NOT frozen"
    lines = [f"pack {stats['name']} v{stats['version']} ({frozen})",
             f"{stats['scenarios']} scenarios, {stats['claims']} claims"]
    for title, key in (("policy family", "policy_families"), ("world", "worlds"), ("oracle tool", "oracle_tools"),
                       ("critical category", "critical_categories")):
        table = stats[key]
        width = max([len(title), *(len(k) for k in table)])
        lines += ["", f"{title:<{width}}  count", f"{'-' * width}  -----", *(f"{k:<{width}}  {v:>5}"
                                                                             for k, v in table.items())]
    return "\n".join(lines)


# --- episodes from fixed calls, and the pack check -----------------------------------------------


def start_episode(world: World, scenario: Scenario) -> Episode:
    return Episode.start(world, scenario.initial_state, scenario.tools, scenario.clock, scenario.seed)


def trajectory_of(episode: Episode, start: JSON, final_answer: str | None, ended_by: EndedBy,
                  turns: Sequence[Turn] = ()) -> Trajectory:
    end = episode.snapshot()
    return Trajectory(turns=list(turns), ledger=list(episode.actions), final_answer=final_answer, ended_by=ended_by,
                      start_state=start, end_state=end, end_state_hash=state_hash(end))


def play(world: World, scenario: Scenario, calls: list[Call], answer: str) -> Trajectory:
    """A scripted episode: these calls in order, then this final answer."""
    episode = start_episode(world, scenario)
    start = episode.snapshot()
    for call in calls:
        episode.call(call.tool, call.arguments)
    return trajectory_of(episode, start, answer, "final_answer")


def oracle_end_state(world: World, scenario: Scenario) -> JSON:
    return play(world, scenario, scenario.oracle, scenario.oracle_answer).end_state


@dataclass(frozen=True)
class CheckResult:
    scenario: str
    oracle: Scores
    broken: Scores

    @property
    def oracle_passes(self) -> bool:
        o = self.oracle
        return o.task_completed and not o.unsupported_completion and not o.critical_failure

    @property
    def broken_fails(self) -> bool:
        b = self.broken
        return not b.task_completed or b.unsupported_completion or b.critical_failure


def check_scenario(world: World, scenario: Scenario) -> CheckResult:
    oracle = play(world, scenario, scenario.oracle, scenario.oracle_answer)
    broken = play(world, scenario, scenario.broken, scenario.broken_answer)
    return CheckResult(scenario.id, score(scenario, oracle, oracle.end_state, world.prose_fields),
                       score(scenario, broken, oracle.end_state, world.prose_fields))


def check_pack(pack: Pack) -> list[CheckResult]:
    return [check_scenario(pack.world(s), s) for s in pack.scenarios]


def _names_in_world(scenario: Scenario, world: World) -> list[str]:
    """Every tool and state path a claim, check or success condition names, checked against the
    world: a check naming what the world does not have would silently never hit."""
    def tool(where: str, name: str | None) -> list[str]:
        return [f"{where} {excerpt(name)} is not a tool of world {world.name!r}"] if (
            name is not None and name not in world.tools) else []

    def path(where: str, value: str) -> list[str]:
        return [] if in_state(world.state, value) else [
            f"{where}: path {excerpt(value)} is not in the state of world {world.name!r}"]

    reasons = [f"claims.{c.id}: requires {excerpt(c.requires.tool)}, which is not a tool of world {world.name!r}"
               for c in scenario.claims if c.requires.tool not in world.tools]
    for c in scenario.critical:
        reasons += tool(f"critical.{c.id}: tool", c.tool) + tool(f"critical.{c.id}: before", c.before)
        reasons += tool(f"critical.{c.id}: then", c.then)
        if c.state is not None and not in_state(world.state, c.state.path):
            reasons.append(f"critical.{c.id}: state path {excerpt(c.state.path)} is not in the state of world "
                           f"{world.name!r}")
    for i, a in enumerate(scenario.success.asserts):
        reasons += path(f"success.assert[{i}]", a.path)
    for i, m in enumerate(scenario.success.may_change):
        reasons += path(f"success.may_change[{i}]", m)
    return reasons


# --- reading -------------------------------------------------------------------------------------


def _read(path: Path) -> tuple[PackManifest | None, list[Scenario], Mapping[str, World], list[SuiteProblem]]:
    toml_path, jsonl_path = path / PACK_TOML, path / SCENARIOS_JSONL
    if not path.is_dir():
        return None, [], {}, [SuiteProblem(str(path), None, "not a pack directory (it does not exist)")]
    manifest, problems = read_manifest(toml_path, PackManifest)
    worlds: Mapping[str, World] = {}
    if manifest is not None:
        try:
            worlds = load_worlds(manifest.worlds, path)
        except PackError as exc:
            problems.append(SuiteProblem(str(toml_path), None, str(exc)))
    if not jsonl_path.is_file():
        return manifest, [], worlds, [*problems, SuiteProblem(str(jsonl_path), None, "missing")]
    scenarios: list[Scenario] = []
    first_line: dict[str, int] = {}
    for line in read_jsonl_values(jsonl_path, "a scenario"):
        scenario, reasons = (None, list(line.problems)) if line.value is None else _read_scenario(line.value, worlds)
        if scenario is not None:
            if scenario.id in first_line:
                reasons.append(f"duplicate scenario id {scenario.id!r} (first on line {first_line[scenario.id]})")
            else:
                first_line[scenario.id] = line.number
                scenarios.append(scenario)
        problems += [SuiteProblem(str(jsonl_path), line.number, r) for r in reasons]
    return manifest, scenarios, worlds, problems


def _read_scenario(data: dict[str, Any], worlds: Mapping[str, World]) -> tuple[Scenario | None, list[str]]:
    try:
        scenario = Scenario.model_validate(data)
    except ValidationError as exc:
        return None, schema_errors(exc)
    return scenario, _check_against_world(scenario, worlds)


def _check_against_world(scenario: Scenario, worlds: Mapping[str, World]) -> list[str]:
    world = worlds.get(scenario.world)
    if world is None:
        known = ", ".join(sorted(worlds)) or "(none loaded)"
        return [f"world {scenario.world!r} is not one of {known}"] if worlds else []
    reasons = [f"tools: {t!r} is not a tool of world {world.name!r}" for t in scenario.tools if t not in world.tools]
    for part in ("oracle", "broken"):
        reasons += [f"{part}[{i}]: {c.tool!r} is not a tool of world {world.name!r}"
                    for i, c in enumerate(getattr(scenario, part)) if c.tool not in world.tools]
    reasons += [f"oracle[{i}]: {c.tool!r} is not in the scenario's tools" for i, c in enumerate(scenario.oracle)
                if c.tool in world.tools and c.tool not in scenario.tools]
    reasons += _names_in_world(scenario, world)
    try:
        world.state.model_validate(scenario.initial_state)
    except ValidationError as exc:
        reasons += [f"initial_state: {r.removeprefix('field ')}" for r in schema_errors(exc)]
    return reasons
