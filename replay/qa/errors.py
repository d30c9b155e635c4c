"""Stop-QA's branch of the error tree."""

from __future__ import annotations

from replay.errors import ReplayError


class QAError(ReplayError, ValueError):
    """Stop-QA input that cannot be used: the message names the file (and line) and what is wrong."""
