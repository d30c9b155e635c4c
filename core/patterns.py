"""Regular expressions that come from files: matched in linear time, or refused when read.

A pattern in a scenario pack (a claim's `pattern`) or a config (the guard's `blocked_patterns`)
is data, and Python's backtracking `re` can take exponential time on it: `^(a+)+$` against
`"a" * 34 + "!"` never returns. Every such pattern is compiled by RE2 (`google-re2`), whose
matching time is linear in the text. RE2 has no backreferences and no lookaround; a pattern
that needs them does not compile and is refused where it is read (file and line), never when
the first answer arrives.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Annotated, Any

import re2
from pydantic import AfterValidator

_MAX_MEM = 8 << 20  # RE2's own default: a pattern whose program needs more is refused


def _options(ignore_case: bool) -> Any:
    options = re2.Options()
    options.log_errors = False  # the refusal is ours to report, not a line on stderr
    options.max_mem = _MAX_MEM
    options.case_sensitive = not ignore_case
    return options


@lru_cache(maxsize=4096)
def compile_pattern(pattern: str, ignore_case: bool = False) -> Any:
    """The RE2 program of `pattern`; ValueError when RE2 cannot compile it."""
    try:
        return re2.compile(pattern, _options(ignore_case))
    except (re2.error, TypeError, UnicodeEncodeError) as exc:
        reason = exc.args[0].decode(errors="replace") if exc.args and isinstance(exc.args[0], bytes) else str(exc)
        raise ValueError(f"pattern does not compile in RE2 (linear-time: no backreferences or lookaround): "
                         f"{reason[:200]}") from None


def check_pattern(pattern: str) -> str:
    """`pattern` when RE2 compiles it (a pydantic validator: the error names the field)."""
    compile_pattern(pattern)
    return pattern


Pattern = Annotated[str, AfterValidator(check_pattern)]
"""A pydantic field that only holds a pattern RE2 compiles."""


def search(pattern: str, text: str, ignore_case: bool = False) -> bool:
    """Whether `pattern` matches anywhere in `text`, in time linear in `text`."""
    program = compile_pattern(pattern, ignore_case)
    try:
        return program.search(text) is not None
    except UnicodeEncodeError:  # a lone surrogate (JSON allows "\ud800"): match the text without it
        return program.search(text.encode("utf-8", "replace").decode("utf-8")) is not None
