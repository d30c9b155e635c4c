"""What a file from a user may hold, for the property tests of every reader: any bytes, JSON-ish
lines (valid, broken, deep, huge numbers, not UTF-8) and TOML-ish text; and what may stand where a
reader expects a file at all (a FIFO, a socket, a device, a link to one)."""

from __future__ import annotations

import json
import os
import socket
import stat
import tempfile
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from hypothesis import strategies as st

T = TypeVar("T")

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


_SPECIALS = (("FIFO", None), ("socket", None), ("link", "/dev/zero"), ("link", "/dev/null"),
             ("character device", None))


def special_files(paths: list[Path]) -> dict[Path, str]:
    """Entries a tenant can make where a reader expects a file, none of them a regular file, each with what it
    is (the word its refusal must say): at the given paths, in this order (as many as there are paths), a FIFO
    (opening it waits for a writer, for good), a Unix socket, links to `/dev/zero` and `/dev/null`, and a real
    character device where this user may make one (root may; else that path is left absent)."""
    made: dict[Path, str] = {}
    for path, (kind, target) in zip(paths, _SPECIALS, strict=False):
        path.parent.mkdir(parents=True, exist_ok=True)
        if target is not None:
            path.symlink_to(target)
        elif kind == "FIFO":
            os.mkfifo(path)
        elif kind == "socket":
            _unix_socket(path)
        else:
            try:
                os.mknod(path, stat.S_IFCHR | 0o600, os.makedev(1, 5))  # /dev/zero's numbers
            except PermissionError:
                continue
        made[path] = kind
    return made


def _unix_socket(path: Path) -> None:
    """A bound Unix socket at `path` (made under a short directory and moved: a socket's path is short)."""
    with tempfile.TemporaryDirectory(dir="/tmp") as short:
        with socket.socket(socket.AF_UNIX) as sock:
            sock.bind(f"{short}/s")
        os.rename(f"{short}/s", path)


def within(limit_s: float, call: Callable[[], T]) -> T:
    """`call()`'s value (or its exception), failing the test when it has not returned within `limit_s`: a reader
    blocked on a FIFO never returns, so it runs in a daemon thread that is left behind."""
    outcome: dict[str, Any] = {}

    def run() -> None:
        try:
            outcome["value"] = call()
        except BaseException as exc:  # noqa: BLE001 - raised again in the caller's thread
            outcome["error"] = exc

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(limit_s)
    if not outcome:
        raise AssertionError(f"still running after {limit_s} s (blocked on a FIFO or a device?)")
    if "error" in outcome:
        raise outcome["error"]
    return outcome["value"]
