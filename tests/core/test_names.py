"""The one name type: what it admits, what it refuses, and that refusals never echo the value whole."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import BaseModel, ValidationError

from core.names import NAME_MAX_CHARS, BadNameError, Name, check_name, excerpt, is_name


class Holder(BaseModel):
    name: Name


@pytest.mark.parametrize("good", ["ws-a", "s-19", "sandbox:inv-refund-03", "recovery-v1", "a", "A.b_c:d-e",
                                  "x" * NAME_MAX_CHARS, "123e4567-e89b-12d3-a456-426614174000"])
def test_names_people_use_are_names(good: str) -> None:
    assert is_name(good) and check_name(good, "workspace") == good
    assert Holder(name=good).name == good


@pytest.mark.parametrize("bad", ["", "..", "../other-tenant", "a/b", ".hidden", "-flag", "ws a", "ws\n",
                                 "\ud800", "é", "x" * (NAME_MAX_CHARS + 1), "a\x00b"])
def test_paths_surrogates_and_long_values_are_not_names(bad: str) -> None:
    assert not is_name(bad)
    with pytest.raises(BadNameError, match="workspace must be a name"):
        check_name(bad, "workspace")
    with pytest.raises(ValidationError):
        Holder(name=bad)


@given(st.text())
def test_the_function_and_the_field_agree(value: str) -> None:
    try:
        Holder(name=value)
        accepted = True
    except ValidationError:
        accepted = False
    assert accepted == is_name(value)
    if accepted:
        assert "/" not in value and not value.startswith(".") and len(value) <= NAME_MAX_CHARS


@given(st.text(max_size=5000))
def test_an_excerpt_is_short_and_encodable(value: str) -> None:
    shown = excerpt(value)
    assert len(shown) <= 200
    shown.encode("utf-8")
    assert shown.isprintable()
