"""The reviewer's answer read into a verdict: a valid one, evidence the run does not hold (`unsupported`), a pass
citing nothing (`uncited`), and every malformed kind kept as its named outcome, counted as escalate; no answer
text makes the reader raise."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from core.evidence import ReviewVerdict
from replay.qa.answer import ReviewOutcome, read_answer

HELD = {"toolu_1", "toolu_2", "final_answer"}


def answer(arguments: Any = None, *, name: str = "verdict", content: str | None = None,
           calls: int = 1) -> dict[str, Any]:
    text = arguments if isinstance(arguments, str) else json.dumps(arguments)
    tool_calls = [{"id": f"c{i}", "type": "function", "function": {"name": name, "arguments": text}}
                  for i in range(calls)] if arguments is not None else None
    return {"choices": [{"message": {"role": "assistant", "content": content, "tool_calls": tool_calls}}]}


def test_a_valid_verdict_with_held_evidence() -> None:
    read = read_answer(answer({"verdict": "fail", "evidence": ["toolu_2"]}), HELD)
    assert (read.outcome, read.verdict, read.evidence, read.error) == (ReviewOutcome.OK, ReviewVerdict.FAIL,
                                                                       ("toolu_2",), None)
    assert read.counted is ReviewVerdict.FAIL


def test_evidence_the_run_does_not_hold_is_unsupported() -> None:
    read = read_answer(answer({"verdict": "pass", "evidence": ["toolu_1", "toolu_9"]}), HELD)
    assert (read.outcome, read.verdict, read.evidence) == (ReviewOutcome.UNSUPPORTED, ReviewVerdict.PASS,
                                                           ("toolu_1", "toolu_9"))
    assert read.counted is ReviewVerdict.ESCALATE and "'toolu_9'" in (read.error or "")


def test_a_pass_citing_nothing_is_uncited_and_counts_as_escalate() -> None:
    """The issue's `{"verdict": "pass", "evidence": []}`: a pass that rests on nothing the run holds."""
    read = read_answer(answer({"verdict": "pass", "evidence": []}), HELD)
    assert (read.outcome, read.verdict, read.evidence) == (ReviewOutcome.UNCITED, ReviewVerdict.PASS, ())
    assert read.counted is ReviewVerdict.ESCALATE and "cites none" in (read.error or "")


@pytest.mark.parametrize("evidence", [["toolu_1"], ["final_answer"], ["toolu_2", "final_answer"]])
def test_a_pass_citing_a_call_or_the_final_answer_is_ok(evidence: list[str]) -> None:
    read = read_answer(answer({"verdict": "pass", "evidence": evidence}), HELD)
    assert (read.outcome, read.counted) == (ReviewOutcome.OK, ReviewVerdict.PASS)


@pytest.mark.parametrize("verdict", [ReviewVerdict.FAIL, ReviewVerdict.ESCALATE])
def test_a_fail_or_escalate_citing_nothing_stands(verdict: ReviewVerdict) -> None:
    """Neither lets a run through, so neither needs a citation to be used."""
    read = read_answer(answer({"verdict": verdict.value, "evidence": []}), HELD)
    assert (read.outcome, read.counted) == (ReviewOutcome.OK, verdict)


@pytest.mark.parametrize(("payload", "outcome"), [
    (answer(content="It looks fine: pass."), ReviewOutcome.NO_CALL),
    (answer(content=""), ReviewOutcome.NO_CALL),
    (answer('{"verdict": "pass", "evid'), ReviewOutcome.MALFORMED_CALL),  # cut off at max_tokens
    (answer("[1, 2]"), ReviewOutcome.MALFORMED_CALL),
    (answer({"verdict": "pass", "evidence": []}, name="lookup"), ReviewOutcome.UNKNOWN_TOOL),
    (answer({"verdict": "pass", "evidence": []}, calls=2), ReviewOutcome.MULTIPLE_CALLS),
    (answer({"verdict": "maybe", "evidence": []}), ReviewOutcome.BAD_VERDICT),
    (answer({"evidence": []}), ReviewOutcome.BAD_VERDICT),
    (answer({"verdict": 1, "evidence": []}), ReviewOutcome.BAD_VERDICT),
    (answer({"verdict": "pass", "evidence": "toolu_1"}), ReviewOutcome.BAD_EVIDENCE),
    (answer({"verdict": "pass", "evidence": [1]}), ReviewOutcome.BAD_EVIDENCE),
    (answer({"verdict": "pass"}), ReviewOutcome.BAD_EVIDENCE),
    (answer({"verdict": "pass", "evidence": [], "why": "x"}), ReviewOutcome.BAD_EVIDENCE),
    ({"error": "no choices"}, ReviewOutcome.NOT_AN_ANSWER),
])
def test_a_malformed_answer_keeps_its_outcome_and_counts_as_escalate(payload: Any, outcome: ReviewOutcome) -> None:
    read = read_answer(payload, HELD)
    assert read.outcome is outcome and read.error
    assert read.counted is ReviewVerdict.ESCALATE


JSON = st.recursive(st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8),
                    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
                    max_leaves=8)
ARGUMENTS = st.text(max_size=200) | st.builds(json.dumps, st.fixed_dictionaries(
    {}, optional={"verdict": st.sampled_from(["pass", "fail", "escalate"]) | JSON,
                  "evidence": st.lists(st.sampled_from(sorted(HELD)) | st.text(max_size=8), max_size=3) | JSON}))


@given(ARGUMENTS)
def test_any_arguments_text_is_read_without_raising(arguments: str) -> None:
    read = read_answer(answer(arguments), HELD)
    assert read.outcome in set(ReviewOutcome) and (read.outcome is ReviewOutcome.OK) == (read.error is None)
    if read.outcome is ReviewOutcome.OK:
        assert read.counted is read.verdict and set(read.evidence) <= HELD
        assert read.evidence or read.verdict is not ReviewVerdict.PASS
    else:
        assert read.counted is ReviewVerdict.ESCALATE
