"""A store file that exists but is empty is refused: SQLite would start it as a new, empty store."""

from __future__ import annotations

from pathlib import Path

import pytest

from core.sqlitedb import StoreError, open_wal


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
