"""Opening SQLite stores: read-only opens read the file named and create nothing; an empty (0-byte) store
file is refused, not started afresh; a full disk is one error that names the store and says so, whatever
words SQLite found for it, and a store created by the failed open is gone again (issue 62, item 2). A real
full disk is in tests/serve/test_full_disk.py; here its errors are injected where the store is readied."""

from __future__ import annotations

import errno
import shutil
import sqlite3
import tempfile
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from core import sqlitedb
from core.sqlitedb import StoreError, connect_readonly, open_wal


def make(path: Path, value: str) -> Path:
    db = sqlite3.connect(path)
    db.execute("CREATE TABLE t (v TEXT)")
    db.execute("INSERT INTO t VALUES (?)", (value,))
    db.commit()
    db.close()
    return path


def read(path: Path) -> str:
    db = connect_readonly(path)
    try:
        return str(db.execute("SELECT v FROM t").fetchone()[0])
    finally:
        db.close()


@pytest.mark.parametrize("name", ["cap#1.sqlite", "cap%41.sqlite", "cap?mode=rwc.sqlite", "a b.sqlite"])
def test_a_name_with_uri_characters_opens_that_file(tmp_path: Path, name: str) -> None:
    make(tmp_path / name, "mine")
    make(tmp_path / "capA.sqlite", "someone else's")  # what `cap%41` decodes to in a raw URI
    before = sorted(tmp_path.iterdir())
    assert read(tmp_path / name) == "mine"
    assert sorted(tmp_path.iterdir()) == before  # nothing created (`cap#1` used to create `cap`)


def test_a_missing_file_is_refused_not_created(tmp_path: Path) -> None:
    with pytest.raises(StoreError, match="no such file"):
        connect_readonly(tmp_path / "cap#1.sqlite")
    assert list(tmp_path.iterdir()) == []


def test_writes_are_refused(tmp_path: Path) -> None:
    db = connect_readonly(make(tmp_path / "c.sqlite", "x"))
    with pytest.raises(sqlite3.OperationalError, match="readonly"):
        db.execute("INSERT INTO t VALUES ('y')")
    db.close()


@settings(deadline=None, max_examples=40)
@given(st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="/\0"), min_size=1, max_size=30))
def test_any_file_name_reads_back_and_creates_nothing(name: str) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        try:
            path = make(folder / f"{name}.sqlite", name)
        except (OSError, sqlite3.Error, UnicodeEncodeError):
            return  # a name this file system cannot hold
        before = sorted(folder.iterdir())
        assert read(path) == name
        assert sorted(folder.iterdir()) == before


def test_an_empty_store_file_is_refused_like_a_truncated_one(tmp_path: Path) -> None:
    path = tmp_path / "state.sqlite"
    path.write_bytes(b"")
    with pytest.raises(StoreError, match=r"^test store .*state\.sqlite: the store is an empty \(0-byte\) file"):
        open_wal(path, "CREATE TABLE t (x)", "test store")
    assert path.stat().st_size == 0  # nothing written into it
    path.write_bytes(b"SQLite format 3\0" + b"\xff" * 50)
    with pytest.raises(StoreError, match="cannot open it: .*; check the path"):
        open_wal(path, "CREATE TABLE t (x)", "test store")


def test_a_missing_store_is_created(tmp_path: Path) -> None:
    open_wal(tmp_path / "new" / "state.sqlite", "CREATE TABLE t (x)", "test store").close()
    assert (tmp_path / "new" / "state.sqlite").stat().st_size > 0


def sqlite_error(message: str, code: int) -> sqlite3.OperationalError:
    """An error as SQLite raises it (the module sets `sqlite_errorcode` on the errors it raises)."""
    error = sqlite3.OperationalError(message)
    error.sqlite_errorcode = code  # type: ignore[attr-defined]
    return error


def failing(error: Exception) -> Callable[[sqlite3.Connection], None]:
    def ready(db: sqlite3.Connection) -> None:
        db.execute("INSERT INTO t VALUES (1)")  # the store has been written when the disk runs out
        raise error
    return ready


@pytest.mark.parametrize(("error", "free"), [
    (sqlite_error("database or disk is full", sqlite3.SQLITE_FULL), 10 * 2**30),  # SQLite says so
    (OSError(errno.ENOSPC, "No space left on device"), 10 * 2**30),
    (sqlite_error("disk I/O error", sqlite3.SQLITE_IOERR | (4 << 8)), 0),  # SQLITE_IOERR_FSYNC: the disk says so
    (sqlite_error("unable to open database file", sqlite3.SQLITE_CANTOPEN), 4096),
])
def test_a_full_disk_is_said_in_one_line_each_time_and_leaves_no_store(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, error: Exception, free: int) -> None:
    monkeypatch.setattr(sqlitedb, "free_bytes", lambda _: free)
    path = tmp_path / "state.sqlite"
    said = []
    for _ in range(2):  # a restart on the same disk says the same thing
        with pytest.raises(StoreError) as refused:
            open_wal(path, "CREATE TABLE t (x)", "gateway state store", ready=failing(error))
        said.append(str(refused.value))
        assert sorted(tmp_path.iterdir()) == []  # no empty file for the next start to refuse as truncated
    assert said[0] == said[1] == (f"gateway state store {path}: cannot open it: the disk is full ({free} bytes "
                                  "free); free space on it, then try again")


@pytest.mark.parametrize(("error", "free", "why"), [
    (sqlite_error("disk I/O error", sqlite3.SQLITE_IOERR), 10 * 2**30, "disk I/O error"),  # room left: not full
    (OSError(errno.EACCES, "Permission denied"), 0, "Permission denied"),  # full, but that is not why
    (sqlite_error("attempt to write a readonly database", sqlite3.SQLITE_READONLY), 0, "readonly"),
])
def test_other_failures_keep_their_own_reason_and_hint(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                       error: Exception, free: int, why: str) -> None:
    monkeypatch.setattr(sqlitedb, "free_bytes", lambda _: free)
    path = make(tmp_path / "state.sqlite", "kept")
    with pytest.raises(StoreError, match=f"^capture store {path}: cannot open it: .*{why}.*; check the path") as refused:
        open_wal(path, "CREATE TABLE IF NOT EXISTS t (x)", "capture store", ready=failing(error))
    assert "disk is full" not in str(refused.value)
    assert read(path) == "kept"  # a store that was there stays


def test_free_bytes_reads_the_nearest_existing_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    asked, real = [], shutil.disk_usage

    def usage(place: Path) -> shutil._ntuple_diskusage:
        asked.append(place)
        return shutil._ntuple_diskusage(100, 90, 10) if place == tmp_path else real(place)

    monkeypatch.setattr(sqlitedb.shutil, "disk_usage", usage)
    assert sqlitedb.free_bytes(tmp_path / "not" / "yet" / "state.sqlite") == 10
    assert asked[-1] == tmp_path and len(asked) == 4
