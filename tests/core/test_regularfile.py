"""Only a regular file is ever opened: anything else a tenant can put where a file is read (a FIFO, a socket, a
device, a link to one) is refused with what it is, at once, also when it is swapped in after the look."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from core import regularfile
from core.jsonfile import JsonFileError, read_json_value, read_lines
from core.regularfile import NotReadableError, open_regular, read_regular_bytes
from tests.support.hostile import special_files, within

NAMES = ["fifo", "socket", "zero", "null", "device"]


def test_a_regular_file_is_read_and_bounded(tmp_path: Path) -> None:
    path = tmp_path / "a.json"
    path.write_bytes(b"[1]")
    assert read_regular_bytes(path) == b"[1]" and read_regular_bytes(path, 3, follow_links=False) == b"[1]"
    with pytest.raises(NotReadableError, match=r"a\.json: larger than 2 bytes"):
        read_regular_bytes(path, 2)
    (tmp_path / "link.json").symlink_to(path)
    assert read_regular_bytes(tmp_path / "link.json") == b"[1]"  # followed where links may be
    with pytest.raises(NotReadableError, match=r"link\.json: not a regular file \(a symbolic link, not followed\)"):
        read_regular_bytes(tmp_path / "link.json", follow_links=False)
    with pytest.raises(NotReadableError, match="cannot be read: No such file"):
        read_regular_bytes(tmp_path / "absent")
    with pytest.raises(NotReadableError, match="not a file path"):
        read_regular_bytes(tmp_path / "a\0b")


@pytest.mark.parametrize("follow_links", [True, False])
def test_what_is_no_regular_file_is_refused_without_waiting(tmp_path: Path, follow_links: bool) -> None:
    made = special_files([tmp_path / name for name in NAMES])
    made[tmp_path] = "directory"
    for path, kind in made.items():
        seen = kind if kind != "link" else "symbolic link, not followed" if not follow_links else "character device"
        with pytest.raises(NotReadableError, match=rf"^{re.escape(str(path))}: not a regular file \(a {seen}\)$"):
            within(20, lambda path=path: open_regular(path, follow_links))


def test_every_json_reader_refuses_a_fifo(tmp_path: Path) -> None:
    fifo = tmp_path / "results.jsonl"
    os.mkfifo(fifo)
    with pytest.raises(JsonFileError, match=r"results\.jsonl: not a regular file \(a FIFO\)"):
        within(20, lambda: list(read_lines(fifo)))
    with pytest.raises(JsonFileError, match=r"results\.jsonl: not a regular file \(a FIFO\)"):
        within(20, lambda: read_json_value(fifo))


def test_a_fifo_or_a_link_swapped_in_after_the_look_is_refused_on_the_opened_descriptor(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The look (stat or lstat) saw a regular file; by the open, the name is a FIFO or a link. The FIFO is opened
    non-blocking and refused on its descriptor; the link is never followed."""
    regular = tmp_path / "regular"
    regular.write_bytes(b"x")
    fifo, link = tmp_path / "fifo", tmp_path / "link"
    os.mkfifo(fifo)
    link.symlink_to(regular)
    looked = os.stat(regular)
    monkeypatch.setattr(regularfile.os, "stat", lambda path: looked)
    monkeypatch.setattr(regularfile.os, "lstat", lambda path: looked)
    with pytest.raises(NotReadableError, match=r"fifo: not a regular file \(a FIFO\)"):
        within(20, lambda: open_regular(fifo))
    with pytest.raises(NotReadableError, match=r"link: not a regular file \(a symbolic link, not followed\)"):
        open_regular(link, follow_links=False)
