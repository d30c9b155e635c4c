"""Which transcript source reads a corpus directory: this project's format or Claude Code's session files.

`--transcript-format auto` (the default) looks at the directory: Claude Code's layout is one directory
per workspace holding that workspace's `projects/` (the config directory of the workspace's
container); anything else is read as `<workspace>/<session>.jsonl`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from replay.corpus.claude_code import ClaudeCodeDir
from replay.corpus.transcripts import TranscriptDir, TranscriptError, TranscriptSource

TranscriptFormat = Literal["auto", "transcripts", "claude-code"]
FORMATS: tuple[TranscriptFormat, ...] = ("auto", "transcripts", "claude-code")


def is_claude_code(root: Path) -> bool:
    """Whether `root` is laid out as Claude Code corpora are: `<workspace>/projects/<cwd-slug>/`."""
    return root.is_dir() and any(p.is_dir() for p in root.glob("*/projects"))


def open_source(root: Path, kind: TranscriptFormat = "auto") -> TranscriptSource:
    """The source that reads `root` (TranscriptError when it is no directory)."""
    if not root.is_dir():
        raise TranscriptError(f"no transcript directory at {root}")
    if kind == "claude-code" or (kind == "auto" and is_claude_code(root)):
        return ClaudeCodeDir(root)
    return TranscriptDir(root)
