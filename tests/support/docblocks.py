"""The shell blocks of a page of docs, for the tests that run a page as typed (docs/guide.md, docs/runbook.md)."""

from __future__ import annotations

import re
from pathlib import Path

BLOCK = re.compile(r"^```sh\n(.*?)^```", re.S | re.M)


def shell_blocks(page: Path, skip: str) -> list[tuple[str, bool]]:
    """Each ```sh block of `page` and whether the line before it (a comment starting with `skip`) marks it as one
    the test does not run."""
    text = page.read_text(encoding="utf-8")
    blocks = []
    for match in BLOCK.finditer(text):
        before = text[:match.start()].rstrip().splitlines()
        blocks.append((match.group(1), bool(before) and before[-1].startswith(skip)))
    return blocks
