"""Atomic writes: the new text whole, readable by the collector's user, or the old file untouched and nothing
left beside it."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from core.atomicwrite import write_text_atomic


def test_the_new_text_replaces_the_old_whole(tmp_path: Path) -> None:
    path = tmp_path / "counters.prom"
    path.write_text("old\n")
    write_text_atomic(path, "new\n" * 1000)
    assert path.read_text() == "new\n" * 1000 and stat.S_IMODE(path.stat().st_mode) == 0o644
    assert [p.name for p in tmp_path.iterdir()] == ["counters.prom"]


def test_a_failed_write_leaves_the_old_file_and_no_temporary(tmp_path: Path) -> None:
    path = tmp_path / "counters.prom"
    path.write_text("old\n")
    with pytest.raises(UnicodeEncodeError):
        write_text_atomic(path, "half \ud800 written")  # a lone surrogate fails part-way through the write
    assert path.read_text() == "old\n" and [p.name for p in tmp_path.iterdir()] == ["counters.prom"]
    with pytest.raises(OSError) as missing:
        write_text_atomic(tmp_path / "missing" / "counters.prom", "x")
    target = tmp_path / "a-directory"
    target.mkdir()
    with pytest.raises(OSError) as replaced:
        write_text_atomic(target, "x")
    # Each names the file asked for (what the CLIs' one error line shows), not the temporary, which is gone.
    assert (missing.value.filename, missing.value.filename2) == (str(tmp_path / "missing" / "counters.prom"), None)
    assert (replaced.value.filename, replaced.value.filename2) == (str(target), None)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a-directory", "counters.prom"]
    assert os.listdir(target) == []
