"""The one bounded JSON reader: every JSON and JSONL file the project reads goes through here.

A file from a user (a suite, a pack, a run's results, a transcript, a verdict) can hold anything:
`[[[[…]]]]` ten thousand deep (Python's parser then raises `RecursionError`, and so does any
recursive code that touches the value later), a 10 GB line (`MemoryError`), bytes that are not
UTF-8, a 5000-digit number (`ValueError` outside `JSONDecodeError`). Here each of those is a
`JsonFileError` naming the file and line, and nothing deeper than `MAX_DEPTH` is ever parsed,
so no later recursion over a value read here can run out of stack. Only a regular file is ever
opened (`core.regularfile`): a FIFO, a socket or a device is a `JsonFileError` too, never waited on.

Parsing is msgspec's (a C parser, about 3× the standard library's speed on session-file lines: a corpus
audit is mostly parsing). It is tried first, and whatever it refuses goes through `json.loads`, so what is
accepted, the values, and every error message stay the standard library's: msgspec refuses what `json`
takes beyond JSON (`NaN`, `Infinity`, a lone surrogate `"\\ud800"`, `1e400` as infinity) and `json` then
reads it as before. msgspec keeps integers of any size exact (orjson turns those past 64 bits into floats,
so it is not used); `tests/core/test_jsonfile.py` checks the two paths agree on generated documents.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from itertools import accumulate
from pathlib import Path
from typing import Any, Generic, TypeVar

import msgspec
from pydantic import BaseModel, ValidationError

from core.errors import WorkerTierError
from core.regularfile import NotReadableError, open_regular, read_regular_bytes

M = TypeVar("M", bound=BaseModel)
T = TypeVar("T")

MAX_DEPTH = 100
"""Arrays and objects nested deeper than this are refused (real records and requests, tool
schemas included, stay far below; Python's own parser gives up near 1000)."""
MAX_LINE_BYTES = 16 * 2**20
"""The longest line of a JSONL file (a decision with its whole conversation stays well under)."""
MAX_FILE_BYTES = 64 * 2**20
"""The largest single-document JSON file (run.json, evidence and verdict files)."""

# A JSON string (escapes included): brackets inside strings do not nest. The same for bytes: UTF-8 never
# puts a quote, a backslash or a bracket inside a character of several bytes.
_STRING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"', re.S)
_NOT_BRACKET = re.compile(r"[^\[\]{}]+")
_STRING_BYTES = re.compile(_STRING.pattern.encode(), re.S)
_NOT_BRACKET_BYTES = re.compile(_NOT_BRACKET.pattern.encode())
_STEP = {"[": 1, "{": 1, "]": -1, "}": -1, ord("["): 1, ord("{"): 1, ord("]"): -1, ord("}"): -1}
_DECODE = msgspec.json.Decoder().decode
_BLANK = re.compile(r"[ \t\n\r]*")
"""The whitespace `json` skips before a value."""
_STARTS_VALUE = frozenset('"{[-0123456789ntfNI')
"""The characters `json` can read a value from (`NaN` and `Infinity` included)."""
_CHUNK = 1 << 20


class JsonFileError(WorkerTierError, ValueError):
    """A JSON file, line or body that cannot be read; the message names where and why."""


@dataclass(frozen=True)
class JsonLine(Generic[T]):
    """One non-blank line of a JSONL file: its value, or every reason it is not one."""

    number: int
    value: T | None
    problems: tuple[str, ...] = ()


def too_deep(text: str | bytes) -> bool:
    """Whether arrays and objects in `text` nest deeper than `MAX_DEPTH` (brackets inside strings
    do not count); a linear scan, done before parsing so the parser never recurses that deep."""
    if isinstance(text, bytes):
        if text.count(b"[") + text.count(b"{") <= MAX_DEPTH:
            return False
        skeleton: str | bytes = _NOT_BRACKET_BYTES.sub(b"", _STRING_BYTES.sub(b"", text))
    else:
        if text.count("[") + text.count("{") <= MAX_DEPTH:
            return False
        skeleton = _NOT_BRACKET.sub("", _STRING.sub("", text))
    return max(accumulate(map(_STEP.__getitem__, skeleton)), default=0) > MAX_DEPTH


def parse_problem(data: str | bytes) -> tuple[Any, str | None]:
    """`data` parsed as JSON, or None and the reason it is not readable JSON within the bounds."""
    if isinstance(data, bytes) and len(data) > MAX_FILE_BYTES:
        return None, f"larger than {MAX_FILE_BYTES} bytes"
    if not too_deep(data):
        try:
            return _DECODE(data), None
        except ValueError:  # msgspec's refusals (and a str holding a lone surrogate): `json` says why, or takes it
            pass
    return _standard(data)


def _standard(data: str | bytes) -> tuple[Any, str | None]:
    """`parse_problem` by the standard library alone: what it accepts, and its reasons."""
    if isinstance(data, bytes):
        try:
            data = data.decode("utf-8")
        except UnicodeDecodeError as exc:
            return None, f"not UTF-8 text (byte {exc.start})"
    if too_deep(data):
        return None, f"invalid JSON: arrays and objects are nested deeper than {MAX_DEPTH} levels"
    blank = _BLANK.match(data)
    start = blank.end() if blank else 0
    if start == len(data) or (data[start] not in _STARTS_VALUE and not data.startswith("\ufeff")):
        return None, _invalid("Expecting value", data, start)  # what json raises here (text that is no JSON at
        # all, as most tool results are), without the cost of raising it
    try:
        return json.loads(data), None
    except json.JSONDecodeError as exc:
        return None, _invalid(exc.msg, data, exc.pos)
    except (ValueError, RecursionError, MemoryError) as exc:  # e.g. an integer of more than 4300 digits
        return None, f"invalid JSON: {str(exc)[:200]}"


def _invalid(message: str, text: str, position: int) -> str:
    """`json`'s error at `position` of `text`, its line and column counted as `json.JSONDecodeError` counts them."""
    line, column = text.count("\n", 0, position) + 1, position - text.rfind("\n", 0, position)
    return f"invalid JSON: {message} ({f'line {line}, column {column}' if line > 1 else f'column {column}'})"


def loads_bounded(data: str | bytes, where: str) -> Any:
    """`data` parsed as JSON within the bounds, else a `JsonFileError` saying `where` and why."""
    value, problem = parse_problem(data)
    if problem is not None:
        raise JsonFileError(f"{where}: {problem}")
    return value


def schema_errors(exc: ValidationError) -> list[str]:
    """A pydantic error as one reason per field (`field a.b: msg`), never echoing the value."""
    return [f"field {'.'.join(str(p) for p in e['loc']) or '(top level)'}: {e['msg']}" for e in exc.errors()]


def as_model(value: Any, model: type[M], where: str) -> M:
    """A parsed JSON value as a `model`; its problems are one `JsonFileError` saying `where`."""
    try:
        return model.model_validate(value)
    except ValidationError as exc:
        raise JsonFileError(f"{where}: " + "; ".join(schema_errors(exc))) from exc


def validate(data: str | bytes, model: type[M], where: str) -> M:
    """`data` as a `model`, read within the bounds; every problem is one `JsonFileError`."""
    return as_model(loads_bounded(data, where), model, where)


def read_json(path: Path, model: type[M]) -> M:
    """A whole JSON file (at most `MAX_FILE_BYTES`) as a `model`."""
    return validate(_read_bounded(path), model, str(path))


def read_json_value(path: Path, follow_links: bool = True) -> Any:
    """A whole JSON file (at most `MAX_FILE_BYTES`) as a plain value (`follow_links`: as `open_regular`)."""
    return loads_bounded(_read_bounded(path, follow_links), str(path))


def _read_bounded(path: Path, follow_links: bool = True) -> bytes:
    try:
        return read_regular_bytes(path, MAX_FILE_BYTES, follow_links)
    except NotReadableError as exc:
        raise JsonFileError(str(exc)) from exc


def _lines(path: Path, max_line_bytes: int | None,
           follow_links: bool) -> Iterator[tuple[int, bytes | None, bool]]:
    """(number, bytes, whether a newline ended it) for each non-blank line, read a chunk at a time (a read per
    line costs more than the parse); bytes None for a line longer than `max_line_bytes`, dropped as it is
    read, so no more than that and a chunk is ever held."""
    limit = MAX_LINE_BYTES if max_line_bytes is None else max_line_bytes
    try:
        handle = open_regular(path, follow_links)
    except NotReadableError as exc:
        raise JsonFileError(str(exc)) from exc
    with handle:
        number, pending, too_long = 0, b"", False
        while chunk := handle.read(_CHUNK):
            *ended, rest = chunk.split(b"\n")
            for part in ended:
                number += 1
                if too_long or len(pending) + len(part) > limit:
                    yield number, None, True
                elif (line := pending + part if pending else part) and not line.isspace():
                    yield number, line, True
                pending, too_long = b"", False
            if too_long or len(pending) + len(rest) > limit:
                pending, too_long = b"", True
            else:
                pending += rest
        if too_long or (pending and not pending.isspace()):
            yield number + 1, None if too_long else pending, False


def _text(raw: bytes, ended: bool) -> str:
    """A line as text, its newline kept (an error's line and column are counted with it); UnicodeDecodeError
    when it is not UTF-8."""
    return (raw + b"\n" if ended else raw).decode("utf-8")


def read_lines(path: Path, max_line_bytes: int | None = None,
               follow_links: bool = True) -> Iterator[tuple[int, str | None, str | None]]:
    """(number, text, problem) for each non-blank line (split on `\\n`, counted from 1): the text
    when it is UTF-8 of at most `max_line_bytes`, else the problem. A longer line is skipped
    without being held in memory. `max_line_bytes` defaults to `MAX_LINE_BYTES`; anything but a
    regular file (and with `follow_links` false, a link) is a `JsonFileError` (`core.regularfile`)."""
    for number, raw, ended in _lines(path, max_line_bytes, follow_links):
        if raw is None:
            yield number, None, _too_long(max_line_bytes)
            continue
        try:
            yield number, _text(raw, ended), None
        except UnicodeDecodeError as exc:
            yield number, None, _not_utf8(exc)


def read_json_lines(path: Path, max_line_bytes: int | None = None, follow_links: bool = True,
                    fields: msgspec.json.Decoder[Any] | None = None) -> Iterator[tuple[int, Any, str | None]]:
    """(number, value, problem) for each non-blank line: `read_lines`' text parsed by `parse_problem`, with the
    same values and problems, but a line msgspec reads is never decoded to text first.

    `fields`, a decoder typed to the few fields a reader needs (a `TypedDict`), is tried first: msgspec skips
    the other fields without building them, which is most of a parse. A line it refuses (a field of another
    type, or anything `parse_problem` would refuse) is parsed whole as without it, so the fields it keeps have
    the same values, and a line is refused for the same reasons."""
    decode = _DECODE if fields is None else _fields_or_whole(fields)
    for number, raw, ended in _lines(path, max_line_bytes, follow_links):
        if raw is None:
            yield number, None, _too_long(max_line_bytes)
            continue
        if raw.count(b"[") + raw.count(b"{") <= MAX_DEPTH or not too_deep(raw):  # too_deep's first test, inline
            try:
                yield number, decode(raw), None
                continue
            except ValueError:
                pass
        try:
            text = _text(raw, ended)
        except UnicodeDecodeError as exc:
            yield number, None, _not_utf8(exc)
            continue
        yield number, *_standard(text)


def _fields_or_whole(fields: msgspec.json.Decoder[Any]) -> Callable[[bytes], Any]:
    """A line read by `fields`, else read whole by msgspec (a `ValueError` when msgspec refuses it whole too).
    Bytes that are not UTF-8 are read whole, so refused as `json` refuses them: msgspec checks the UTF-8 of the
    strings it builds, not of those it skips."""
    def decode(raw: bytes) -> Any:
        try:
            if not raw.isascii():
                raw.decode("utf-8")
            return fields.decode(raw)
        except ValueError:  # a field of another type, anything msgspec refuses, UnicodeDecodeError
            return _DECODE(raw)
    return decode


def _too_long(max_line_bytes: int | None) -> str:
    return f"line longer than {MAX_LINE_BYTES if max_line_bytes is None else max_line_bytes} bytes"


def _not_utf8(exc: UnicodeDecodeError) -> str:
    return f"not UTF-8 text (byte {exc.start} of the line)"


def read_jsonl_values(path: Path, what: str = "a line", max_line_bytes: int | None = None,
                      follow_links: bool = True) -> Iterator[JsonLine[dict[str, Any]]]:
    """Each non-blank line of a JSONL file as a parsed JSON object, or its problem (`what` names
    what a line holds, for the message when it is no object)."""
    for number, value, problem in read_json_lines(path, max_line_bytes, follow_links):
        if problem is None and not isinstance(value, dict):
            problem = f"{what} must be a JSON object"
        yield JsonLine(number, value, ()) if problem is None else JsonLine(number, None, (problem,))


def read_jsonl(path: Path, model: type[M], what: str = "a line") -> Iterator[JsonLine[M]]:
    """Each non-blank line of a JSONL file as a `model`, or every reason it is not one."""
    for line in read_jsonl_values(path, what):
        if line.value is None:
            yield JsonLine(line.number, None, line.problems)
            continue
        try:
            yield JsonLine(line.number, model.model_validate(line.value))
        except ValidationError as exc:
            yield JsonLine(line.number, None, tuple(schema_errors(exc)))


def read_jsonl_strict(path: Path, model: type[M], what: str = "a line") -> list[M]:
    """Every line of a JSONL file as a `model`; the first bad line is a `JsonFileError` (file:line)."""
    rows = []
    for line in read_jsonl(path, model, what):
        if line.value is None:
            raise JsonFileError(f"{path}:{line.number}: " + "; ".join(line.problems))
        rows.append(line.value)
    return rows


def cut_torn_tail(path: Path) -> None:
    """Cut a JSONL file back to its last complete line (a writer killed mid-line leaves a torn
    one), reading only the tail."""
    with path.open("r+b") as handle:
        end = handle.seek(0, 2)
        position = end
        while position > 0:
            start = max(0, position - _CHUNK)
            handle.seek(start)
            newline = handle.read(position - start).rfind(b"\n")
            if newline >= 0:
                position = start + newline + 1
                break
            position = start
        if position < end:
            handle.truncate(position)


def value_too_deep(value: Any) -> bool:
    """Whether lists and dicts in an already parsed value (a TOML file's) nest deeper than
    `MAX_DEPTH`; iterative, so the check itself never recurses."""
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        children = item.values() if isinstance(item, dict) else item if isinstance(item, list) else None
        if children is None:
            continue
        if depth >= MAX_DEPTH:
            return True
        stack.extend((child, depth + 1) for child in children)
    return False
