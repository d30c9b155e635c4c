"""The deterministic checks: each on the recorded sessions with a planted final answer (and, for the count, a
planted last tool result), then at its edges on runs built here."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from core.guard import GuardKind, GuardRules
from replay.corpus.claude_code import read_session_file
from replay.qa.check_config import load_config
from replay.qa.checks import (
    FindingKind,
    check_run,
    count_claims,
    count_findings,
    placeholder_findings,
    tool_names,
    unacknowledged_findings,
    without_code,
)
from replay.qa.finished_run import AnswerText, Run, ThreadCall, read_run
from tests.replay.qa.corpus import RETRIES, append_answer, replace_result, text
from tests.support.curation import LOOKUP, copy_workspace, session_path

CONFIG = Path(__file__).resolve().parents[3] / "configs" / "qa" / "checks.toml"
RULES = load_config(CONFIG)[0]
LAST_REFUSAL = ("b391bfd4-259c-421f-8664-31185ea6cbc1", "f1b1932a-6585-4087-a254-af6ff9a4bbf2")
"""The retries session's last Agent call and the is_error result that refused it."""
LAST_LOOKUP_RESULT = "4b4bce2a-2062-45ac-8d8f-613a14b4880f"


def planted(tmp_path: Path, session: str, answer: str, last_result: str | None = None) -> Run:
    copy_workspace(tmp_path, "ws")
    path = session_path(tmp_path, "ws", session)
    if last_result is not None:
        replace_result(path, LAST_LOOKUP_RESULT, last_result)
    append_answer(path, session, text(answer))
    run = read_run("ws", session, read_session_file(path, session), GuardRules())
    assert isinstance(run, Run)
    return run


# ── on the recorded sessions ────────────────────────────────────────────────


def test_three_refused_agent_calls_and_an_answer_that_ignores_them(tmp_path: Path) -> None:
    run = planted(tmp_path, RETRIES, "Invoice INV-7 is paid.")
    [finding] = check_run(run, RULES)
    assert finding.kind is FindingKind.UNACKNOWLEDGED_TOOL_ERROR
    assert finding.records == [*LAST_REFUSAL, run.final_record]
    assert finding.detail.startswith("'Agent' failed: '<tool_use_error>InputValidationError")


@pytest.mark.parametrize("answer", [
    "I could not look it up: the Agent tool refused my input.",  # names the tool
    "Sorry, I couldn't reach the invoice service.",  # admits a failure
    "The lookup FAILED, so I cannot say.",
])
def test_an_answer_that_names_the_tool_or_admits_the_failure_is_no_finding(tmp_path: Path, answer: str) -> None:
    assert check_run(planted(tmp_path, RETRIES, answer), RULES) == []


def test_a_failure_retried_to_success_is_no_finding(tmp_path: Path) -> None:
    """The lookup session as recorded: the first call timed out, the next two succeeded."""
    run = planted(tmp_path, LOOKUP, "Invoice INV-7 is paid.")
    assert run.calls[0].outcome == "failed" and check_run(run, RULES) == []


INVOICES = json.dumps({"invoices": [{"id": "INV-7"}, {"id": "INV-8"}, {"id": "INV-9"}], "page": 1})


@pytest.mark.parametrize(("answer", "found"), [
    ("I found 2 invoices: INV-7 and INV-8.", True),
    ("There are 4 results.", True),
    ("I found two invoices.", True),
    ("I found 3 invoices; 2 invoices are paid.", False),  # one count is the list's
    ("The top 2 invoices are INV-7 and INV-8.", False),  # a qualifier
    ("Of the three invoices, INV-7 is paid.", False),
    ("1. Invoice INV-7\n2. Invoice INV-8", False),  # numbering, not a count
    ("I found 1 invoice on page 1.", False),  # 1 is an integer the result states
    ("Run `grep -c 2 invoices` to count.", False),  # code
    ("I found 2 customers.", False),  # not what the list holds
])
def test_a_count_against_the_planted_list(tmp_path: Path, answer: str, found: bool) -> None:
    run = planted(tmp_path, LOOKUP, answer, INVOICES)
    findings = count_findings(run, RULES)
    assert bool(findings) is found
    if found:
        assert findings[0].records == [run.final_record, LAST_LOOKUP_RESULT]
        assert findings[0].detail.endswith("its 'invoices' field lists 3")


def test_a_placeholder_left_in_the_answer(tmp_path: Path) -> None:
    run = planted(tmp_path, LOOKUP, "Dear {{customer_name}}, invoice INV-7 is paid. [TODO: sign]")
    assert [(f.kind, f.detail, f.records) for f in check_run(run, RULES)] == [
        (FindingKind.PLACEHOLDER, "'{{customer_name}}' in the final answer (pattern placeholders.txt:8)",
         [run.final_record]),
        (FindingKind.PLACEHOLDER, "'[TODO: sign]' in the final answer (pattern placeholders.txt:14)",
         [run.final_record])]


# ── at the edges, on runs built here ────────────────────────────────────────


def run_with(answer: str, calls: tuple[ThreadCall, ...] = (), last: tuple[ThreadCall, ...] = ()) -> Run:
    return Run("ws", "s", "final", (AnswerText("final", answer),), calls, last)


