"""Suite validation, loading, freezing and statistics."""

from __future__ import annotations

import copy
import hashlib
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from replay.suite import (
    SuiteError,
    check_privacy,
    format_stats,
    freeze_suite,
    load_suite,
    suite_stats,
    validate_suite,
)
from tests.support.hostile import hostile_bytes

TOOLS = [
    {"type": "function", "function": {"name": name, "parameters": {"type": "object", "properties": {}}}}
    for name in ("search_invoices", "list_invoices", "finalize_invoice")
]
TOML = 'name = "t"\nversion = "1"\ndescription = "test suite"\ncreated = 2026-08-01T00:00:00Z\n'


def record(i: int, stratum: str = "verified_action", **over: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "id": f"d-{i}", "stratum": stratum, "cluster": f"c{i % 2}", "workspace": "ws-a", "session": f"s-{i}",
        "captured_at": "2026-07-01T10:00:00Z",
        "request": {"messages": [{"role": "system", "content": "You are helpful."},
                                 {"role": "user", "content": f"request number {i}"}],
                    "tools": TOOLS, "tool_choice": "required"},
        "target": {"tool": "list_invoices", "arg_keys": ["filter", "filter.customer_id"]},
        "failed_action": None, "memory": {"workspace": "ws-a"},
    }
    if stratum == "known_failure":
        base["target"] = None
        base["failed_action"] = {"tool": "search_invoices", "arguments": {"query": "x"}}
    base.update(over)
    return base


def write(root: Path, lines: list[dict[str, Any] | str], toml: str = TOML) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / "suite.toml").write_text(toml)
    text = "".join((line if isinstance(line, str) else json.dumps(line)) + "\n" for line in lines)
    (root / "decisions.jsonl").write_text(text)
    return root


def problems_at(suite: Path) -> dict[int | None, list[str]]:
    out: dict[int | None, list[str]] = {}
    for problem in validate_suite(suite):
        out.setdefault(problem.line, []).append(problem.reason)
    return out


def only_problem(suite: Path, line: int) -> str:
    found = problems_at(suite)
    assert list(found) == [line], found
    assert len(found[line]) == 1, found
    return found[line][0]


def test_valid_suite_loads(tmp_path: Path) -> None:
    suite_dir = write(tmp_path / "s", [record(1), record(2, "known_failure"),
                                       record(3, "clean_trajectory_action", target={"tool": None, "arg_keys": []},
                                              request={**record(3)["request"], "tool_choice": "auto"})])
    assert validate_suite(suite_dir) == []
    suite = load_suite(suite_dir)
    assert [d.id for d in suite.decisions] == ["d-1", "d-2", "d-3"]
    assert not suite.frozen


def test_problem_strings_name_file_and_line(tmp_path: Path) -> None:
    suite_dir = write(tmp_path / "s", [record(1), "{not json"])
    (problem,) = validate_suite(suite_dir)
    assert str(problem).startswith(f"{suite_dir / 'decisions.jsonl'}:2: invalid JSON")


def test_every_bad_line_is_reported(tmp_path: Path) -> None:
    no_target = record(3, target=None)
    no_cluster = record(4)
    del no_cluster["cluster"]
    lines = [record(1), "[1, 2]", no_target, "", no_cluster, record(6, "mystery"), record(7)]
    found = problems_at(write(tmp_path / "s", lines))
    assert sorted(found) == [2, 3, 5, 6]
    assert found[2] == ["a decision must be a JSON object"]
    assert "needs a target" in found[3][0]
    assert found[5] == ["field cluster: Field required"]
    assert "unknown stratum 'mystery'" in found[6][0]


def test_misspelt_field_is_named(tmp_path: Path) -> None:
    line = record(1)
    line["targt"] = line.pop("target")
    reasons = problems_at(write(tmp_path / "s", [line]))[1]
    assert "field targt: Extra inputs are not permitted" in reasons


def test_extra_strata_from_suite_toml(tmp_path: Path) -> None:
    toml = TOML + 'extra_strata = ["long_context"]\n'
    ok = write(tmp_path / "a", [record(1, "long_context")], toml)
    assert validate_suite(ok) == []
    empty = write(tmp_path / "b", [record(1, "long_context", target=None)], toml)
    assert "nothing to score" in only_problem(empty, 1)
    clash = write(tmp_path / "c", [record(1)], TOML + 'extra_strata = ["known_failure"]\n')
    assert [p.reason for p in validate_suite(clash)] == ["extra stratum 'known_failure' is built in"]


