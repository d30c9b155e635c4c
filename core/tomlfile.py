"""Read a TOML file into a pydantic model, with errors that name the file, the line and the key.

Every config of the project (engine, gateway, replay run, policies, manifests, key files) is read
through this module, so a typo anywhere is reported the same way, before anything starts; the
file is read once, bounded, and only if it is a regular file (a FIFO is refused, never waited on).
"""

from __future__ import annotations

import os
import re
import stat
import tomllib
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from core.errors import WorkerTierError
from core.jsonfile import MAX_DEPTH, value_too_deep
from core.names import excerpt
from core.regularfile import NotReadableError, open_regular

Model = TypeVar("Model", bound=BaseModel)
MAX_TOML_BYTES = 4 * 2**20
"""The largest TOML file read (configs, manifests, policies and key files are a few KB)."""


class ConfigError(WorkerTierError, ValueError):
    """A config that cannot be used; the message names the file and the offending key."""


def _private_problem(path: Path, mode: int, what: str) -> str | None:
    """Why a file of secrets (or of the hashes that stand for them) with this mode must not be used."""
    mode = stat.S_IMODE(mode)
    if mode & 0o077:
        return (f"other users can access the {what} (mode {mode:o}); it must be readable by its owner only: "
                f"run `chmod 600 {path}`")
    return None


def _regular_bytes(path: Path, limit: int, private: str | None = None) -> tuple[bytes | None, str | None]:
    """The bytes of a regular file of at most `limit` bytes, or None and why not. With `private` (what the
    file is, for the message), a mode that lets anyone but its owner read or write it is refused, checked
    on the descriptor that is read (so a file swapped between check and read is never the one read)."""
    try:
        with open_regular(path) as handle:
            mode = os.fstat(handle.fileno()).st_mode
            if private is not None and (problem := _private_problem(path, mode, private)) is not None:
                return None, problem
            data = handle.read(limit + 1)
    except NotReadableError as exc:
        return None, exc.reason
    except OSError as exc:
        return None, f"cannot be read: {exc.strerror or exc}"
    if len(data) > limit:
        return None, f"larger than {limit} bytes"
    return data, None


def read_regular(path: Path, limit: int) -> bytes:
    """The bytes of a regular file of at most `limit` bytes, read once. A FIFO, a device or a
    directory is refused without blocking (opened non-blocking, checked before any read); so is a
    path no file can have. Every refusal is a ConfigError naming the file."""
    data, problem = _regular_bytes(path, limit)
    if data is None:
        raise ConfigError(f"{excerpt(str(path), 300)}: {problem}")
    return data


def toml_problem(data: bytes) -> tuple[dict[str, Any] | None, str | None]:
    """TOML bytes as a dict, or None and the reason they are not a readable TOML file: not UTF-8,
    invalid, larger than `MAX_TOML_BYTES`, or nested deeper than JSON may be (`core.jsonfile`)."""
    if len(data) > MAX_TOML_BYTES:
        return None, f"larger than {MAX_TOML_BYTES} bytes"
    try:
        value = tomllib.loads(data.decode("utf-8"))
    except UnicodeDecodeError as exc:
        return None, f"not UTF-8 text (byte {exc.start}): TOML files are UTF-8"
    except tomllib.TOMLDecodeError as exc:
        return None, f"invalid TOML: {exc}"
    except RecursionError:
        return None, "invalid TOML: arrays and tables nest too deeply to read"
    except (ValueError, MemoryError) as exc:  # e.g. an integer of more than 4300 digits
        return None, f"invalid TOML: {str(exc)[:200]}"
    if value_too_deep(value):
        return None, f"invalid TOML: arrays and tables are nested deeper than {MAX_DEPTH} levels"
    return value, None


def read_toml(path: Path) -> tuple[dict[str, Any] | None, str | None]:
    """A TOML file (a regular file of at most `MAX_TOML_BYTES`) as in `toml_problem`."""
    data, problem = _regular_bytes(path, MAX_TOML_BYTES)
    return (None, problem) if data is None else toml_problem(data)


def parse_toml(data: bytes, path: Path, model: type[Model], what: str) -> Model:
    """Validate TOML bytes already read (so what is hashed is what is parsed); errors as `load_toml`'s."""
    raw, problem = toml_problem(data)
    if raw is None:
        raise ConfigError(f"{path}: {problem}")
    try:
        return model.model_validate(raw)
    except ValidationError as exc:
        raise ConfigError(_describe(path, data.decode("utf-8"), exc, what)) from exc


def load_toml(path: Path, model: type[Model], what: str, private: bool = False) -> Model:
    """Read and validate a TOML file; every problem is a `ConfigError` naming the file, the key and its line.
    A `private` file (keys, or their hashes) must be readable by its owner only (mode 600 or 400)."""
    data = read_private(path, what) if private else read_regular(path, MAX_TOML_BYTES)
    return parse_toml(data, path, model, what)


def read_private(path: Path, what: str) -> bytes:
    """The bytes of a TOML file of secrets (`what` it is, for the message): a regular file of at most
    `MAX_TOML_BYTES` that only its owner may access, else a ConfigError naming the file and the `chmod`."""
    data, problem = _regular_bytes(path, MAX_TOML_BYTES, what)
    if data is None:
        raise ConfigError(f"{path}: {problem}")
    return data


def _describe(path: Path, text: str, exc: ValidationError, what: str) -> str:
    lines = [f"{path}: invalid {what}"]
    for err in exc.errors():
        loc = [str(p) for p in err["loc"]]
        line = line_of(text, loc)
        where = f"{path}:{line}: " if line else "  "
        lines.append(f"{where}{'.'.join(loc) or '(top level)'}: {err['msg']}")
    return "\n".join(lines)


_TABLE = re.compile(r"^\s*\[(\[?)\s*([A-Za-z0-9_.-]+)\s*\]?\]\s*(#.*)?$")
_KEY = re.compile(r"^\s*([A-Za-z0-9_-]+)\s*=")


def line_of(text: str, loc: list[str]) -> int | None:
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