def call(tool: str, outcome: GuardKind, n: int = 0, content: object = "boom") -> ThreadCall:
    return ThreadCall(f"c{n}", tool, f"use-{n}", f"result-{n}", outcome, content)


@pytest.mark.parametrize(("outcomes", "found"), [
    (["failed"], True), (["blocked"], True), (["failure_in_success_channel"], True),
    (["invalid_envelope"], False),  # a text result where JSON was expected: no failure
    (["failed", "ok"], False), (["failed", "empty_result"], False),  # a later result that is no failure
    (["ok", "failed"], True), (["failed", "failed"], True),
])
def test_which_results_leave_a_tool_failing(outcomes: list[GuardKind], found: bool) -> None:
    calls = tuple(call("mcp__crm__search_customers", o, n) for n, o in enumerate(outcomes))
    findings = unacknowledged_findings(run_with("Done.", calls), RULES)
    assert bool(findings) is found
    if found:
        last = len(outcomes) - 1
        assert findings[0].records == [f"use-{last}", f"result-{last}", "final"]


@pytest.mark.parametrize("answer", ["search customers returned nothing useful", "I used searchCustomers",
                                    "mcp crm search customers"])
def test_a_tool_is_named_by_its_last_segment_as_words(answer: str) -> None:
    assert unacknowledged_findings(run_with(answer, (call("mcp__crm__search_customers", "failed"),)), RULES) == []


def test_tool_names_as_words() -> None:
    assert tool_names("mcp__crm__searchCustomers") == {" mcp crm search customers ", " search customers "}


def test_each_failing_tool_is_its_own_finding_and_a_nameless_result_none() -> None:
    calls = (call("a_tool", "failed", 0), call("b_tool", "blocked", 1), call("", "failed", 2))
    assert [f.records[0] for f in unacknowledged_findings(run_with("Done.", calls), RULES)] == ["use-0", "use-1"]


def test_without_code_blanks_fences_and_inline_spans() -> None:
    assert without_code("a `x` b ```\ny\n``` c `unclosed") == "a   b   c  unclosed"
    assert without_code("```open fence to the end {{x}}") == " "


@pytest.mark.parametrize(("prose", "claims"), [
    ("found 12 rows", [(12, "rows", ())]),
    ("found 1,234 rows", [(1234, "rows", ())]),
    ("found 1.5 rows", []),
    ("found 12  rows", [(12, "rows", ())]),
    ("found 12\nrows", []),
    ("over 12 rows", []),
    ("found twelve rows", [(12, "rows", ())]),
    ("found one row", []),
    ("found " + "9" * 40 + " rows", []),
    ("row 12 rows", [(12, "rows", ())]),
    ("found 3 new past-due rows", [(3, "rows", ("new", "past", "due"))]),
    ("found 3 a b c d rows", []),  # past MAX_MODIFIERS
    ("found 3 of the rows", []),  # a function word
    ("found 3 over rows", []),  # a qualifier between
    ("found 3 2 rows", [(2, "rows", ())]),
    ("found twenty-five rows", [(25, "rows", ())]),  # not also "five rows"
    ("found twenty five rows", [(25, "rows", ())]),
    ("found thirty rows", [(30, "rows", ())]),
    ("row #3 rows, $3 rows, 2026-11-03 rows", []),  # glued to a sign or a word
    ("(3 rows) **4 rows**", [(3, "rows", ()), (4, "rows", ())]),
    ("3 rows are open", [(3, "rows", ("open",))]),
    ("3 PastDue rows, 4 rows are PastDue", [(3, "rows", ("past", "due")), (4, "rows", ("past", "due"))]),
    ("3 rows are in the table", [(3, "rows", ())]),
    ("3 rows are not open", []),  # which are is no count the list shows
    ("3 rows aren't open", []),
])
def test_count_claims(prose: str, claims: list[tuple[int, str, tuple[str, ...]]]) -> None:
    found = count_claims(prose, {"rows", "row"}, ["over"])
    assert [(c.count, c.noun, c.modifiers) for c in found] == claims


@pytest.mark.parametrize(("content", "length"), [
    ('[1, 2, 3]', 3),
    ('{"items": [1, 2, 3], "ok": true}', 3),
    ('{"a": [1], "b": [2]}', None),  # two lists: which one the answer counts is not plain
    ('{"items": "none"}', None),
    ("not json", None),
])
def test_what_a_result_lists(content: str, length: int | None) -> None:
    result = call("list_rows", "ok", content=content)
    findings = count_findings(run_with("I found 7 items.", (result,), (result,)), RULES)
    assert (findings[0].detail.rsplit(" ", 1)[1] if findings else None) == (None if length is None else str(length))


def test_no_count_check_after_a_failed_or_parallel_result() -> None:
    listed = call("list_rows", "ok", 0, "[1, 2, 3]")
    assert count_findings(run_with("7 items", (listed,), (listed, call("x", "ok", 1))), RULES) == []
    failed = call("list_rows", "failed", 0, "[1, 2, 3]")
    assert count_findings(run_with("7 items", (failed,), (failed,)), RULES) == []


def test_a_lone_surrogate_in_the_answer_is_matched_not_raised() -> None:
    [finding] = placeholder_findings(run_with("\ud800 {{name}}"), RULES)
    assert finding.detail.startswith("'{{name}}'")
