"""Text parameter values typed by the tool's schema, as vLLM's tool parsers type them.

Qwen3-Coder's `<parameter=key>value</parameter>` carries every value as text; the parser gives it
the type the offered schema names (`coerce_to_schema_type` in vLLM): integers, numbers, booleans,
null, and objects or arrays read as JSON (vLLM 0.32 reads no Python literal: `{'a': 1}` stays text).
A value that fits none of its types stays text, or is JSON when it parses as JSON. Split from
`core/toolcalls.py`, which reads the call syntax; this module knows only values and schemas.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from core.jsonfile import parse_problem

NOT_A_VALUE = object()
"""What `coerce` returns when the text is not a value of the asked type."""

# vLLM's type aliases (tool_parsers/utils.py `_TYPE_ALIASES`).
_TYPE_ALIASES = {
    "str": "string", "text": "string", "varchar": "string", "char": "string", "enum": "string",
    "int": "integer", "int32": "integer", "int64": "integer", "uint": "integer", "uint32": "integer",
    "uint64": "integer", "long": "integer", "short": "integer", "unsigned": "integer",
    "float": "number", "float32": "number", "float64": "number", "double": "number",
    "bool": "boolean", "dict": "object", "arr": "array", "list": "array", "sequence": "array",
}


def typed_value(text: str, properties: Mapping[str, Any] | None, key: str) -> Any:
    """A parameter value typed as vLLM types it (`coerce_to_schema_type`); without schemas, JSON
    when it parses as JSON, else the text."""
    if properties is None:
        return _json_or_none(text, text)
    if key not in properties:
        return text
    types = schema_types(properties[key])
    for kind in ("null", "integer", "number", "boolean", "object", "array", "string"):
        if kind not in types:
            continue
        if kind == "string":
            return text
        value = coerce(text, kind)
        if value is not NOT_A_VALUE:
            return value
    return _json_or_none(text, text)


def coerce(text: str, kind: str) -> Any:
    """`text` as one JSON Schema type, or `NOT_A_VALUE`."""
    if kind == "null":
        return None if text.lower() == "null" else NOT_A_VALUE
    if kind == "integer":
        try:
            return int(text)
        except ValueError:
            return NOT_A_VALUE
    if kind == "number":
        try:
            number = float(text)
        except ValueError:
            return NOT_A_VALUE
        if not math.isfinite(number):
            return NOT_A_VALUE
        return int(number) if number == int(number) else number
    if kind == "boolean":
        word = text.strip().lower()
        return True if word in ("true", "1") else False if word in ("false", "0") else NOT_A_VALUE
    return _json_or_none(text, NOT_A_VALUE)


def _json_or_none(text: str, otherwise: Any) -> Any:
    value, problem = parse_problem(text)
    return otherwise if problem is not None or not _is_json(value) else value


def _is_json(value: Any) -> bool:
    """A value JSON can carry: only finite numbers (`json.loads` also reads `NaN` and `1e999`)."""
    if isinstance(value, float):
        return math.isfinite(value)
    if value is None or isinstance(value, (str, int, bool)):
        return True
    if isinstance(value, list):
        return all(_is_json(v) for v in value)
    if isinstance(value, dict):
        return all(isinstance(k, str) and _is_json(v) for k, v in value.items())
    return False


def schema_types(schema: Any) -> set[str]:
    """The JSON Schema types a property allows (`type`, `enum`, `anyOf`/`oneOf`/`allOf`), as
    vLLM's `extract_types_from_schema`; `string` when none is given."""
    if not isinstance(schema, Mapping):
        return {"string"}
    types: set[str] = set()
    declared = schema.get("type")
    for kind in [declared] if isinstance(declared, str) else declared if isinstance(declared, list) else []:
        if isinstance(kind, str):
            types.add(_TYPE_ALIASES.get(kind.strip().lower(), kind.strip().lower()))
    for value in schema.get("enum") or [] if isinstance(schema.get("enum"), list) else []:
        types.add(_json_type(value))
    for field in ("anyOf", "oneOf", "allOf"):
        choices = schema.get(field)
        if isinstance(choices, list):
            for choice in choices:
                types |= schema_types(choice)
    return types or {"string"}


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, list):
        return "array"
    if isinstance(value, dict):
        return "object"
    return "string"
