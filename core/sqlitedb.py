"""The SQLite conventions of the gateway's stores (registry, trials, capture): WAL, explicit transactions,
the one read-only opener, and failures said in one line that names the store (a full disk as such)."""

from __future__ import annotations

import errno
import shutil
import sqlite3
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from pathlib import Path

from core.errors import WorkerTierError


class StoreError(WorkerTierError):
    """A store that cannot be opened or written; the message names the store and why, in one line."""


LOW_SPACE_BYTES = 2**20
"""With less than this left on its file system, a store that fails to open or write is on a full disk: SQLite
says so (SQLITE_FULL) only for a write into the database, and creating a store's write-ahead log and its
32 KiB shared-memory file on a full disk fails as "disk I/O error" or "unable to open database file"."""
_NOT_SPACE_ERRNOS = frozenset({errno.EACCES, errno.EPERM, errno.EROFS})
_NOT_SPACE_SQLITE = frozenset({sqlite3.SQLITE_PERM, sqlite3.SQLITE_READONLY, sqlite3.SQLITE_CORRUPT,
                               sqlite3.SQLITE_AUTH, sqlite3.SQLITE_NOTADB})


def free_bytes(path: Path) -> int | None:
    """The bytes a service user may still write on the file system holding `path` (or its nearest existing
    folder); None when that cannot be read."""
    for place in (path, *path.parents):
        try:
            return shutil.disk_usage(place).free
        except OSError:
            continue
    return None


def full_disk(path: Path, exc: OSError | sqlite3.Error) -> str | None:
    """The reason "the disk is full (N bytes free)" when `exc` means the disk holding `path` is full, else None:
    the error says so (ENOSPC, EDQUOT, SQLITE_FULL), or it is an I/O failure with next to nothing left there."""
    left = free_bytes(path)
    if isinstance(exc, OSError):
        said, other = exc.errno in (errno.ENOSPC, errno.EDQUOT), exc.errno in _NOT_SPACE_ERRNOS
    else:
        code = getattr(exc, "sqlite_errorcode", None)
        primary = code & 0xFF if isinstance(code, int) else None
        said, other = primary == sqlite3.SQLITE_FULL, primary in _NOT_SPACE_SQLITE
    if said or (not other and left is not None and left < LOW_SPACE_BYTES):
        return "the disk is full" + (f" ({left} bytes free)" if left is not None else "")
    return None


def store_error(path: Path, what: str, doing: str, exc: OSError | sqlite3.Error, advice: str = "") -> StoreError:
    """One line for a store that failed while `doing`: "<what> <path>: cannot <doing>: <why>", a full disk said
    as such (SQLite's own words may be "disk I/O error"); `advice` follows any other reason."""
    full = full_disk(path, exc)
    if full is not None:
        return StoreError(f"{what} {path}: cannot {doing}: {full}; free space on it, then try again")
    why = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
    return StoreError(f"{what} {path}: cannot {doing}: {why}{advice}")


def open_wal(path: Path, schema: str, what: str,
             ready: Callable[[sqlite3.Connection], None] | None = None) -> sqlite3.Connection:
    """Autocommit connection in WAL mode (readers never block the writer), usable from threads. `ready`
    finishes opening the store (migrations, first rows) under the same rules; `what` names the store.

    A file that exists but is empty is refused: SQLite would silently start it as a new, empty
    store, and a truncated state file must not come back as a gateway that forgot everything.
    Any failure is one StoreError (a full disk says so), and a store this call created is removed
    again: a start on a full disk leaves no empty file for the next start to refuse for another reason."""
    created, db = False, None
    try:
        if path.is_file() and path.stat().st_size == 0:
            raise StoreError(f"{what} {path}: the store is an empty (0-byte) file, not a SQLite database: it was "
                             "truncated or never written; restore it, or move it away to start with an empty store")
        created = not path.exists()
        path.parent.mkdir(parents=True, exist_ok=True)
        db = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        db.execute("PRAGMA journal_mode=WAL")
        db.execute("PRAGMA busy_timeout=5000")
        db.executescript(schema)
        if ready is not None:
            ready(db)
    except (OSError, sqlite3.Error) as exc:
        if db is not None:
            db.close()
        if created:
            for leftover in (path, path.with_name(path.name + "-wal"), path.with_name(path.name + "-shm")):
                with suppress(OSError):
                    leftover.unlink(missing_ok=True)
        hint = " (it is a directory)" if path.is_dir() else ""
        raise store_error(path, what, "open it", exc, f"{hint}; check the path and that the service user may "
                          "create and write it and its directory") from exc
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
