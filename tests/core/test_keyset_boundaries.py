"""What a non-object argument value is called in the error (the parser's malformed_call message)."""

from __future__ import annotations

import pytest

from core.keyset import ArgumentsError, decode_arguments, key_set


@pytest.mark.parametrize("raw, name", [
    ("[1]", "array"), ('"x"', "string"), ("true", "boolean"), ("3", "number"), ("2.5", "number"), ("null", "null"),
])
def test_a_json_value_that_is_no_object_is_named_by_its_json_type(raw: str, name: str) -> None:
    with pytest.raises(ArgumentsError, match=f"^arguments must be a JSON object, got {name}$"):
        decode_arguments(raw)


@pytest.mark.parametrize("value, name", [([1], "array"), (True, "boolean"), (3, "number"), (None, "null"),
                                         ((1,), "tuple"), ({1}, "set")])
def test_a_python_value_that_is_no_object_is_named_too(value: object, name: str) -> None:
    with pytest.raises(ArgumentsError, match=f"^arguments must be a JSON object, got {name}$"):
        decode_arguments(value)
    with pytest.raises(ArgumentsError, match=f"got {name}$"):
        key_set(value)  # type: ignore[arg-type]


def test_bytes_are_decoded_like_text() -> None:
    assert decode_arguments(b'{"a": 1}') == {"a": 1} and decode_arguments(bytearray(b' ')) == {}
    assert decode_arguments({"a": 1}) == {"a": 1}
