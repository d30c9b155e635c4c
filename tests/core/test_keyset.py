"""Key sets (DESIGN §3) and canonical argument values."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from core.keyset import (
    LIST,
    ArgumentsError,
    canonical_equal,
    canonical_json,
    decode_arguments,
    join_path,
    key_set,
    missing_parents,
    sorted_key_set,
    split_path,
)


def test_design_example() -> None:
    args = {"a": 1, "b": {"c": 2, "d": {"e": 3}}, "f": [{"g": 1}, {"h": 2}], "k": {}}
    assert key_set(args) == {"a", "b", "b.c", "b.d", "b.d.e", "f", "f[].g", "f[].h", "k"}


def test_lists_of_scalars_and_empty_containers_give_only_their_own_path() -> None:
    assert key_set({"tags": ["x", "y"], "empty": [], "obj": {}, "n": None}) == {"tags", "empty", "obj", "n"}


def test_list_elements_union_and_mixed_lists() -> None:
    args = {"lines": [{"description": "a", "tax_code": "V"}, {"description": "b", "quantity": 1}, 3, "x"]}
    assert key_set(args) == {"lines", "lines[].description", "lines[].tax_code", "lines[].quantity"}


def test_nested_lists_of_objects_use_one_marker_per_level() -> None:
    args = {"m": [[{"x": 1}], [{"y": {"z": 2}}], []]}
    assert key_set(args) == {"m", "m[][].x", "m[][].y", "m[][].y.z"}


def test_objects_inside_list_elements_nest() -> None:
    args = {"to": [{"email": "a@b", "meta": {"vip": True}}]}
    assert key_set(args) == {"to", "to[].email", "to[].meta", "to[].meta.vip"}


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        ({"a.b": 1}, {"a\\.b"}),
        ({"a": {"b": 1}}, {"a", "a.b"}),
        ({"f[]": {"g": 1}}, {"f\\[]", "f\\[].g"}),
        ({"f": [{"g": 1}]}, {"f", "f[].g"}),
        ({"back\\slash": 1}, {"back\\\\slash"}),
        ({"x]": 1}, {"x]"}),
    ],
)
def test_special_characters_are_escaped(args: dict[str, Any], expected: set[str]) -> None:
    assert key_set(args) == expected


def test_json_string_is_decoded_first() -> None:
    assert key_set('{"b": {"c": 1}}') == {"b", "b.c"}
    assert sorted_key_set('{"z": 1, "a": [{"q": 2}]}') == ["a", "a[].q", "z"]


@pytest.mark.parametrize("raw", ["[1, 2]", "3", "null", '"text"', "[]"])
def test_non_object_arguments_are_a_parse_error(raw: str) -> None:
    with pytest.raises(ArgumentsError, match="must be a JSON object"):
        decode_arguments(raw)


def test_invalid_json_is_a_parse_error() -> None:
    with pytest.raises(ArgumentsError, match="not valid JSON"):
        key_set('{"a": 1')


def test_blank_argument_string_means_no_arguments() -> None:
    assert decode_arguments("") == {}
    assert decode_arguments("  ") == {}


def test_non_object_value_is_a_parse_error() -> None:
    with pytest.raises(ArgumentsError):
        decode_arguments([{"a": 1}])


def test_canonical_equality() -> None:
    assert canonical_equal({"a": 1, "b": [1.0, {"c": 2}]}, {"b": [1, {"c": 2.0}], "a": 1.0})
    assert not canonical_equal({"a": 1}, {"a": 1.5})
    assert not canonical_equal({"a": True}, {"a": 1})
    assert not canonical_equal({"a": [1, 2]}, {"a": [2, 1]})
    assert not canonical_equal({"a": "1"}, {"a": 1})
    assert canonical_json({"b": 1, "a": 2.0}) == '{"a":2,"b":1}'


def test_missing_parents() -> None:
    assert missing_parents(["a", "a.b", "f", "f[].g", "m", "m[][].x"]) == []
    assert missing_parents(["a.b", "f[].g"]) == ["a.b", "f[].g"]
    assert missing_parents(["a", "a.b.c"]) == ["a.b.c"]  # its parent is a.b, not a


@pytest.mark.parametrize("bad, why", [
    ("a\\", "ends with a lone backslash"), ("a[b", ": unescaped '[' must be '[]'"),
    ("a[]b", ": expected '.' or '[]' after '[]'"), ("a[]\\x", ": a key must follow '.' after '[]'"),
])
def test_split_path_rejects_paths_the_grammar_cannot_produce_saying_why(bad: str, why: str) -> None:
    with pytest.raises(ValueError, match=f"^path {re.escape(repr(bad))}:? {re.escape(why.lstrip(': '))}$"):
        split_path(bad)


# --- properties ------------------------------------------------------------------------

KEYS = st.text(alphabet="ab.[]\\ ", max_size=4)
JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-5, 5) | st.text(alphabet="xy", max_size=2),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(KEYS, inner, max_size=3),
    max_leaves=12,
)
OBJECTS = st.dictionaries(KEYS, JSON, max_size=4)
STEPS = st.tuples(KEYS).flatmap(
    lambda head: st.lists(st.one_of(KEYS, st.just(LIST)), max_size=4).map(lambda tail: (*head, *tail))
)


def _tuple_paths(obj: dict[str, Any], prefix: tuple = ()) -> set[tuple]:
    """Independent reference: paths as tuples, no string encoding involved."""
    out: set[tuple] = set()

    def value(v: Any, path: tuple) -> None:
        if isinstance(v, dict):
            for k, child in v.items():
                out.add((*path, k))
                value(child, (*path, k))
        elif isinstance(v, list):
            for element in v:
                value(element, (*path, None))

    value(obj, prefix)
    return out


def _reversed_keys(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _reversed_keys(value[k]) for k in reversed(list(value))}
    if isinstance(value, list):
        return [_reversed_keys(v) for v in value]
    return value


def _floats(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _floats(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_floats(v) for v in value]
    if isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    return value


@given(OBJECTS)
def test_key_set_matches_tuple_paths_without_collisions(obj: dict[str, Any]) -> None:
    keys = key_set(obj)
    decoded = {split_path(k) for k in keys}
    assert decoded == _tuple_paths(obj)
    assert len(decoded) == len(keys)


@given(OBJECTS)
def test_every_key_has_its_parent(obj: dict[str, Any]) -> None:
    assert missing_parents(key_set(obj)) == []


@given(OBJECTS)
def test_key_set_ignores_key_order_and_string_form(obj: dict[str, Any]) -> None:
    assert key_set(_reversed_keys(obj)) == key_set(obj)
    assert key_set(json.dumps(obj)) == key_set(obj)


@given(STEPS)
def test_paths_round_trip(steps: tuple) -> None:
    assert split_path(join_path(steps)) == steps


@given(STEPS, STEPS)
def test_distinct_steps_never_share_a_path(a: tuple, b: tuple) -> None:
    assert (join_path(a) == join_path(b)) == (a == b)


@given(OBJECTS)
def test_canonical_form_ignores_key_order_and_int_float(obj: dict[str, Any]) -> None:
    assert canonical_equal(obj, _reversed_keys(_floats(obj)))
