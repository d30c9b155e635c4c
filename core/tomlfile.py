"""Read a TOML file into a pydantic model, with errors that name the file, the line and the key.

Every config of the project (engine, gateway, replay run) is read through `load_toml`, so a
typo anywhere is reported the same way, before anything starts.
"""

from __future__ import annotations

import os
import re
import stat
import tomllib
from pathlib import Path
from typing import TypeVar

from pydantic import BaseModel, ValidationError

from core.errors import WorkerTierError
from core.names import excerpt

Model = TypeVar("Model", bound=BaseModel)


MAX_TOML_BYTES = 4 * 1024 * 1024
"""Configs and policies are a few KiB; a larger file is refused before it is parsed."""


class ConfigError(WorkerTierError, ValueError):
    """A config that cannot be used; the message names the file and the offending key."""


def read_regular(path: Path, limit: int) -> bytes:
    """The bytes of a regular file of at most `limit` bytes, read once. A FIFO, a device or a
    directory is refused without blocking (opened non-blocking, checked before any read). A path
    no file can have (a NUL byte in it: one from an API body) is a ConfigError too."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except OSError as exc:
        raise ConfigError(f"{path}: {exc.strerror or exc}") from exc
    except ValueError as exc:  # "embedded null byte"
        raise ConfigError(f"{excerpt(str(path))}: not a file path ({exc})") from exc
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise ConfigError(f"{path}: not a regular file")
        with os.fdopen(os.dup(fd), "rb") as handle:
            data = handle.read(limit + 1)
    except OSError as exc:
        raise ConfigError(f"{path}: {exc.strerror or exc}") from exc
    finally:
        os.close(fd)
    if len(data) > limit:
        raise ConfigError(f"{path}: larger than {limit} bytes")
    return data


def parse_toml(data: bytes, path: Path, model: type[Model], what: str) -> Model:
    """Validate TOML bytes already read (so what is hashed is what is parsed); errors as `load_toml`'s."""
    try:
        text = data.decode("utf-8")
        raw = tomllib.loads(text)
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path}: not UTF-8 text (byte {exc.start}): TOML files are UTF-8") from exc
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: {exc}") from exc
    try:
        return model.model_validate(raw)
    except ValidationError as exc:
        raise ConfigError(_describe(path, text, exc, what)) from exc


def load_toml(path: Path, model: type[Model], what: str) -> Model:
    """Read and validate a TOML file; every problem is a `ConfigError` naming the file, the key and its line.
    A FIFO or device is refused, never waited on."""
    return parse_toml(read_regular(path, MAX_TOML_BYTES), path, model, what)


def _describe(path: Path, text: str, exc: ValidationError, what: str) -> str:
    lines = [f"{path}: invalid {what}"]
    for err in exc.errors():
        loc = [str(p) for p in err["loc"]]
        line = _line_of(text, loc)
        where = f"{path}:{line}: " if line else "  "
        lines.append(f"{where}{'.'.join(loc) or '(top level)'}: {err['msg']}")
    return "\n".join(lines)


_TABLE = re.compile(r"^\s*\[(\[?)\s*([A-Za-z0-9_.-]+)\s*\]?\]\s*(#.*)?$")
_KEY = re.compile(r"^\s*([A-Za-z0-9_-]+)\s*=")


def _line_of(text: str, loc: list[str]) -> int | None:
    """The line that sets the key at `loc` (`["upstreams", "0", "url"]`), else the line of the
    table that should hold it, if either can be found."""
    table: list[str] = []
    arrays: dict[str, int] = {}
    parent_line = None
    for number, line in enumerate(text.splitlines(), start=1):
        header = _TABLE.match(line)
        if header:
            name = header.group(2)
            if header.group(1):
                arrays[name] = arrays.get(name, -1) + 1
                table = [*name.split("."), str(arrays[name])]
            else:
                table = name.split(".")
            if table == loc:
                return number
            if table == loc[:-1]:
                parent_line = number
            continue
        key = _KEY.match(line)
        if key and [*table, key.group(1)] == loc[: len(table) + 1]:
            return number
    return parent_line