def test_known_failure_needs_a_failed_action(tmp_path: Path) -> None:
    suite_dir = write(tmp_path / "s", [record(1, "known_failure", failed_action=None)])
    assert only_problem(suite_dir, 1) == "known_failure decision has no failed_action"


def test_failed_action_needs_arguments_or_keys_and_they_must_agree(tmp_path: Path) -> None:
    lines = [record(1, "known_failure", failed_action={"tool": "search_invoices"}),
             record(2, "known_failure", failed_action={"tool": "search_invoices", "arguments": {"a": {"b": 1}},
                                                       "arg_keys": ["a"]}),
             record(3, "known_failure", failed_action={"tool": "search_invoices", "arg_keys": ["a", "a.b"]})]
    found = problems_at(write(tmp_path / "s", lines))
    assert found[1] == ["failed_action needs arguments or arg_keys"]
    assert found[2] == ["failed_action.arg_keys is not the key set of failed_action.arguments"]
    assert 3 not in found


def test_request_must_not_contain_the_answer(tmp_path: Path) -> None:
    leaked = record(1)
    leaked["request"]["messages"].append({"role": "assistant", "content": None, "tool_calls": [
        {"id": "c", "type": "function", "function": {"name": "list_invoices", "arguments": "{}"}}]})
    assert "request contains its answer: messages[2]" in only_problem(write(tmp_path / "s", [leaked]), 1)


def test_history_of_assistant_calls_before_the_last_tool_turn_is_fine(tmp_path: Path) -> None:
    fine = record(1)
    fine["request"]["messages"] += [
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "c", "type": "function", "function": {"name": "list_invoices", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "c", "content": "{\"error\": \"rejected\"}"},
    ]
    assert validate_suite(write(tmp_path / "s", [fine])) == []


@pytest.mark.parametrize("block", ["<standing_rules>\n- be nice\n</standing_rules>", "<MEMORY>x</MEMORY>",
                                   "profile </memory> trailing"])
def test_memory_block_in_request_is_refused(tmp_path: Path, block: str) -> None:
    line = record(1)
    line["request"]["messages"][0]["content"] = "You are helpful.\n" + block
    assert "carries a memory block" in only_problem(write(tmp_path / "s", [line]), 1)


def test_memory_block_in_content_parts_is_refused(tmp_path: Path) -> None:
    line = record(1)
    line["request"]["messages"][1]["content"] = [{"type": "text", "text": "<standing_rules>x</standing_rules>"}]
    assert "memory block" in only_problem(write(tmp_path / "s", [line]), 1)


def test_duplicate_id(tmp_path: Path) -> None:
    other = record(2, "clean_trajectory_action", id="d-1")
    reason = only_problem(write(tmp_path / "s", [record(1), other]), 2)
    assert reason == "duplicate id 'd-1' (first at line 1 in stratum 'verified_action')"


def test_same_state_in_two_strata(tmp_path: Path) -> None:
    twin = record(2, "verified_recovery", request=copy.deepcopy(record(1)["request"]))
    reason = only_problem(write(tmp_path / "s", [record(1), twin]), 2)
    assert reason.startswith("strata not disjoint: same request as 'd-1' (line 1) in stratum 'verified_action'")


def test_same_state_twice_in_one_stratum(tmp_path: Path) -> None:
    twin = record(2, request=copy.deepcopy(record(1)["request"]))
    assert "duplicate decision state" in only_problem(write(tmp_path / "s", [record(1), twin]), 2)


def test_state_identity_ignores_key_order(tmp_path: Path) -> None:
    request = record(1)["request"]
    reordered = {"tool_choice": request["tool_choice"], "tools": request["tools"], "messages": request["messages"]}
    twin = record(2, request=reordered)
    assert "duplicate decision state" in only_problem(write(tmp_path / "s", [record(1), twin]), 2)


def test_target_tool_must_be_offered(tmp_path: Path) -> None:
    line = record(1, target={"tool": "delete_invoice", "arg_keys": []})
    assert "target tool 'delete_invoice' is not among the offered tools" in only_problem(write(tmp_path / "s", [line]), 1)


