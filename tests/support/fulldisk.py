"""A full disk for one test: a small tmpfs mounted over a folder, then filled. Mounting needs root
(CAP_SYS_ADMIN); where it is refused the test is skipped (tests/core/test_sqlitedb.py injects the same
errors, so the behaviour stays tested there)."""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

SHM_BYTES = 32 * 1024
"""What opening a WAL store takes on disk before it writes anything: its shared-memory (`-shm`) file."""


@contextmanager
def small_disk(where: Path, size: int = 2**20) -> Iterator[Path]:
    """A tmpfs of `size` bytes at `where` for the duration (unmounted after, even if the test fails)."""
    where.mkdir(parents=True, exist_ok=True)
    try:
        mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(where)],
                                 capture_output=True, text=True, check=False)
    except FileNotFoundError:
        pytest.skip("no mount command here")
    if mounted.returncode != 0:
        pytest.skip(f"a tmpfs cannot be mounted here: {mounted.stderr.strip()}")
    try:
        yield where
    finally:
        subprocess.run(["umount", "--lazy", str(where)], capture_output=True, check=False)


def fill(disk: Path, leave: int = 0) -> None:
    """Take all the disk's space but `leave` bytes (tmpfs counts whole pages: a multiple of 4 KiB)."""
    free = shutil.disk_usage(disk).free
    (disk / "filler").write_bytes(b"\0" * (free - leave))
    assert shutil.disk_usage(disk).free == leave
