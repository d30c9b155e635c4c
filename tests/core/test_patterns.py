"""Patterns from files run in linear time (RE2), and one RE2 cannot compile is refused when read."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from core.patterns import check_pattern, compile_pattern, search


def test_a_catastrophic_pattern_matches_in_linear_time() -> None:
    # Python's re needs about 2**34 steps here; RE2 one pass over the text.
    assert search(r"^(a+)+$", "a" * 34 + "!") is False
    assert search(r"^(a+)+$", "a" * 100_000) is True
    assert search(r"(x+x+)+y", "x" * 100_000) is False


@pytest.mark.parametrize(("pattern", "reason"), [
    (r"(a)\1", "invalid escape sequence"), (r"(?=a)", "invalid perl operator"), ("(", "missing )"),
    ("a{1000}{1000}", "bad repetition operator"), ("\ud800", "surrogates not allowed"),
])
def test_what_re2_cannot_compile_is_refused_with_its_reason(pattern: str, reason: str) -> None:
    with pytest.raises(ValueError, match="does not compile in RE2") as error:
        check_pattern(pattern)
    assert reason in str(error.value)


def test_case_and_unicode() -> None:
    assert search("refund(ed)? is issued", "The REFUND is issued", ignore_case=True)
    assert not search("refund(ed)? is issued", "The REFUND is issued")
    assert search(r"(?i)grüße", "GRÜSSE grüße") and search("a", "\ud800a")


@given(pattern=st.text(max_size=30), text=st.text(max_size=200), ignore_case=st.booleans())
def test_any_pattern_compiles_or_is_a_value_error_and_any_text_searches(pattern: str, text: str,
                                                                         ignore_case: bool) -> None:
    try:
        compile_pattern(pattern, ignore_case)
    except ValueError as exc:
        assert "does not compile in RE2" in str(exc)
        return
    assert search(pattern, text, ignore_case) in (True, False)
