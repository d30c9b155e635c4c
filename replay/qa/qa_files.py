"""How Stop-QA's files are read and written: JSONL read whole or refused at its first bad line (file:line), and
files written to a temporary file beside their path and renamed over it, so a reader never sees half a file."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import TypeVar

from pydantic import BaseModel

from core.atomicwrite import write_text_atomic
from core.jsonfile import read_jsonl
from replay.qa.errors import QAError

M = TypeVar("M", bound=BaseModel)


def read_strict(path: Path, model: type[M], what: str) -> list[tuple[int, M]]:
    """Every line of a JSONL file as a `model`, with its number; the first bad line is a `QAError` (file:line)."""
    rows = []
    for line in read_jsonl(path, model, what):
        if line.value is None:
            raise QAError(f"{path}:{line.number}: " + "; ".join(line.problems))
        rows.append((line.number, line.value))
    return rows


def write_jsonl(path: Path, rows: Iterable[BaseModel]) -> None:
    write_text(path, "".join(row.model_dump_json() + "\n" for row in rows))


def write_text(path: Path, text: str) -> None:
    """`text` into `path`, atomically; a path that cannot be written is a `QAError`."""
    try:
        write_text_atomic(path, text)
    except OSError as exc:
        raise QAError(f"{path}: cannot write: {exc.strerror or exc}") from exc