@pytest.mark.parametrize(
    ("choice", "target", "expected"),
    [
        ("none", {"tool": "list_invoices", "arg_keys": []}, "tool_choice 'none' forbids"),
        ("required", {"tool": None, "arg_keys": []}, "tool_choice 'required' forbids"),
        ({"type": "function", "function": {"name": "finalize_invoice"}}, {"tool": "list_invoices", "arg_keys": []},
         "tool_choice names 'finalize_invoice'"),
    ],
)
def test_tool_choice_must_allow_the_target(tmp_path: Path, choice: Any, target: dict, expected: str) -> None:
    line = record(1, target=target)
    line["request"]["tool_choice"] = choice
    assert expected in only_problem(write(tmp_path / "s", [line]), 1)


@pytest.mark.parametrize(("keys", "expected"), [(["a.b"], "parent path missing for a.b"),
                                                (["a", "a"], "duplicate keys"),
                                                (["a[b"], "unescaped '['")])
def test_arg_keys_must_be_a_key_set(tmp_path: Path, keys: list[str], expected: str) -> None:
    line = record(1, target={"tool": "list_invoices", "arg_keys": keys})
    assert expected in only_problem(write(tmp_path / "s", [line]), 1)


def test_suite_toml_problems(tmp_path: Path) -> None:
    missing = write(tmp_path / "a", [record(1)])
    (missing / "suite.toml").unlink()
    assert [p.reason for p in validate_suite(missing)] == ["missing"]
    broken = write(tmp_path / "b", [record(1)], toml="name = \n")
    assert validate_suite(broken)[0].reason.startswith("invalid TOML")
    unnamed = write(tmp_path / "c", [record(1)], toml='version = "1"\ncreated = 2026-08-01\n')
    assert [p.reason for p in validate_suite(unnamed)] == ["field name: Field required"]
    assert validate_suite(tmp_path / "nowhere")[0].reason.startswith("not a suite directory")


def test_a_deep_suite_toml_is_a_problem_not_a_traceback(tmp_path: Path) -> None:
    suite = write(tmp_path / "s", [record(1)], toml=TOML + "extra_strata = " + "[" * 5000 + "]" * 5000 + "\n")
    assert [(p.line, p.reason) for p in validate_suite(suite)] == [
        (None, "invalid TOML: arrays and tables nest too deeply to read")]


def test_load_suite_raises_with_every_problem(tmp_path: Path) -> None:
    suite_dir = write(tmp_path / "s", ["{", "{"])
    with pytest.raises(SuiteError) as info:
        load_suite(suite_dir)
    assert len(info.value.problems) == 2
    assert "decisions.jsonl:1: invalid JSON" in str(info.value)
    assert "decisions.jsonl:2: invalid JSON" in str(info.value)


# --- freezing ---------------------------------------------------------------------------


def test_freeze_writes_the_manifest_and_load_verifies_it(tmp_path: Path) -> None:
    suite_dir = write(tmp_path / "s", [record(1), record(2, "known_failure")])
    expected = hashlib.sha256((suite_dir / "decisions.jsonl").read_bytes()).hexdigest()
    manifest = freeze_suite(suite_dir)
    assert manifest.sha256 == expected
    assert manifest.decisions == 2
    assert (suite_dir / "suite.toml").read_text().startswith(TOML)
    suite = load_suite(suite_dir)
    assert suite.frozen and suite.sha256 == expected


def test_frozen_suite_refuses_a_changed_file(tmp_path: Path) -> None:
    suite_dir = write(tmp_path / "s", [record(1)])
    frozen = freeze_suite(suite_dir).sha256
    with (suite_dir / "decisions.jsonl").open("a") as handle:
        handle.write(json.dumps(record(2)) + "\n")
    actual = hashlib.sha256((suite_dir / "decisions.jsonl").read_bytes()).hexdigest()
    with pytest.raises(SuiteError) as info:
        load_suite(suite_dir)
    message = str(info.value)
    assert f"expected sha256 {frozen}, actual {actual}" in message
    assert "next version" in message


def test_refreezing_unchanged_is_a_no_op_and_changed_is_refused(tmp_path: Path) -> None:
    suite_dir = write(tmp_path / "s", [record(1)])
    first = freeze_suite(suite_dir)
    toml_after_first = (suite_dir / "suite.toml").read_text()
    assert freeze_suite(suite_dir) == first
    assert (suite_dir / "suite.toml").read_text() == toml_after_first
    (suite_dir / "decisions.jsonl").write_text(json.dumps(record(5)) + "\n")
    with pytest.raises(SuiteError, match="already frozen"):
        freeze_suite(suite_dir)
    assert (suite_dir / "suite.toml").read_text() == toml_after_first


