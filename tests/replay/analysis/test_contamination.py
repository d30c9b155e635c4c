"""The contamination check's matching (replay/analysis/contamination.py): which suite decisions a candidate's
training rows reach, by session, by request hash and by near-copy, against an oracle written from the rules'
definitions (the n-gram share counted directly, not through curation's index)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from core.near_duplicates import ngrams
from replay.analysis.contamination import (
    JudgedDecision,
    Overlap,
    SourceRow,
    contamination,
    corpus_session,
    rule_counts,
)
from tests.support.planted_overlap import measure

TASK = "look up invoice INV-7 for Globex and send the overdue reminder to their accounts payable team today"
OTHER = "archive every paid invoice of the last quarter and tell finance which customers still owe us money"


def decision(id: str, session: str, sha: str, text: str) -> JudgedDecision:
    return JudgedDecision(id=id, sessions=frozenset({session}), request_sha256=sha, text=text)


def row(example: int, session: str | None = None, sha: str | None = None, text: str = "") -> SourceRow:
    return SourceRow(example=example, decision=f"{session}.main.{example}", session=session, request_sha256=sha,
                     text=text)


SUITE = [decision("d1", "s1", "h1", TASK), decision("d2", "s1", "h2", f"{TASK} {OTHER}"),
         decision("d3", "s2", "h3", OTHER)]


def test_corpus_ids_name_their_session() -> None:
    assert corpus_session("0b9e-uuid.main.12") == "0b9e-uuid"
    assert corpus_session("0b9e-uuid.agent-a1b2.3") == "0b9e-uuid"
    assert corpus_session("cap-41") is None and corpus_session("d1") is None and corpus_session("s.main.x") is None


def test_a_row_of_a_session_reaches_every_decision_of_that_session_and_no_other() -> None:
    found = contamination(SUITE, [row(1, session="s1", text="nothing alike at all")])
    assert [(c.decision, c.rules, c.examples) for c in found] == [
        ("d1", [Overlap.SESSION], [1]), ("d2", [Overlap.SESSION], [1])]


def test_an_identical_request_in_another_session_is_reached_by_its_hash() -> None:
    found = contamination(SUITE, [row(4, session="elsewhere", sha="h3", text="unrelated words here")])
    assert [(c.decision, c.rules) for c in found] == [("d3", [Overlap.REQUEST])]


def test_a_near_copy_in_another_session_is_reached_by_the_ngram_rule() -> None:
    copy = TASK.replace("today", "tomorrow").upper()  # 9 of d1's 10 word 8-grams
    found = contamination(SUITE, [row(2, session="elsewhere", text=copy)])
    assert [(c.decision, c.rules) for c in found] == [("d1", [Overlap.NEAR_DUPLICATE])]
    # the longer d2 shares those n-grams too, but the copy covers less than half of its own
    assert contamination(SUITE, [row(2, text=copy)], threshold=1.0) == []  # a threshold of 1 turns the rule off


def test_every_rule_and_row_that_reaches_a_decision_is_named_once() -> None:
    found = contamination(SUITE, [row(3, session="s2"), row(1, sha="h3"), row(7, text=OTHER), row(3, session="s2")])
    assert [(c.decision, c.rules, c.examples) for c in found] == [
        ("d3", [Overlap.SESSION, Overlap.REQUEST, Overlap.NEAR_DUPLICATE], [1, 3, 7])]
    assert rule_counts(found) == {"session": 1, "request": 1, "near_duplicate": 1}


def test_no_rows_reach_nothing() -> None:
    assert contamination(SUITE, []) == [] and rule_counts([]) == {"session": 0, "request": 0, "near_duplicate": 0}


# ── properties, against an oracle written from the definitions ────────────

WORDS = st.sampled_from(["invoice", "send", "globex", "inv", "7", "8", "reminder", "the", "to", "paid"])
TEXT = st.lists(WORDS, max_size=14).map(" ".join)
KEY = st.sampled_from(["a", "b", "c"])


@st.composite
def cases(draw: st.DrawFn) -> tuple[list[JudgedDecision], list[SourceRow], int, float]:
    decisions = [JudgedDecision(id=f"d{i}", sessions=frozenset(draw(st.sets(KEY, max_size=2))),
                                request_sha256=draw(KEY), text=draw(TEXT))
                 for i in range(draw(st.integers(0, 5)))]
    rows = [SourceRow(example=i + 1, decision=f"x{i}", session=draw(st.none() | KEY),
                      request_sha256=draw(st.none() | KEY), text=draw(TEXT))
            for i in range(draw(st.integers(0, 5)))]
    return decisions, rows, draw(st.integers(1, 4)), draw(st.sampled_from([0.0, 0.3, 0.5, 0.99, 1.0]))


def oracle(decisions: list[JudgedDecision], rows: list[SourceRow], n: int,
           threshold: float) -> dict[str, dict[Overlap, set[int]]]:
    out: dict[str, dict[Overlap, set[int]]] = {}
    for d in decisions:
        grams = ngrams(d.text, n)
        for r in rows:
            rules = [rule for rule, hit in (
                (Overlap.SESSION, r.session is not None and r.session in d.sessions),
                (Overlap.REQUEST, r.request_sha256 == d.request_sha256),
                (Overlap.NEAR_DUPLICATE, len(grams & ngrams(r.text, n)) > threshold * len(grams))) if hit]
            for rule in rules:
                out.setdefault(d.id, {}).setdefault(rule, set()).add(r.example)
    return out


@settings(max_examples=300, deadline=None)
@given(cases())
def test_the_decisions_reached_are_the_oracles(case: tuple[list[JudgedDecision], list[SourceRow], int, float]) -> None:
    decisions, rows, n, threshold = case
    expected = oracle(decisions, rows, n, threshold)
    found = contamination(decisions, rows, n, threshold)
    assert [c.decision for c in found] == [d.id for d in decisions if d.id in expected]  # in the suite's order
    for c in found:
        assert set(c.rules) == set(expected[c.decision])
        assert c.examples == sorted(set().union(*expected[c.decision].values()))


@settings(max_examples=200, deadline=None)
@given(cases(), st.lists(TEXT, max_size=3))
def test_more_training_rows_never_reach_fewer_decisions(
        case: tuple[list[JudgedDecision], list[SourceRow], int, float], more: list[str]) -> None:
    decisions, rows, n, threshold = case
    extra = [SourceRow(example=100 + i, decision="y", session=None, request_sha256=None, text=t)
             for i, t in enumerate(more)]
    before = {c.decision for c in contamination(decisions, rows, n, threshold)}
    assert before <= {c.decision for c in contamination(decisions, rows + extra, n, threshold)}


@settings(max_examples=200, deadline=None)
@given(cases())
def test_a_verbatim_copy_of_a_decision_always_reaches_it_below_a_threshold_of_one(
        case: tuple[list[JudgedDecision], list[SourceRow], int, float]) -> None:
    decisions, _, n, threshold = case
    copies = [SourceRow(example=i + 1, decision="c", session=None, request_sha256=None, text=d.text.upper())
              for i, d in enumerate(decisions)]
    reached = {c.decision for c in contamination(decisions, copies, n, min(threshold, 0.99))}
    assert reached >= {d.id for d in decisions if d.text}


def test_recall_on_planted_rows_of_known_overlap() -> None:
    """BENCHMARKS.md's table (seed 0). A row holding every word of a decision always reaches it; one holding a
    contiguous half or less never can: k of a decision's L words hold k - 7 of its L - 7 word 8-grams, never more
    than half when k <= L / 2. Between, short decisions fall first (their n-gram share is below their word share)."""
    rows = measure(seed=0)
    assert [(r.overlap, r.found) for r in rows] == [
        (1.0, 84), (0.9, 78), (0.8, 71), (0.7, 67), (0.6, 30), (0.5, 0), (0.4, 0), (0.3, 0)]
    assert all(r.planted == 84 and r.unrelated == 6972 for r in rows)
    # other-task decisions a planted row reaches: the demo generator's rewordings of one state (as curation's own
    # benchmark finds), never more than one in a thousand
    assert [r.flagged for r in rows] == [6, 4, 1, 3, 0, 0, 0, 0]
