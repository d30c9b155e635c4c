"""Redaction against the labelled corpus (tests/replay/privacy/data/redaction_corpus.jsonl): what a user relies on
when a suite leaves the tenant — every labelled value goes, every look-alike (ids, dates, amounts,
versions, numbers failing a check digit) stays byte-identical — and properties over texts built from it."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from replay.privacy.redact import PSEUDONYM, TYPES, Pseudonymizer, find
from tests.support.redaction_corpus import Case, load, score

CASES = load()
KEY_A, KEY_B = b"a" * 32, b"b" * 32


def test_the_corpus_is_large_and_spread():
    result = score(CASES, lambda text: [])
    assert sum(t.total for t in result.labelled.values()) >= 150
    assert all(result.labelled[kind].total >= 10 for kind in TYPES)  # and ADDRESS, which is not detected
    assert sum(t.total for t in result.lookalikes.values()) >= 100


def test_every_labelled_value_is_redacted_with_its_type():
    result = score(CASES, find)
    known = {item.value for case in CASES for item in case.values if item.missed}
    missed = {kind: [v for v in t.misses if v not in known] for kind, t in result.labelled.items()}
    assert missed == {kind: [] for kind in result.labelled}
    assert all(t.typed == t.hit for t in result.labelled.values())


def test_the_known_misses_are_still_missed():
    """Each `missed` mark in the corpus is a limitation the docs state; one that starts being found
    should lose its mark (and the docs their sentence)."""
    marked = [(case, item) for case in CASES for item in case.values if item.missed]
    assert marked and all(not any(f.start <= s and e <= f.end for f in find(case.text) for s, e in case.spans(item))
                          for case, item in marked)


def test_no_look_alike_and_no_character_outside_a_labelled_value_changes():
    result = score(CASES, find)
    assert {kind: t.misses for kind, t in result.lookalikes.items()} == {kind: [] for kind in result.lookalikes}
    assert result.outside_changed == 0


@pytest.mark.parametrize("case", [c for c in CASES if c.keep and not c.values], ids=lambda c: c.keep[0].value[:40])
def test_a_text_of_look_alikes_only_is_byte_identical(case: Case):
    assert Pseudonymizer(KEY_A).text(case.text) == case.text


# --- properties over texts composed from the corpus ---------------------------------------------

texts = st.sampled_from([c.text for c in CASES])
JOINERS = [" and ", ". Then ", "; see ", "\n", ", also "]  # a word between two pieces: no new number forms
composed = st.lists(texts, min_size=1, max_size=4).flatmap(
    lambda parts: st.lists(st.sampled_from(JOINERS), min_size=len(parts) - 1, max_size=len(parts) - 1).map(
        lambda joins: parts[0] + "".join(j + p for j, p in zip(joins, parts[1:], strict=True))))
# look-alikes in their context ("version 1.2.3.4": the bare 1.2.3.4 is an IP address)
lookalikes = st.lists(st.sampled_from([c.text for c in CASES if c.keep and not c.values]), min_size=1,
                      max_size=5).map(" and ".join)


@settings(max_examples=200, deadline=None)
@given(composed)
def test_redaction_is_idempotent(text):
    p = Pseudonymizer(KEY_A)
    once = p.text(text)
    assert p.text(once) == once and find(once) == []


@settings(max_examples=200, deadline=None)
@given(lookalikes)
def test_a_text_of_look_alikes_is_unchanged(text):
    assert Pseudonymizer(KEY_A).text(text) == text


@settings(max_examples=100, deadline=None)
@given(composed, st.binary(min_size=16, max_size=48), st.binary(min_size=16, max_size=48))
def test_pseudonyms_are_stable_per_workspace_key_and_differ_across_keys(text, key, other):
    first, again = Pseudonymizer(key).text(text), Pseudonymizer(key).text(text)
    assert first == again
    if key != other and PSEUDONYM.search(first):
        assert Pseudonymizer(other).text(text) != first


def test_the_same_value_gets_the_same_pseudonym_wherever_it_is_written():
    p = Pseudonymizer(KEY_A)
    card = "4111 1111 1111 1111"
    assert p.text(f"card {card}") == f"card {p.pseudonym('CARD', card)}"
    assert p.text(f"{card} was charged") == f"{p.pseudonym('CARD', card)} was charged"
    assert Pseudonymizer(KEY_B).pseudonym("CARD", card) != p.pseudonym("CARD", card)
