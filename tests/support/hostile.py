"""What a file from a user may hold, for the property tests of every reader: any bytes, JSON-ish
lines (valid, broken, deep, huge numbers, not UTF-8) and TOML-ish text."""

from __future__ import annotations

import json

from hypothesis import strategies as st

_VALUES = st.recursive(st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8),
                       lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner,
                                                                                   max_size=3), max_leaves=12)
_LINES = st.one_of(
    _VALUES.map(lambda v: json.dumps(v).encode()),
    st.just(b"[" * 5000 + b"]" * 5000), st.just(b'{"a": ' * 3000), st.just(b"1" * 5000), st.just(b'{"id": "\xff"}'),
    st.binary(max_size=40), st.text(alphabet='[]{}"\\:,1a =\n', max_size=60).map(str.encode),
)


def hostile_bytes(valid: list[bytes] | None = None) -> st.SearchStrategy[bytes]:
    """A file's content: lines from `valid` (examples of the real format) mixed with hostile ones."""
    line = _LINES if not valid else st.one_of(_LINES, st.sampled_from(valid))
    return st.one_of(st.binary(max_size=200), st.lists(line, max_size=5).map(b"\n".join))
