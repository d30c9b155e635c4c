"""The near-duplicate rule (core/near_duplicates.py): what it compares, in which direction, and its
recall on planted near-copies and false flags on other decisions (tests/support/near_copies.py, seeded; the
figures are BENCHMARKS.md's)."""

from __future__ import annotations

from core.near_duplicates import NearDuplicates, state_text
from tests.support.near_copies import measure

TASK = "Look up invoice INV-7 for Globex and send the overdue reminder to their accounts payable team today."


def request(*turns: str, system: str = "You are the invoicing assistant.", call_id: str = "toolu_1") -> dict:
    return {"system": system, "messages": [
        {"role": "user", "content": turns[0]},
        {"role": "assistant", "content": [{"type": "tool_use", "id": call_id, "name": "lookup",
                                           "input": {"id": "INV-7"}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": call_id, "content": t}
                                     for t in turns[1:]]}]}


def test_the_state_is_the_conversation_not_the_instructions_ids_or_reminders() -> None:
    suite = request(TASK, "error: the invoice service timed out")
    copy = request(TASK + "<system-reminder>today is Monday, the workspace is large</system-reminder>",
                   "error: the invoice service timed out", system="Another agent's long system prompt " * 40,
                   call_id="toolu_other")
    assert state_text(suite).split() == state_text(copy).split()
    assert "lookup" in state_text(suite) and '"id": "INV-7"' in state_text(suite)  # the call and its arguments


def test_case_punctuation_and_whitespace_do_not_count() -> None:
    index = NearDuplicates([TASK])
    assert index.matches(TASK.upper().replace(" ", "\n\t ").replace("-", " - ")) == [0]


def test_the_share_is_of_the_suite_decisions_ngrams() -> None:
    index = NearDuplicates([TASK, TASK + " " + " ".join(f"word{i}" for i in range(60))])
    # a candidate holding the first decision whole, and far more besides, is its near-copy; it covers too
    # little of the longer one
    assert index.matches(TASK + " and then archive every paid invoice of the quarter") == [0]


def test_a_text_shorter_than_n_tokens_matches_only_its_exact_tokens() -> None:
    index = NearDuplicates(["Look up INV-7."])
    assert index.matches("look up inv 7") == [0]
    assert index.matches("look up inv 8") == [] and index.matches("") == []


def test_recall_on_planted_near_copies_and_false_flags_on_other_decisions() -> None:
    result = measure(seed=0)
    assert {kind: (t.found, t.planted) for kind, t in result.recall.items()} == {
        "id": (75, 84), "reword": (49, 84), "whitespace": (84, 84), "all": (38, 84)}
    # the three pairs flagged (each both ways) are the demo generator's rewordings of one state: the same call
    # on the same result, the user's sentence put another way
    assert (result.flagged, result.unrelated) == (6, 6972)
    assert sorted(result.false) == [(21, 70), (36, 45), (45, 36), (51, 83), (70, 21), (83, 51)]
