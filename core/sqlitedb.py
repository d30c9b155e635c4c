"""The SQLite conventions of the gateway's stores (registry, capture): WAL, explicit transactions, and
the one read-only opener."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from core.errors import WorkerTierError


class StoreError(WorkerTierError):
    """A store that cannot be opened; the message names the file and why, in one line."""


def open_wal(path: Path, schema: str) -> sqlite3.Connection:
    """Autocommit connection in WAL mode (readers never block the writer), usable from threads.

    A file that exists but is empty is refused: SQLite would silently start it as a new, empty
    store, and a truncated state file must not come back as a gateway that forgot everything."""
    try:
        if path.is_file() and path.stat().st_size == 0:
            raise StoreError(f"{path}: the store is an empty (0-byte) file, not a SQLite database: it was "
                             "truncated or never written; restore it, or move it away to start with an empty store")
        path.parent.mkdir(parents=True, exist_ok=True)
        db = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        db.execute("PRAGMA journal_mode=WAL")
        db.execute("PRAGMA busy_timeout=5000")
        db.executescript(schema)
    except (OSError, sqlite3.Error) as exc:
        why = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        hint = " (it is a directory)" if path.is_dir() else ""
        raise StoreError(f"{path}: cannot open this SQLite store: {why}{hint}; check the path and that the "
                         "service user may create and write it and its directory") from exc
    return db


def connect_readonly(path: Path | str) -> sqlite3.Connection:
    """A read-only connection to the existing file `path`, whatever characters its name holds.

    Read-only needs a SQLite URI, and a path pasted into one unescaped is reinterpreted: `#` cuts it
    (`cap#1.sqlite` opened, and created, `cap`), `%41` decodes (`cap%41.sqlite` read `capA.sqlite`),
    `?` starts parameters. `Path.as_uri` percent-quotes every such character. A missing file is a
    `StoreError`, never a new empty store."""
    path = Path(path)
    if not path.is_file():
        why = "it is not a file" if path.exists() else "no such file"
        raise StoreError(f"{path}: cannot open this SQLite store read-only: {why}")
    try:
        return sqlite3.connect(f"{path.absolute().as_uri()}?mode=ro", uri=True, check_same_thread=False)
    except sqlite3.Error as exc:
        raise StoreError(f"{path}: cannot open this SQLite store read-only: {exc}") from exc


@contextmanager
def transaction(db: sqlite3.Connection) -> Iterator[None]:
    """`BEGIN IMMEDIATE` … `COMMIT`, rolled back on any error: a change is all or nothing."""
    db.execute("BEGIN IMMEDIATE")
    try:
        yield
    except BaseException:
        db.execute("ROLLBACK")
        raise
    db.execute("COMMIT")
