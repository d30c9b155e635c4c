"""The one bounded JSON reader: any bytes are a value or a `JsonFileError` naming file and line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import BaseModel

from core import jsonfile
from core.errors import WorkerTierError
from core.jsonfile import (
    MAX_DEPTH,
    JsonFileError,
    cut_torn_tail,
    loads_bounded,
    read_json,
    read_jsonl,
    read_jsonl_strict,
    read_jsonl_values,
)

DEEP = "[" * 100_000 + "]" * 100_000


class Row(BaseModel):
    id: str
    n: int = 0


def test_nesting_beyond_the_bound_is_refused_before_parsing() -> None:
    assert loads_bounded("[" * MAX_DEPTH + "]" * MAX_DEPTH, "x") is not None
    for text in (DEEP, '{"a":' * 5000 + "1" + "}" * 5000, "[" * (MAX_DEPTH + 1) + "]" * (MAX_DEPTH + 1)):
        with pytest.raises(JsonFileError, match=rf"^here:7: invalid JSON: arrays and objects are nested deeper than {MAX_DEPTH}"):
            loads_bounded(text, "here:7")
    # brackets inside strings (escaped quotes included) are text, not nesting
    assert loads_bounded(json.dumps({"a": "[" * 1000 + '\\"' + "{" * 1000}), "x")["a"].startswith("[[[")


@pytest.mark.parametrize(("data", "reason"), [
    ("1" * 5000, "invalid JSON: Exceeds the limit"),
    (b"\xff\xfe", "not UTF-8 text (byte 0)"),
    ("{not json", "invalid JSON: Expecting property name enclosed in double quotes (column 2)"),
    ("[1,\n2,]", "(line 2, column 3)"),
])
def test_what_python_raises_besides_json_errors_is_one_typed_error(data: str | bytes, reason: str) -> None:
    with pytest.raises(JsonFileError) as error:
        loads_bounded(data, "f.json")
    assert isinstance(error.value, WorkerTierError) and str(error.value).startswith("f.json: ")
    assert reason in str(error.value)


def test_every_bad_line_is_named_and_the_others_still_read(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(jsonfile, "MAX_LINE_BYTES", 250)
    path = tmp_path / "rows.jsonl"
    path.write_bytes(b'{"id": "a"}\n\n' + b'{"id": "' + b"x" * 300 + b'"}\n' + b'{"id": "\xff"}\n' + b"[" * 101 + b"]" * 101
                     + b'\n[1]\n{"id": 3}\n{"id": "b", "n": 2}')
    lines = list(read_jsonl(path, Row, "a row"))
    assert [(line.number, line.value) for line in lines if line.value] == [(1, Row(id="a")), (8, Row(id="b", n=2))]
    problems = {line.number: line.problems[0] for line in lines if line.value is None}
    assert problems == {3: "line longer than 250 bytes", 4: "not UTF-8 text (byte 8 of the line)",
                        5: f"invalid JSON: arrays and objects are nested deeper than {MAX_DEPTH} levels",
                        6: "a row must be a JSON object", 7: "field id: Input should be a valid string"}
    with pytest.raises(JsonFileError, match=r"rows.jsonl:3: line longer than 250 bytes"):
        read_jsonl_strict(path, Row)


def test_a_whole_file_is_bounded_too(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "run.json"
    path.write_text('{"id": "r", "n": "many"}')
    with pytest.raises(JsonFileError, match=r"run.json: field n: Input should be a valid integer"):
        read_json(path, Row)
    monkeypatch.setattr(jsonfile, "MAX_FILE_BYTES", 10)
    with pytest.raises(JsonFileError, match="larger than 10 bytes"):
        read_json(path, Row)
    with pytest.raises(JsonFileError, match=r"not a regular file \(a directory\)"):
        read_json(tmp_path, Row)
    with pytest.raises(JsonFileError, match="cannot be read: No such file"):
        read_json(tmp_path / "absent.json", Row)


@pytest.mark.parametrize(("content", "kept"), [(b'{"a": 1}\n{"a": 2', b'{"a": 1}\n'), (b'{"a"', b""),
                                               (b'{"a": 1}\n', b'{"a": 1}\n'), (b"", b"")])
def test_a_torn_last_line_is_cut(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, content: bytes, kept: bytes) -> None:
    monkeypatch.setattr(jsonfile, "_CHUNK", 3)  # the backwards scan crosses chunk borders
    path = tmp_path / "results.jsonl"
    path.write_bytes(content)
    cut_torn_tail(path)
    assert path.read_bytes() == kept


JSONISH = st.recursive(st.none() | st.booleans() | st.integers() | st.text(), lambda inner: st.lists(inner, max_size=3)
                       | st.dictionaries(st.text(max_size=5), inner, max_size=3), max_leaves=20)


@settings(max_examples=300, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.binary(max_size=300) | st.text(alphabet='[]{}"\\:,1a \n', max_size=300).map(str.encode)
       | JSONISH.map(lambda v: json.dumps(v).encode()))
def test_any_bytes_are_a_value_or_a_problem_per_line(tmp_path: Path, data: bytes) -> None:
    path = tmp_path / "any.jsonl"
    path.write_bytes(data)
    for line in read_jsonl_values(path):
        assert (line.value is None) == bool(line.problems)
    try:
        loads_bounded(data, "any")
    except JsonFileError as exc:
        assert str(exc).startswith("any: ")


@given(depth=st.integers(0, 2 * MAX_DEPTH), noise=st.text(alphabet='[]{}"\\', max_size=10),
       kind=st.sampled_from(["list", "dict"]))
def test_the_depth_bound_is_exact_and_ignores_brackets_in_strings(depth: int, noise: str, kind: str) -> None:
    value: object = noise
    for _ in range(depth):
        value = [value] if kind == "list" else {noise: value}
    text = json.dumps(value)
    if depth > MAX_DEPTH:
        with pytest.raises(JsonFileError, match="nested deeper"):
            loads_bounded(text, "x")
    else:
        assert loads_bounded(text, "x") == value
