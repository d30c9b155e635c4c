"""The one name type: workspace, session, route, adapter, model, trial and request ids.

Names come from headers, request bodies, suites, packs and configs, and end up in file paths
(`<memory.root>/<workspace>`, `<corpus>/<workspace>/<session>.jsonl`), SQLite rows, metric labels
and echoed response headers. One type bounds them all: at most 128 characters, ASCII letters,
digits and `._:-`, starting with a letter or digit. So a name can never climb out of a directory
(`..`, `/`), never carries text that is not valid Unicode, and never grows a store or a header
without bound.
"""

from __future__ import annotations

import re
from typing import Annotated

from pydantic import StringConstraints

from core.errors import WorkerTierError

NAME_MAX_CHARS = 128
NAME_PATTERN = rf"^[A-Za-z0-9][A-Za-z0-9._:-]{{0,{NAME_MAX_CHARS - 1}}}$"
Name = Annotated[str, StringConstraints(pattern=NAME_PATTERN)]
"""A pydantic field that only holds a name."""

_NAME = re.compile(NAME_PATTERN.removesuffix("$"))
NAME_RULE = f"1–{NAME_MAX_CHARS} characters of A–Z a–z 0–9 . _ : -, starting with a letter or digit"
"""The rule in words, for error messages (which never echo the refused value whole)."""


class BadNameError(WorkerTierError, ValueError):
    """A value that should be a name and is not; the message shows at most a short, safe excerpt."""


def is_name(value: object) -> bool:
    """Whether `value` is a string that is a name."""
    return isinstance(value, str) and _NAME.fullmatch(value) is not None


def check_name(value: object, what: str) -> str:
    """`value` when it is a name, else `BadNameError` saying what should have been one."""
    if is_name(value):
        return str(value)
    raise BadNameError(f"{what} must be a name ({NAME_RULE}); got {excerpt(value)}")


def excerpt(value: object, limit: int = 40) -> str:
    """A printable, bounded rendering of an untrusted value for an error message: never longer than
    about `limit` characters, never a lone surrogate or a control character."""
    text = value if isinstance(value, str) else repr(value)
    shown = ascii(text)
    return shown if len(shown) <= limit + 2 else f"{shown[:limit]}… ({len(text)} characters)"
