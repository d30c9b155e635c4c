"""What a non-object argument value is called in the error (the parser's malformed_call message), and the
edges of what is read: bytearrays, mappings that are not dicts, the canonical text form."""

from __future__ import annotations

from types import MappingProxyType

import pytest

from core.keyset import ArgumentsError, canonical_json, canonical_value, decode_arguments, key_set


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


def test_a_bytearray_is_read_as_utf_8_bytes() -> None:
    assert decode_arguments(bytearray(b'{"a": [1]}')) == {"a": [1]}
    with pytest.raises(ArgumentsError, match=r"not UTF-8 text \(byte 6\)"):
        decode_arguments(bytearray(b'{"a": \xff}'))


def test_any_mapping_has_a_key_set_not_only_a_dict() -> None:
    assert key_set(MappingProxyType({"a": {"b": 1}})) == {"a", "a.b"}


def test_the_canonical_form_keeps_text_as_utf_8_and_names_what_is_no_json_value() -> None:
    assert canonical_json({"city": "Zürich", "note": "東京"}) == '{"city":"Zürich","note":"東京"}'
    with pytest.raises(TypeError, match="^not a JSON value: set$"):
        canonical_value({"a": {1, 2}})
