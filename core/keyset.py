"""Key sets and canonical values of tool-call arguments (DESIGN §3).

The key set is what joint correctness compares: the path-qualified keys of an arguments
object, independent of the values. `{"a":1,"b":{"c":2},"f":[{"g":1},{"h":2}]}` has the key
set `{a, b, b.c, f, f[].g, f[].h}`.

Path grammar (one path per key):

* a key is written with `\\`, `.` and `[` escaped by a preceding `\\`;
* `parent.child` for an object member, `name[]` for "an element of the list at name";
  a list of lists of objects gives `m[][].x` (one `[]` per list level);
* list elements that are objects contribute their keys (union over the elements); scalar
  elements, empty lists and empty objects contribute nothing beyond their own path.

Paths under `[]` are only ever emitted for object members, so `f[]` itself is never in a
key set: the list contributes `f` and its objects' members contribute `f[].key`.
Because the three special characters are escaped, a key that contains `.` or `[` never
collides with a nested path (`split_path` inverts `join_path`).
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any

from core.errors import WorkerTierError
from core.jsonfile import parse_problem

# A path step: a (unescaped) key, or LIST for "an element of the list".
LIST = None
PathStep = str | None

_SPECIAL = ("\\", ".", "[")


class ArgumentsError(WorkerTierError, ValueError):
    """Arguments that cannot be scored: not valid JSON, or not a JSON object.

    The tool-call parser turns this into a `malformed_call` outcome with the message.
    """


def decode_arguments(raw: Any) -> dict[str, Any]:
    """Return the arguments object; a JSON string is decoded first.

    An empty or blank string means "no arguments" (`{}`): several servers send `""` for a
    call to a tool without parameters.
    """
    value = raw
    if isinstance(raw, (str, bytes, bytearray)):
        if not raw.strip():
            return {}
        value, problem = parse_problem(bytes(raw) if isinstance(raw, bytearray) else raw)
        if problem is not None:
            raise ArgumentsError(f"arguments are not valid JSON: {problem}")
    if not isinstance(value, dict):
        raise ArgumentsError(f"arguments must be a JSON object, got {_json_type(value)}")
    return value


def escape_key(key: str) -> str:
    """Escape `\\`, `.` and `[` so the key reads as one path step."""
    for char in _SPECIAL:
        key = key.replace(char, "\\" + char)
    return key


def join_path(steps: Sequence[PathStep]) -> str:
    """Write path steps (keys and `LIST`) in the path grammar."""
    out = ""
    for i, step in enumerate(steps):
        if step is LIST:
            out += "[]"
        else:
            out += ("." if i else "") + escape_key(step)
    return out


def split_path(path: str) -> tuple[PathStep, ...]:
    """Read a path back into its steps; raises ValueError on a path the grammar cannot produce."""
    steps: list[PathStep] = []
    current: list[str] = []
    in_key = True  # a key step is open (possibly empty)
    i = 0
    while i < len(path):
        char = path[i]
        if char == "\\":
            if i + 1 == len(path):
                raise ValueError(f"path {path!r} ends with a lone backslash")
            if not in_key:
                raise ValueError(f"path {path!r}: a key must follow '.' after '[]'")
            current.append(path[i + 1])
            i += 2
            continue
        if char == "[":
            if path[i + 1 : i + 2] != "]":
                raise ValueError(f"path {path!r}: unescaped '[' must be '[]'")
            if in_key:
                steps.append("".join(current))
                current, in_key = [], False
            steps.append(LIST)
            i += 2
            continue
        if char == ".":
            if in_key:
                steps.append("".join(current))
                current = []
            in_key = True
            i += 1
            continue
        if not in_key:
            raise ValueError(f"path {path!r}: expected '.' or '[]' after '[]'")
        current.append(char)
        i += 1
    if in_key:
        steps.append("".join(current))
    return tuple(steps)


def key_set(arguments: Mapping[str, Any] | str) -> frozenset[str]:
    """The path-qualified key set of an arguments object (or its JSON string)."""
    obj = decode_arguments(arguments) if isinstance(arguments, str) else arguments
    if not isinstance(obj, Mapping):
        raise ArgumentsError(f"arguments must be a JSON object, got {_json_type(obj)}")
    return frozenset(join_path(steps) for steps in _object_paths(obj, ()))


def sorted_key_set(arguments: Mapping[str, Any] | str) -> list[str]:
    """`key_set` as a sorted list, the form stored in records."""
    return sorted(key_set(arguments))


def missing_parents(keys: Iterable[str]) -> list[str]:
    """Keys whose parent object path is absent: a real key set has none.

    Raises ValueError for a key the path grammar cannot produce.
    """
    present = set(keys)
    missing = []
    for key in sorted(present):
        steps = split_path(key)
        parent = list(steps[:-1])
        while parent and parent[-1] is LIST:
            parent.pop()
        if parent and join_path(parent) not in present:
            missing.append(key)
    return missing


def canonical_value(value: Any) -> Any:
    """JSON value with numbers normalised (1 == 1.0) and tuples as lists; key order is kept
    as given but does not matter to `canonical_json`."""
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return value
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        if math.isfinite(value) and value.is_integer():
            return int(value)
        return value
    if isinstance(value, Mapping):
        return {str(k): canonical_value(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [canonical_value(v) for v in value]
    raise TypeError(f"not a JSON value: {type(value).__name__}")


def canonical_json(value: Any) -> str:
    """One string per JSON value up to key order and 1 vs 1.0: the "exact repeat" identity."""
    return json.dumps(canonical_value(value), sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def canonical_equal(a: Any, b: Any) -> bool:
    """Equal as JSON values (key order and number spelling aside)."""
    return canonical_json(a) == canonical_json(b)


def _object_paths(obj: Mapping[str, Any], prefix: tuple[PathStep, ...]) -> Iterator[tuple[PathStep, ...]]:
    for key, value in obj.items():
        path = (*prefix, str(key))
        yield path
        yield from _value_paths(value, path)


def _value_paths(value: Any, path: tuple[PathStep, ...]) -> Iterator[tuple[PathStep, ...]]:
    if isinstance(value, Mapping):
        yield from _object_paths(value, path)
    elif isinstance(value, (list, tuple)):
        for element in value:
            yield from _value_paths(element, (*path, LIST))


def _json_type(value: Any) -> str:
    names = {dict: "object", list: "array", str: "string", bool: "boolean", int: "number", float: "number"}
    if value is None:
        return "null"
    return names.get(type(value), type(value).__name__)
