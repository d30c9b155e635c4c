"""Files written whole or not at all: a temporary file beside the path, renamed over it, so a reader (a
textfile collector, a resumed command) never sees half a file and a failed write leaves the old one."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path


def write_text_atomic(path: Path, text: str) -> None:
    """`text` into `path` (mode 0644), atomically; any failure leaves `path` as it was and no temporary file,
    and an `OSError` (a full disk) names `path`, not the temporary that is gone by then."""
    try:
        handle, temporary = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
        try:
            with os.fdopen(handle, "w", encoding="utf-8") as out:
                out.write(text)
            os.chmod(temporary, 0o644)
            os.replace(temporary, path)
        finally:
            Path(temporary).unlink(missing_ok=True)
    except OSError as exc:
        exc.filename, exc.filename2 = str(path), None
        raise
