"""Opening SQLite stores: read-only opens read the file named and create nothing; an empty (0-byte) store
file is refused, not started afresh."""

from __future__ import annotations

import sqlite3
import tempfile
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

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
    with pytest.raises(StoreError, match=r"state\.sqlite: the store is an empty \(0-byte\) file"):
        open_wal(path, "CREATE TABLE t (x)")
    assert path.stat().st_size == 0  # nothing written into it
    path.write_bytes(b"SQLite format 3\0" + b"\xff" * 50)
    with pytest.raises(StoreError, match="cannot open this SQLite store"):
        open_wal(path, "CREATE TABLE t (x)")


def test_a_missing_store_is_created(tmp_path: Path) -> None:
    open_wal(tmp_path / "new" / "state.sqlite", "CREATE TABLE t (x)").close()
    assert (tmp_path / "new" / "state.sqlite").stat().st_size > 0
