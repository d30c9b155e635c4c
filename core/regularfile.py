"""The one way a file is opened for reading: a regular file only, never waited on.

A tenant writes its own container's config and memory directories, so any name in a corpus or a
memory root can be a FIFO (opening it blocks until a writer comes: for good), a socket, a device
(`/dev/zero` never ends) or a link to one. Every reader of JSON, TOML, session and memory files
opens through here: the path's own entry is looked at first and anything but a regular file is
refused before it is opened; it is then opened non-blocking (a FIFO swapped in after the look
returns at once), with `O_NOFOLLOW` where links are not followed, and the opened descriptor is
looked at again, so what is read is always a regular file, whatever was swapped in meanwhile.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path
from typing import BinaryIO

from core.errors import WorkerTierError

_LINK = "a symbolic link, not followed"
_KINDS = ((stat.S_ISLNK, _LINK), (stat.S_ISFIFO, "a FIFO"), (stat.S_ISSOCK, "a socket"),
          (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"), (stat.S_ISDIR, "a directory"))


class NotReadableError(WorkerTierError, ValueError):
    """A path that is not a regular file that can be read; `reason` says why, without the path."""

    def __init__(self, path: Path, reason: str) -> None:
        super().__init__(f"{path}: {reason}")
        self.path = path
        self.reason = reason


def not_regular(mode: int) -> str | None:
    """Why an entry of this mode is no regular file (`not a regular file (a FIFO)`), None for one."""
    if stat.S_ISREG(mode):
        return None
    kind = next((name for test, name in _KINDS if test(mode)), "an unknown kind of entry")
    return f"not a regular file ({kind})"


def open_regular(path: Path, follow_links: bool = True) -> BinaryIO:
    """`path` opened for reading when it is a regular file, else `NotReadableError` saying why, without
    blocking. With `follow_links` false a link is refused too, also one swapped in after the look."""
    fd = -1
    try:
        reason = not_regular((os.stat if follow_links else os.lstat)(path).st_mode)
        if reason is None:
            fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | (0 if follow_links else os.O_NOFOLLOW))
            reason = not_regular(os.fstat(fd).st_mode)
    except OSError as exc:
        swapped_link = exc.errno == errno.ELOOP and not follow_links  # a link put there after the look
        reason = f"not a regular file ({_LINK})" if swapped_link else f"cannot be read: {exc.strerror or exc}"
    except ValueError as exc:  # "embedded null byte": a path from an API body
        reason = f"not a file path ({exc})"
    if reason is None:
        return os.fdopen(fd, "rb")
    if fd >= 0:
        os.close(fd)
    raise NotReadableError(path, reason)


def read_regular_bytes(path: Path, limit: int | None = None, follow_links: bool = True) -> bytes:
    """The whole of a regular file (at most `limit` bytes, when given), read once; `NotReadableError` else."""
    with open_regular(path, follow_links) as handle:
        try:
            data = handle.read(-1 if limit is None else limit + 1)
        except OSError as exc:
            raise NotReadableError(path, f"cannot be read: {exc.strerror or exc}") from exc
    if limit is not None and len(data) > limit:
        raise NotReadableError(path, f"larger than {limit} bytes")
    return data