def test_freeze_refuses_an_invalid_suite_and_writes_nothing(tmp_path: Path) -> None:
    suite_dir = write(tmp_path / "s", [record(1, target=None)])
    with pytest.raises(SuiteError, match="refusing to freeze") as info:
        freeze_suite(suite_dir)
    assert "decisions.jsonl:1" in str(info.value)
    assert (suite_dir / "suite.toml").read_text() == TOML


def test_validate_verifies_a_frozen_suites_manifest(tmp_path: Path) -> None:
    """Issue 14 item 1: an edited decision line of a frozen suite is a validation problem."""
    suite_dir = write(tmp_path / "s", [record(1), record(2)])
    frozen = freeze_suite(suite_dir).sha256
    assert validate_suite(suite_dir) == []
    lines = (suite_dir / "decisions.jsonl").read_text().splitlines()
    lines[1] = lines[1].replace("request number 2", "request number 22")
    (suite_dir / "decisions.jsonl").write_text("\n".join(lines) + "\n")
    problems = validate_suite(suite_dir)
    assert len(problems) == 1 and problems[0].file.endswith("decisions.jsonl")
    assert f"expected sha256 {frozen}" in problems[0].reason and "next version" in problems[0].reason


def test_validate_checks_the_frozen_decision_count(tmp_path: Path) -> None:
    suite_dir = write(tmp_path / "s", [record(1), record(2)])
    freeze_suite(suite_dir)
    toml = (suite_dir / "suite.toml").read_text()
    (suite_dir / "suite.toml").write_text(toml.replace("decisions = 2", "decisions = 3"))
    assert any("3 decisions" in p.reason and p.file.endswith("suite.toml") for p in validate_suite(suite_dir))


@pytest.mark.parametrize("content", ["", "\n\n  \n"])
def test_a_suite_without_decisions_is_invalid_and_cannot_freeze(tmp_path: Path, content: str) -> None:
    """Issue 14 item 2."""
    suite_dir = write(tmp_path / "s", [])
    (suite_dir / "decisions.jsonl").write_text(content)
    assert [p.reason for p in validate_suite(suite_dir)] == ["no decisions"]
    with pytest.raises(SuiteError, match="refusing to freeze"):
        freeze_suite(suite_dir)
    assert (suite_dir / "suite.toml").read_text() == TOML


def test_a_deeply_nested_line_is_a_problem_not_a_crash(tmp_path: Path) -> None:
    suite_dir = write(tmp_path / "s", [record(1), "[" * 100_000])
    assert "invalid JSON" in only_problem(suite_dir, 2)


# --- statistics -------------------------------------------------------------------------


def test_stats_count_by_stratum_cluster_workspace_and_tool(tmp_path: Path) -> None:
    lines = [record(1), record(2, "verified_recovery", workspace="ws-b"), record(3, "known_failure"),
             record(4, "training_sanity"),
             record(5, "clean_trajectory_action", target={"tool": None, "arg_keys": []},
                    request={**record(5)["request"], "tool_choice": "auto"})]
    stats = suite_stats(load_suite(write(tmp_path / "s", lines)))
    assert stats["decisions"] == 5
    assert stats["held_out_positive"] == 3
    assert stats["known_failure"] == 1
    assert stats["strata"] == {"training_sanity": 1, "verified_recovery": 1, "clean_trajectory_action": 1,
                               "verified_action": 1, "known_failure": 1}
    assert stats["clusters"] == {"c0": 2, "c1": 3}
    assert stats["workspaces"] == {"ws-a": 4, "ws-b": 1}
    assert stats["target_tools"] == {"(no call)": 1, "list_invoices": 3}
    table = format_stats(stats)
    assert "NOT frozen" in table
    assert "verified_recovery" in table and "(no call)" in table


# --- the privacy check: a detectable value in any field fails it, and freeze refuses ------------

PLANTS = {"EMAIL": "maria.lopez@acme-corp.com", "IBAN": "DE89 3704 0044 0532 0130 00", "CARD": "4111111111111111",
          "SECRET": "AKIAIOSFODNN7EXAMPLE", "IP": "10.20.30.40", "PHONE": "+44 20 7946 0958"}
STRUCTURE = {"id", "stratum", "captured_at", "tool", "name", "role", "tool_choice", "type", "workspace", "session",
             "arg_keys"}  # names (core.names) cannot hold a planted value with spaces


