"""Differential test: core/toolvalues.py types a parameter's text as vLLM's own functions do.

The oracle is the installed vLLM's `extract_types_from_schema` and `coerce_to_schema_type`
(`vllm/tool_parsers/utils.py`), which its Qwen3 XML parser applies to every text value of a listed
parameter (`ParserEngine._coerce_value`). Called directly, without a tokenizer or an engine, so the
differential is cheap enough to run under `make mutate`. Pinned to the vLLM the project pins: another
version may type differently, so the test skips and says so.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from core.toolvalues import NOT_A_VALUE, coerce, schema_types, typed_value

VLLM_VERSION = "0.32.0"
vllm = pytest.importorskip("vllm")
if vllm.__version__ != VLLM_VERSION:
    pytest.skip(f"the oracle is vLLM {VLLM_VERSION}'s value typing; vLLM {vllm.__version__} is installed",
                allow_module_level=True)

from vllm.tool_parsers.utils import _TYPE_ALIASES, coerce_to_schema_type, extract_types_from_schema  # noqa: E402

BASE_TYPES = ["string", "integer", "number", "boolean", "null", "object", "array"]
ALIASES = ["str", "text", "varchar", "char", "enum", "int", "int32", "int64", "uint", "uint32", "uint64", "long",
           "short", "unsigned", "float", "float32", "float64", "double", "bool", "dict", "arr", "list", "sequence"]
# Texts at each type's edge: case and blank space, 1/0, whole floats, non-finite numbers (bare and
# nested), Python literals, unicode digits (int() reads them), underscores, empty text.
EDGE_TEXTS = ["null", "NULL", " null", "None", "1", "0", "-0", "2", " 7 ", "1.5", "2.0", "1e3", "1e400", "-1e400",
              "inf", "-Infinity", "nan", "NaN", "true", " TRUE ", "False", "yes", "[1, 2]", "[1e999]", '{"a": 1}',
              '{"a": NaN}', "{'a': 1}", '"quoted"', "abc", "", " ", "\n", "1_000", "٣", "0x10", "1.", ".5", "[]",
              "{}", "[1, [2, {\"b\": null}]]", "12345678901234567890", "+3", "TRUE1"]


def type_names() -> st.SearchStrategy[str]:
    """A schema `type` word as a tool author might write it: any base type or alias, any case,
    blank space around it, or a word no table knows."""
    word = st.sampled_from(BASE_TYPES + ALIASES + ["Integer", "datetime", ""])
    return st.builds(lambda w, upper, pad: (w.upper() if upper else w).center(len(w) + pad),
                     word, st.booleans(), st.integers(0, 2))


def enum_values() -> st.SearchStrategy[Any]:
    return st.one_of(st.none(), st.booleans(), st.integers(-3, 3), st.floats(allow_nan=False, allow_infinity=False),
                     st.text(max_size=3), st.just([1]), st.just({"a": 1}))


def schemas() -> st.SearchStrategy[Any]:
    leaf = st.one_of(
        st.fixed_dictionaries({"type": type_names()}),
        st.fixed_dictionaries({"type": st.lists(st.one_of(type_names(), st.integers()), max_size=3)}),
        st.fixed_dictionaries({"enum": st.lists(enum_values(), max_size=4)}),
        st.fixed_dictionaries({"type": type_names(), "enum": st.lists(enum_values(), max_size=3)}),
        st.just({}), st.just({"type": None}), st.just({"enum": "not a list"}), st.just("not a schema"), st.none(),
    )
    return st.recursive(leaf, lambda inner: st.dictionaries(
        st.sampled_from(["anyOf", "oneOf", "allOf", "type"]), st.lists(inner, max_size=3), min_size=1, max_size=2),
        max_leaves=6)


def texts() -> st.SearchStrategy[str]:
    return st.one_of(st.sampled_from(EDGE_TEXTS), st.text(max_size=8),
                     st.integers().map(str), st.floats().map(repr), st.booleans().map(str))


def same(ours: Any, theirs: Any) -> bool:
    """Equal as a tool's arguments are: same JSON text and same Python type (1, 1.0 and True differ)."""
    return type(ours) is type(theirs) and json.dumps(ours, sort_keys=True) == json.dumps(theirs, sort_keys=True)


def vllm_typed(text: str, schema: Any) -> Any:
    """What vLLM's Qwen3 XML parser makes of a listed parameter's text (`ParserEngine._coerce_value`)."""
    return coerce_to_schema_type(text, extract_types_from_schema(schema))


@settings(max_examples=300, deadline=None)
@given(text=texts(), schema=schemas())
@example(text="1", schema={"type": "boolean"})
@example(text="1", schema={"type": ["boolean", "integer"]})
@example(text="1e400", schema={"type": "number"})
@example(text="[1e999]", schema={"type": "array"})
@example(text="5", schema={"type": "object"})
@example(text="null", schema={"anyOf": [{"type": "string"}, {"type": "null"}]})
@example(text=" TRUE ", schema={"type": "BOOL"})
@example(text="2.0", schema={"enum": [1.5, 2.5]})
@example(text="x", schema={"type": "integer"})
@example(text='{"a": 1}', schema={"type": ["object", "string"]})  # object is tried before string
@example(text="[1]", schema={"type": "integer", "enum": "ab"})  # an enum that is not a list adds no type
def test_a_listed_parameter_is_typed_as_vllm_types_it(text: str, schema: Any) -> None:
    ours = typed_value(text, {"p": schema}, "p")
    theirs = vllm_typed(text, schema)
    assert same(ours, theirs), (text, schema, ours, theirs)


@settings(max_examples=150, deadline=None)
@given(schema=schemas())
@example(schema={"type": "integer", "enum": "ab"})
@example(schema={"type": "number", "enum": 5})
def test_schema_types_are_vllms_types_under_its_aliases(schema: Any) -> None:
    # vLLM resolves aliases when it coerces (`_TYPE_ALIASES`), not when it extracts the types.
    theirs = {_TYPE_ALIASES.get(t.strip().lower(), t.strip().lower()) for t in extract_types_from_schema(schema)}
    assert schema_types(schema) == theirs


@pytest.mark.parametrize("kind", ["null", "integer", "number", "boolean", "object", "array"])
@pytest.mark.parametrize("text", EDGE_TEXTS)
def test_coerce_is_vllms_coercion_to_one_type_or_not_a_value(kind: str, text: str) -> None:
    theirs = coerce_to_schema_type(text, [kind])
    ours = coerce(text, kind)
    if ours is not NOT_A_VALUE:
        assert same(ours, theirs)
    # Not a value of this type: both fall through to the same JSON-or-text reading.
    assert same(typed_value(text, {"p": {"type": kind}}, "p"), theirs)

