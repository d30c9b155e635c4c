"""An output directory written whole or not at all, and the key its finished build records: what lets the
adapter trainer, the merger and the quantiser be killed halfway and rerun, and skip work already done."""

from __future__ import annotations

import json
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


def marker_key(marker: Path) -> str | None:
    """The key a finished build recorded; None for a missing or unreadable marker (rebuild)."""
    try:
        key = json.loads(marker.read_text(encoding="utf-8")).get("key")
    except (OSError, ValueError, AttributeError):
        return None
    return key if isinstance(key, str) else None


@contextmanager
def replaced_whole(target: Path) -> Iterator[Path]:
    """A staging directory beside `target` that replaces it whole when the block succeeds: a build
    killed halfway leaves the old `target` (and a stale staging directory the next build removes)."""
    target.parent.mkdir(parents=True, exist_ok=True)
    for stale in target.parent.glob(f".{target.name}-*"):
        shutil.rmtree(stale, ignore_errors=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{target.name}-", dir=target.parent))
    try:
        yield staging
        if target.exists():
            shutil.rmtree(target)
        staging.rename(target)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