def rich_record() -> dict[str, Any]:
    """A known failure whose request holds every message shape, with values in every kind of field."""
    messages = [{"role": "system", "content": "You keep the ledger."},
                {"role": "user", "content": [{"type": "text", "text": "Find the invoice."}]},
                {"role": "assistant", "content": None, "tool_calls": [{"id": "c1", "type": "function", "function": {
                    "name": "search_invoices", "arguments": json.dumps({"query": "ACME", "filter": {"note": "x"}})}}]},
                {"role": "tool", "tool_call_id": "c1", "content": json.dumps({"results": ["inv-1"]})}]
    return record(1, "known_failure", request={"messages": messages, "tools": TOOLS, "tool_choice": "auto"},
                  failed_action={"tool": "search_invoices", "arguments": {"query": "x", "opts": [{"to": "y"}]}})


def string_paths(value: Any, path: tuple = ()) -> list[tuple]:
    if isinstance(value, dict):
        return [p for k, v in value.items() if k not in STRUCTURE for p in string_paths(v, (*path, k))]
    if isinstance(value, list):
        return [p for i, v in enumerate(value) for p in string_paths(v, (*path, i))]
    return [path] if isinstance(value, str) else []


def json_path(path: tuple) -> str:
    return "$" + "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in path)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data(), kind=st.sampled_from(sorted(PLANTS)))
def test_a_planted_value_in_any_field_fails_the_check_and_freeze_refuses(tmp_path_factory, data, kind):
    line = rich_record()
    assert check_decision_ok(tmp_path_factory, line)
    path = data.draw(st.sampled_from(string_paths(line)))
    holder = line
    for step in path[:-1]:
        holder = holder[step]
    holder[path[-1]] = f"{holder[path[-1]]} {PLANTS[kind]}"
    suite_dir = write(tmp_path_factory.mktemp("s"), [record(2), line])
    assert [(p.line, p.reason) for p in check_privacy(suite_dir)] == [
        (2, f"decision 'd-1': {kind} value at {json_path(path)}")]
    with pytest.raises(SuiteError, match="privacy check finds 1 detectable value") as info:
        freeze_suite(suite_dir)
    assert f"decisions.jsonl:2: {kind} at {json_path(path)}" in str(info.value)  # file, line, type: one line
    assert "\n" not in str(info.value) and PLANTS[kind] not in str(info.value)
    assert "frozen" not in (suite_dir / "suite.toml").read_text()
    assert freeze_suite(suite_dir, synthetic=True).decisions == 2  # invented values: the check does not apply


def check_decision_ok(factory: pytest.TempPathFactory, line: dict[str, Any]) -> bool:
    suite_dir = write(factory.mktemp("ok"), [line])
    return validate_suite(suite_dir) == [] and check_privacy(suite_dir) == []


@pytest.mark.parametrize(("over", "field"), [
    ({"workspace": "../other-tenant"}, "workspace"), ({"session": "../s-1"}, "session"),
    ({"memory": {"workspace": "../other-tenant"}}, "memory.workspace"), ({"workspace": ""}, "workspace"),
    ({"session": "s/1"}, "session"), ({"workspace": "ws-a" * 40}, "workspace"),
])
def test_workspace_and_session_are_names_that_cannot_climb_out_of_a_root(tmp_path: Path, over: dict[str, Any],
                                                                         field: str) -> None:
    """`<memory.root>/<workspace>` and `<corpus>/<workspace>/<session>.jsonl` are paths: a name with
    `..` or `/` would read another tenant's memory."""
    suite = write(tmp_path / "s", [record(1, **over)])
    assert only_problem(suite, 1).startswith(f"field {field}: String should match pattern")


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(decisions=hostile_bytes([json.dumps(record(1)).encode(), json.dumps(record(2, "known_failure")).encode()]),
       manifest=hostile_bytes([TOML.encode(), b"extra_strata = [1]", b"[frozen]"]))
def test_any_bytes_are_a_suite_or_problems_naming_file_and_line(tmp_path: Path, decisions: bytes,
                                                                manifest: bytes) -> None:
    suite = tmp_path / "any"
    suite.mkdir(exist_ok=True)
    (suite / "decisions.jsonl").write_bytes(decisions)
    (suite / "suite.toml").write_bytes(manifest)
    for problem in validate_suite(suite) + check_privacy(suite):
        assert problem.file.startswith(str(suite))
