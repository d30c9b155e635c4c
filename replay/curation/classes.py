"""The closed sets curation speaks in: what a corpus decision is, which class of the mix it fills, and whose
answer its target was."""

from __future__ import annotations

from enum import StrEnum


class DecisionClass(StrEnum):
    CLEAN = "clean"
    VERIFIED_ACTION = "verified_action"
    RECOVERY = "recovery"
    KNOWN_FAILURE = "known_failure"
    NO_TOOL = "no_tool"


ACTIONS = frozenset({DecisionClass.CLEAN, DecisionClass.VERIFIED_ACTION, DecisionClass.RECOVERY})
"""The classes whose recorded call ran and succeeded: what `clean` may be filled from."""


class MixClass(StrEnum):
    """The classes of the training mix (E11)."""

    CLEAN = "clean"
    """An action of the worker's own that succeeded: a clean trajectory's, or one the guard verified."""
    RECOVERY = "recovery"
    """A replay-proven correction of a failed action (executed in a sandbox, or recorded and replayed)."""
    POLICY = "policy"
    """What a standing rule the lesson gate kept asked for, with the prompt stripped of memory."""
    NEGATIVE = "negative"
    """The recorded move was an answer, not a call (no tool)."""


class Origin(StrEnum):
    WORKER = "worker"
    CLAUDE = "claude"
    UNKNOWN = "unknown"
