"""Scenario packs: validation with file:line, freezing, immutability, stats and the check."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings

from replay.sandbox.pack import (
    PackError,
    check_pack,
    freeze_pack,
    load_pack,
    pack_stats,
    validate_pack,
)
from tests.replay.sandbox.shop import scenario
from tests.support.cli import run_cli
from tests.support.hostile import hostile_bytes

TOML = 'name = "shop"\nversion = "1"\ncreated = 2026-08-01T00:00:00Z\nworlds = "tests.replay.sandbox.shop"\n'


def write(path: Path, lines: list[Any], toml: str = TOML) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    (path / "pack.toml").write_text(toml)
    (path / "scenarios.jsonl").write_text("".join((x if isinstance(x, str) else json.dumps(x)) + "\n" for x in lines))
    return path


def test_every_problem_is_named_with_file_and_line(tmp_path: Path) -> None:
    bad_state = scenario(id="s-3", initial_state={"items": {"a": {"stock": "many"}}})
    pack = write(tmp_path / "p", [scenario(), "{not json", bad_state, scenario(id="s-4", tools=["get_item", "fly"]),
                                  scenario(), scenario(id="s-6", world="moon"), scenario(id="s-7", limits={"max_steps": 0}),
                                  scenario(id="s-8", claims=[{"id": "c", "pattern": "(", "requires": {"tool": "hold"}}]),
                                  scenario(id="s-9", critical=[{"id": "x", "category": "rule", "kind": "order"}])])
    problems = [str(p) for p in validate_pack(pack)]
    jsonl = str(pack / "scenarios.jsonl")
    expected = {2: "invalid JSON", 3: "initial_state: items.a.stock", 4: "'fly' is not a tool of world 'shop'",
                5: "duplicate scenario id 'shop-1' (first on line 1)", 6: "world 'moon' is not one of shop",
                7: "limits.max_steps", 8: "pattern does not compile", 9: "a order check needs before, then"}
    for line, text in expected.items():
        assert any(p.startswith(f"{jsonl}:{line}: ") and text in p for p in problems), (line, problems)
    assert not any(p.startswith(f"{jsonl}:1: ") for p in problems)


def test_a_deep_or_undecodable_line_is_a_problem_not_a_traceback(tmp_path: Path) -> None:
    pack = write(tmp_path / "p", [scenario(), "[" * 50_000 + "]" * 50_000, scenario(id="s-3")])
    with (pack / "scenarios.jsonl").open("ab") as handle:
        handle.write(b'{"id": "\xff"}\n' + b"1" * 5000 + b"\n")
    problems = {p.line: p.reason for p in validate_pack(pack)}
    assert problems == {2: "invalid JSON: arrays and objects are nested deeper than 100 levels",
                        4: "not UTF-8 text (byte 8 of the line)", 5: problems[5]}
    assert problems[5].startswith("invalid JSON: Exceeds the limit (4300 digits)")
    result = run_cli("replay", "sandbox", "validate", str(pack), cwd=tmp_path)
    assert "Traceback" not in result.stderr and result.returncode != 0 and "scenarios.jsonl:2:" in result.stdout + result.stderr


def test_a_claim_pattern_runs_in_linear_time_and_one_re2_cannot_compile_is_refused(tmp_path: Path) -> None:
    evil = {"id": "evil", "pattern": "^(a+)+$", "requires": {"tool": "hold"}}
    pack = write(tmp_path / "p", [scenario(claims=[evil], oracle_answer="a" * 34 + "!")])
    assert validate_pack(pack) == []
    # Python's re would take about 2**34 steps on this answer; `sandbox check` must simply answer.
    result = run_cli("replay", "sandbox", "check", str(pack), cwd=tmp_path)
    assert result.returncode == 0 and "Traceback" not in result.stderr, result.stderr
    backref = write(tmp_path / "q", [scenario(claims=[{**evil, "pattern": r"(a)\1"}])])
    assert [(p.line, p.reason.split(":")[0]) for p in validate_pack(backref)] == [
        (1, "field claims.0.pattern")]
    assert "does not compile in RE2" in validate_pack(backref)[0].reason


def test_manifest_problems_name_the_toml(tmp_path: Path) -> None:
    pack = write(tmp_path / "p", [scenario()], toml=TOML.replace("tests.replay.sandbox.shop", "no.such.module"))
    assert any("pack.toml" in str(p) and "cannot load worlds" in str(p) for p in validate_pack(pack))
    with pytest.raises(PackError, match="not usable"):
        load_pack(pack)


def test_a_frozen_pack_is_immutable(tmp_path: Path) -> None:
    pack = write(tmp_path / "p", [scenario()])
    frozen = freeze_pack(pack)
    assert frozen.scenarios == 1 and freeze_pack(pack) == frozen  # re-freezing unchanged content is a no-op
    assert load_pack(pack).frozen
    with (pack / "scenarios.jsonl").open("a") as fh:
        fh.write(json.dumps(scenario(id="shop-2")) + "\n")
    with pytest.raises(PackError, match="changed since the pack was frozen"):
        load_pack(pack)
    with pytest.raises(PackError, match="a frozen pack is immutable"):
        freeze_pack(pack)


def test_an_invalid_pack_is_not_frozen(tmp_path: Path) -> None:
    pack = write(tmp_path / "p", ["[]"])
    with pytest.raises(PackError, match="refusing to freeze"):
        freeze_pack(pack)
    assert "[frozen]" not in (pack / "pack.toml").read_text()


def test_check_proves_oracle_and_broken_on_the_same_state(tmp_path: Path) -> None:
    weak = scenario(id="weak", broken=[{"tool": "get_item", "arguments": {"item": "a"}}, *scenario()["oracle"][1:]],
                    broken_answer="All done.")
    pack = load_pack(write(tmp_path / "p", [scenario(), weak]))
    results = {r.scenario: r for r in check_pack(pack)}
    assert results["shop-1"].oracle_passes and results["shop-1"].broken_fails
    assert results["shop-1"].broken.critical_hits == ["no-b"] and results["shop-1"].broken.unsupported_completion
    assert results["weak"].oracle_passes and not results["weak"].broken_fails  # a broken variant that does not fail
    assert pack_stats(pack)["policy_families"] == {"test": 2}


@pytest.mark.parametrize("workspace", ["../other-tenant", "ws/a", ""])
def test_a_scenario_workspace_is_a_name(tmp_path: Path, workspace: str) -> None:
    pack = write(tmp_path / "p", [scenario(workspace=workspace)])
    assert any(":1: " in str(p) and "workspace" in str(p) for p in validate_pack(pack)), validate_pack(pack)


PLANTED = "import pathlib\npathlib.Path({marker!r}).write_text('ran')\nWORLDS = {{}}\n"


@pytest.mark.parametrize("entry", ["", ".", "pack"])
def test_a_packs_own_python_file_is_never_imported(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                   entry: str) -> None:
    """`python -m replay sandbox validate .` from inside a pack puts the pack directory on sys.path
    (as '', '.' or its path): neither a module nor a package beside `pack.toml` may run."""
    import sys
    import uuid

    marker, name = tmp_path / "ran", f"planted_{uuid.uuid4().hex}"
    pack = write(tmp_path / "p", [scenario()])
    (pack / f"{name}.py").write_text(PLANTED.format(marker=str(marker)))
    (pack / f"{name}_pkg").mkdir()
    (pack / f"{name}_pkg" / "__init__.py").write_text(PLANTED.format(marker=str(marker)))
    monkeypatch.chdir(pack)
    monkeypatch.setattr(sys, "path", [str(pack) if entry == "pack" else entry, *sys.path])
    for module in (name, f"{name}_pkg.worlds"):
        (pack / "pack.toml").write_text(TOML.replace("tests.replay.sandbox.shop", module))
        assert any("cannot load worlds" in str(p) for p in validate_pack(Path("."))), module
    assert not marker.exists()
    (pack / "pack.toml").write_text(TOML)  # an installed module still loads from here
    assert validate_pack(Path(".")) == []


def test_the_cli_inside_a_pack_does_not_run_its_python(tmp_path: Path) -> None:
    import os
    import subprocess
    import sys

    marker = tmp_path / "ran"
    pack = write(tmp_path / "p", [scenario()], toml=TOML.replace("tests.replay.sandbox.shop", "worlds"))
    (pack / "worlds.py").write_text(PLANTED.format(marker=str(marker)))
    root = Path(__file__).resolve().parents[3]
    env = {**os.environ, "PYTHONPATH": str(root)}
    done = subprocess.run([sys.executable, "-m", "replay", "sandbox", "validate", "."], cwd=pack, env=env,
                          capture_output=True, text=True, timeout=120)
    assert not marker.exists(), done.stderr
    assert done.returncode == 1 and "cannot load worlds from 'worlds'" in done.stdout


def test_every_tool_name_a_scenario_mentions_is_a_tool_of_its_world(tmp_path: Path) -> None:
    """A check naming a tool the world lacks would never hit (or, for `before`, fail the oracle
    with a misleading reason): each is refused at validation with file:line."""
    def critical(**check: Any) -> dict[str, Any]:
        return scenario(id=f"c-{check['id']}", critical=[{"category": "rule", **check}])

    lines = [scenario(),
             critical(id="fc", kind="forbidden_call", tool="hold_item"),
             critical(id="ob", kind="order", before="get_itme", then="hold"),
             critical(id="ot", kind="order", before="get_item", then="holdd"),
             scenario(id="claim", claims=[{"id": "c", "pattern": "x", "requires": {"tool": "nope"}}]),
             scenario(id="brk", broken=[{"tool": "explode", "arguments": {}}]),
             critical(id="fs", kind="forbidden_state", state={"path": "itemz.a.held", "op": "gt", "value": 4}),
             scenario(id="ok-path", success={"assert": [{"path": "itms.a.held", "value": 2}],
                                             "may_change": ["items.a.held", "sentt"]})]
    problems = [str(p) for p in validate_pack(write(tmp_path / "p", lines))]
    jsonl = str(tmp_path / "p" / "scenarios.jsonl")
    expected = {2: "critical.fc: tool 'hold_item' is not a tool of world 'shop'",
                3: "critical.ob: before 'get_itme' is not a tool of world 'shop'",
                4: "critical.ot: then 'holdd' is not a tool of world 'shop'",
                5: "claims.c: requires 'nope', which is not a tool of world 'shop'",
                6: "broken[0]: 'explode' is not a tool of world 'shop'",
                7: "critical.fs: state path 'itemz.a.held' is not in the state of world 'shop'",
                8: "success.assert[0]: path 'itms.a.held' is not in the state of world 'shop'"}
    for line, text in expected.items():
        assert any(p.startswith(f"{jsonl}:{line}: ") and text in p for p in problems), (line, problems)
    assert any(p.startswith(f"{jsonl}:8: ") and "success.may_change[1]: path 'sentt'" in p for p in problems)
    assert not any(p.startswith(f"{jsonl}:1: ") for p in problems)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(scenarios=hostile_bytes([json.dumps(scenario()).encode()]), manifest=hostile_bytes([TOML.encode()]))
def test_any_bytes_are_a_pack_or_problems_naming_file_and_line(tmp_path: Path, scenarios: bytes,
                                                               manifest: bytes) -> None:
    pack = tmp_path / "any"
    pack.mkdir(exist_ok=True)
    (pack / "scenarios.jsonl").write_bytes(scenarios)
    (pack / "pack.toml").write_bytes(manifest)
    for problem in validate_pack(pack):
        assert problem.file.startswith(str(pack))


@pytest.mark.parametrize("scenario_id", ["a/b", "../x", "x" * 121])
def test_a_scenario_id_makes_a_session_header_that_is_a_name(tmp_path: Path, scenario_id: str) -> None:
    """Episodes send `X-Session-Id: sandbox:<id>`, which the gateway refuses unless it is a name."""
    pack = write(tmp_path / "p", [scenario(id=scenario_id)])
    assert any(":1: " in str(p) and "id" in str(p) for p in validate_pack(pack)), validate_pack(pack)
