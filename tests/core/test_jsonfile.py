"""The one bounded JSON reader: any bytes are a value or a `JsonFileError` naming file and line."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import TypedDict

import msgspec
import pytest
from hypothesis import HealthCheck, example, given, settings
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


# --- msgspec first, the standard library for what it refuses: the same values and the same reasons ---------------

def standard_only(data: str | bytes) -> tuple[object, str | None]:
    """`parse_problem` as it was before msgspec: `json.loads` alone, within the same bounds."""
    if isinstance(data, bytes):
        if len(data) > jsonfile.MAX_FILE_BYTES:
            return None, f"larger than {jsonfile.MAX_FILE_BYTES} bytes"
        try:
            data = data.decode("utf-8")
        except UnicodeDecodeError as exc:
            return None, f"not UTF-8 text (byte {exc.start})"
    if jsonfile.too_deep(data):
        return None, f"invalid JSON: arrays and objects are nested deeper than {MAX_DEPTH} levels"
    try:
        return json.loads(data), None
    except json.JSONDecodeError as exc:
        at = f"line {exc.lineno}, column {exc.colno}" if exc.lineno > 1 else f"column {exc.colno}"
        return None, f"invalid JSON: {exc.msg} ({at})"
    except (ValueError, RecursionError, MemoryError) as exc:
        return None, f"invalid JSON: {str(exc)[:200]}"


def same(a: object, b: object) -> bool:
    """Equal and of the same types all the way down (`1`, `1.0` and `True` differ; so do `0.0` and `-0.0`),
    keys in the same order; NaN is NaN."""
    if type(a) is not type(b):
        return False
    if isinstance(a, float) and isinstance(b, float):
        return (a != a and b != b) or (a == b and math.copysign(1, a) == math.copysign(1, b))
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict) and isinstance(b, dict):
        return list(a) == list(b) and all(same(a[k], b[k]) for k in a)
    return a == b


ANY_TEXT = st.text(st.characters(exclude_categories=()), max_size=12)  # lone surrogates too
NUMBERS = st.integers() | st.integers(-(10**80), 10**80) | st.floats() | st.sampled_from([2**63, -(2**63) - 1, 2**64])
VALUES = st.recursive(st.none() | st.booleans() | NUMBERS | ANY_TEXT,
                      lambda inner: st.lists(inner, max_size=4) | st.dictionaries(ANY_TEXT, inner, max_size=4),
                      max_leaves=30)


@st.composite
def documents(draw: st.DrawFn) -> str | bytes:
    """A value written as `json.dumps` writes it (NaN and Infinity, raw or escaped surrogates, indented or
    not), as text or as its UTF-8 bytes."""
    text = json.dumps(draw(VALUES), ensure_ascii=draw(st.booleans()), indent=draw(st.sampled_from([None, 0, 2])),
                      sort_keys=draw(st.booleans()))
    return text.encode("utf-8", "surrogatepass") if draw(st.booleans()) else text


NEAR_JSON = st.lists(st.sampled_from(list('[]{}",:.-+eE0123456789 \t\n\r\ufeff\xa0aNnIuxftr\\/') +
                                     ["NaN", "Infinity", "true", "null", "\\ud800", "\\udc00", "\ud800", "1e400",
                                      "9" * 25, '"a"']), max_size=30).map("".join)


@st.composite
def spoiled(draw: st.DrawFn) -> str:
    """A document with a few characters cut, doubled or replaced: mostly invalid, now and then still JSON."""
    text = draw(documents())
    text = text.decode("utf-8", "surrogatepass") if isinstance(text, bytes) else text
    for _ in range(draw(st.integers(1, 3))):
        at = draw(st.integers(0, len(text)))
        text = text[:at] + draw(st.sampled_from(["", ",", "]", "}", '"', "\\", "NaN", " "])) + text[at + 1:]
    return text


@settings(max_examples=600)
@given(data=documents() | spoiled() | NEAR_JSON | NEAR_JSON.map(lambda t: t.encode("utf-8", "surrogatepass")))
@example(data="1" * 4300)
@example(data="1" * 4301)
@example(data="[" * MAX_DEPTH + "]" * MAX_DEPTH)
@example(data="\ufeff{}")
@example(data=b'{"a": 1, "a": 2}')
def test_parsing_gives_what_the_standard_library_gives(data: str | bytes) -> None:
    value, problem = jsonfile.parse_problem(data)
    expected_value, expected_problem = standard_only(data)
    assert problem == expected_problem
    assert same(value, expected_value), (value, expected_value)


def test_valid_json_never_reaches_the_standard_library(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """msgspec reads what is JSON (big integers exact); only what it refuses goes on to `json.loads`."""
    def refuse(*_: object, **__: object) -> None:
        raise AssertionError("json.loads was called")

    monkeypatch.setattr(jsonfile.json, "loads", refuse)
    big = 123456789012345678901234567890
    text = json.dumps({"a": [1, 2.5, None, True, "\u00e9\U0001f600"], "big": big, "deep": [[[[]]]]})
    assert jsonfile.parse_problem(text) == (json.JSONDecoder().decode(text), None)
    assert jsonfile.parse_problem(text.encode())[0]["big"] == big
    assert jsonfile.parse_problem("Error: it failed")[1] == "invalid JSON: Expecting value (column 1)"
    path = tmp_path / "rows.jsonl"
    path.write_text(text + "\n" + text)
    assert [n for n, value, problem in jsonfile.read_json_lines(path) if value["big"] == big] == [1, 2]


def reference_lines(path: Path, max_line_bytes: int) -> list[tuple[int, str | None, str | None]]:
    """`read_lines` as it was: one `readline` per line."""
    out: list[tuple[int, str | None, str | None]] = []
    with path.open("rb") as handle:
        number = 0
        while raw := handle.readline(max_line_bytes + 1):
            number += 1
            if len(raw) > max_line_bytes and not raw.endswith(b"\n"):
                while raw and not raw.endswith(b"\n"):
                    raw = handle.readline(7)
                out.append((number, None, f"line longer than {max_line_bytes} bytes"))
            elif raw.strip():
                try:
                    out.append((number, raw.decode("utf-8"), None))
                except UnicodeDecodeError as exc:
                    out.append((number, None, f"not UTF-8 text (byte {exc.start} of the line)"))
    return out


@settings(max_examples=300, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(lines=st.lists(st.sampled_from([b"", b" ", b"\r", b'{"a": 1}', b'{"a": "\xc3\xa9"}', b"[1,", b"\xff", b"x" * 9,
                                       b'{"long": "' + b"y" * 20 + b'"}', b"NaN", b"[" * 101 + b"]" * 101]),
                      max_size=12),
       ending=st.sampled_from([b"", b"\n", b"\r\n"]), max_line_bytes=st.integers(1, 40), chunk=st.integers(1, 64))
def test_lines_read_a_chunk_at_a_time_are_the_lines_read_one_by_one(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, lines: list[bytes], ending: bytes, max_line_bytes: int,
        chunk: int) -> None:
    """Split across chunks of any size, with lines over the bound skipped: the same numbers, texts and problems
    as reading line by line, and `read_json_lines` is that text parsed."""
    monkeypatch.setattr(jsonfile, "_CHUNK", chunk)
    path = tmp_path / "lines.jsonl"
    path.write_bytes(b"\n".join(lines) + ending)
    expected = reference_lines(path, max_line_bytes)
    assert list(jsonfile.read_lines(path, max_line_bytes)) == expected
    parsed = list(jsonfile.read_json_lines(path, max_line_bytes))
    assert [(n, p) for n, _, p in parsed] == [(n, p if t is None else standard_only(t)[1]) for n, t, p in expected]
    assert all(same(v, standard_only(t)[0]) for (_, v, _), (_, t, _) in zip(parsed, expected, strict=True) if t)


class Kept(TypedDict, total=False):
    kept: int


MISSING = object()


@settings(max_examples=400, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(kept=st.sampled_from([b"1", b"-0", b'"1"', b"1.5", b"null", b"[1]", b"1e400", b"9" * 25, b"NaN", b'{"a":1}']),
       skipped=documents().map(lambda t: t if isinstance(t, bytes) else t.encode("utf-8", "surrogatepass"))
       | spoiled().map(lambda t: t.encode("utf-8", "surrogatepass"))
       | NEAR_JSON.map(lambda t: t.encode("utf-8", "surrogatepass"))
       | st.binary(max_size=8).map(lambda b: b'"' + b + b'"'),
       order=st.booleans())
@example(kept=b"1", skipped=b'"\xff"', order=True)
@example(kept=b"1", skipped=b"1e400", order=True)
@example(kept=b"1", skipped=b"[" * MAX_DEPTH + b"]" * MAX_DEPTH, order=False)
def test_a_line_read_for_a_few_fields_is_refused_for_what_the_whole_line_is_refused_for(
        tmp_path: Path, kept: bytes, skipped: bytes, order: bool) -> None:
    """A decoder typed to a few fields skips the others unbuilt (and msgspec does not check the UTF-8 of what it
    skips): the fields it reads hold what the whole line holds there, and a line is refused for the same reason,
    or not at all, as when it is read whole."""
    fields = [b'"kept": ' + kept, b'"skipped": ' + skipped]
    path = tmp_path / "line.jsonl"
    path.write_bytes(b"{" + b", ".join(fields if order else fields[::-1]) + b"}\n")
    whole = list(jsonfile.read_json_lines(path))
    few = list(jsonfile.read_json_lines(path, fields=msgspec.json.Decoder(Kept)))
    assert [(n, p) for n, _, p in few] == [(n, p) for n, _, p in whole]
    for (_, value, _), (_, expected, _) in zip(few, whole, strict=True):
        assert isinstance(value, dict) == isinstance(expected, dict)
        if isinstance(value, dict) and isinstance(expected, dict):
            assert same(value.get("kept", MISSING), expected.get("kept", MISSING))
