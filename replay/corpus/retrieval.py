"""Retrieval reads per turn and index coverage (001 §10 items 1 and 7): how the runtime reads its memory.

The essentials (`memory/profile.md`, `index.md`, `weekly-summary.md`) are injected every turn; every other
memory file is read on demand, through the runtime's file-read tool, found through `memory/index.md`.
So, from the corpus (Claude Code's session files or this project's transcripts), per session: the turns
(model answers) and those whose answer calls the read tool on a path under the workspace's `memory/`, the
reads and the files read; per workspace, with its memory tree (`--memory-root`): the files the index does
not list (never findable through it), the listed files no session read, and the index's dead links.

Paths are compared as text and never opened: a relative path is read against the session's working
directory (Claude Code records it as `cwd`; this project's transcripts are relative to the workspace), and
`..` is resolved lexically. A path that climbs out of the workspace through `..` is counted as `escaped`
and nothing more; a path elsewhere (a library, `/etc`) is not a memory read. A transcript written with
absolute paths but no `cwd` is placed by its workspace's name: what follows the last `/<workspace>/`.
"""

from __future__ import annotations

import json
import posixpath
import re
from collections.abc import Collection, Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import Field

from core.records import Decision, Strict
from core.regularfile import NotReadableError, read_regular_bytes
from core.wire import WIRES, is_output_item
from core.wireshapes import NeutralAnswer
from replay.corpus.claude_code import ClaudeCodeDir, SessionFile, neutral_answer
from replay.corpus.transcripts import Transcript, TranscriptDir, TranscriptError, TranscriptSource
from replay.memory.files import ESSENTIAL_FILES

MEMORY = "memory"
INDEX = "memory/index.md"
READ_TOOLS = {"Read": "file_path"}
"""The runtime's file-read tool and the argument naming the file (Claude Code's `Read`)."""
# Link targets and bare file names of an index: `[notes](notes/x.md)`, `` `memory/y.md` ``, `z.md`.
_LINK_RE = re.compile(r"\]\(\s*<?([^)\s>]+)>?[^)]*\)|([\w./-]+\.md)\b")


@dataclass(frozen=True)
class TurnReads:
    """One model answer of a session: the paths its calls to the read tool named."""

    paths: tuple[str, ...]


@dataclass(frozen=True)
class SessionRecord:
    workspace: str
    session: str
    cwd: str | None
    """The working directory the session's relative paths are read against (None: the workspace)."""
    turns: tuple[TurnReads, ...]


class SessionReads(Strict):
    workspace: str
    session: str
    cwd: str | None = None
    """The working directory its relative paths are read against (None: the workspace)."""
    turns: int
    turns_reading: int
    """Turns whose answer read at least one memory file on demand."""
    reads: int
    escaped: int
    """Read paths that climb out of the workspace through `..` (counted, never followed)."""
    files: list[str]
    """The memory files read, relative to the workspace."""


class WorkspaceReads(Strict):
    workspace: str
    sessions: int = 0
    turns: int = 0
    turns_reading: int = 0
    reads: int = 0
    escaped: int = 0
    files_read: list[str] = Field(default_factory=list)
    memory_files: int | None = None
    """Files in the memory tree, the essentials left out (None: no memory root given, or no tree)."""
    listed: int | None = None
    unlisted: list[str] = Field(default_factory=list)
    """Memory files the index does not list: never findable through it."""
    never_read: list[str] = Field(default_factory=list)
    """Listed files no session of the corpus read."""
    dead_links: list[str] = Field(default_factory=list)
    """What the index lists that the tree does not hold."""

    @property
    def reads_per_turn(self) -> float:
        return self.reads / self.turns if self.turns else 0.0


class RetrievalReport(Strict):
    """`corpus reads --json`."""

    root: str
    sessions: list[SessionReads] = Field(default_factory=list)
    workspaces: list[WorkspaceReads] = Field(default_factory=list)
    refused: list[str] = Field(default_factory=list)


def place(path: str, cwd: str | None, workspace: str) -> str | None:
    """`path` relative to the workspace, `..` resolved as text: `..` when it climbs out of the workspace, None
    when it names a file elsewhere."""
    if not path:
        return None
    relative = path
    if posixpath.isabs(path):
        if cwd is None:
            marker = f"/{workspace}/"
            if marker not in path:
                return None
            relative = path.rsplit(marker, 1)[1]
        else:
            base = posixpath.normpath(cwd).rstrip("/") + "/"
            if path.startswith(base):
                relative = path[len(base):]
            elif posixpath.normpath(path).startswith(base):
                relative = posixpath.normpath(path)[len(base):]
            else:
                return None
    normal = posixpath.normpath(relative)
    return ".." if normal == ".." or normal.startswith("../") else normal


def memory_read(path: str, cwd: str | None, workspace: str) -> str | None:
    """The memory file a read names (relative to the workspace), `..` for an escape, None for no memory read."""
    placed = place(path, cwd, workspace)
    if placed == ".." or (placed is not None and placed.startswith(f"{MEMORY}/")):
        return placed
    return None


def read_paths(answer: NeutralAnswer | None, tools: dict[str, str]) -> tuple[str, ...]:
    """The paths an answer's calls to the read tool name (a call whose arguments are no JSON object names none)."""
    paths = []
    for call in (answer or {}).get("tool_calls") or []:
        function = call.get("function") if isinstance(call, dict) else None
        if not isinstance(function, dict) or function.get("name") not in tools:
            continue
        try:
            arguments = json.loads(function.get("arguments") or "")
        except (TypeError, ValueError):
            continue
        value = arguments.get(tools[function["name"]]) if isinstance(arguments, dict) else None
        if isinstance(value, str):
            paths.append(value)
    return tuple(paths)


def claude_code_record(workspace: str, session: str, files: Sequence[SessionFile],
                       tools: dict[str, str]) -> SessionRecord:
    """A Claude Code session: its subagents' turns with the main loop's."""
    return SessionRecord(workspace, session, _cwd(files), tuple(
        TurnReads(read_paths(neutral_answer(answer), tools)) for f in files for _, answer in f.answers.values()))


def _cwd(files: Sequence[SessionFile]) -> str | None:
    for f in files:
        for _, line in f.conversation:
            if isinstance(line.get("cwd"), str):
                return str(line["cwd"])
    return None


def transcript_record(transcript: Transcript, tools: dict[str, str]) -> SessionRecord:
    """A session of this project's transcripts: a turn per assistant message (Responses: per run of output
    items)."""
    wire, messages = WIRES[transcript.api], list(transcript.messages)
    turns = [TurnReads(read_paths(wire.transcript_answer(messages[i:]), tools)) for i in range(len(messages))
             if _opens_turn(messages, i, transcript.api == "responses")]
    return SessionRecord(transcript.header.workspace, transcript.header.session, None, tuple(turns))


def session_records(source: TranscriptSource, tools: dict[str, str], refused: list[str],
                    only: Collection[tuple[str, str]] | None = None) -> Iterator[SessionRecord]:
    """Every session of either kind of corpus (or those of `only`, by workspace and session id), one at a time; a
    session that cannot be read is left out and its reason appended to `refused`."""
    if isinstance(source, ClaudeCodeDir):
        keys = sorted(only) if only is not None else [(w, s) for w, s, _ in source.sessions(refused)]
        for workspace, session in keys:
            try:
                files = [f for main in source.main_files(workspace, session)
                         for f in source.read_with_subagents(workspace, session, main)]
            except TranscriptError as exc:
                refused.append(str(exc))
                continue
            if files:
                yield claude_code_record(workspace, session, files, tools)
    elif isinstance(source, TranscriptDir):
        keys = sorted(only) if only is not None else list(source.sessions(refused))
        for workspace, session in keys:
            try:
                transcript = source.session(workspace, session)
            except TranscriptError as exc:
                refused.append(str(exc))
                continue
            if transcript is not None:
                yield transcript_record(transcript, tools)
    else:
        raise TranscriptError(f"{source.root}: retrieval reads Claude Code's session files and this project's "
                              "transcripts only")


def decision_reads(source: TranscriptSource, decisions: Iterable[Decision], refused: list[str],
                   tools: dict[str, str] | None = None) -> dict[tuple[str, str], SessionReads]:
    """The reads of each decision's session the corpus holds, by (workspace, session)."""
    keys = {(d.workspace, d.session) for d in decisions}
    return {(r.workspace, r.session): session_reads(r)
            for r in session_records(source, tools or READ_TOOLS, refused, keys)}


def history_reads(decision: Decision, cwd: str | None, tools: dict[str, str] | None = None) -> tuple[str, ...]:
    """The memory files the decision's own history read through the read tool before the decision. A `withheld`
    arm strips only the injected memory blocks: what the agent read itself is still in front of the model."""
    wire, turn = decision.wire, decision.turn
    paths = [path for i in range(len(turn)) if _opens_turn(turn, i, wire.api == "responses")
             for path in read_paths(wire.transcript_answer(turn[i:]), tools or READ_TOOLS)]
    placed = {memory_read(path, cwd, decision.workspace) for path in paths}
    return tuple(sorted(p for p in placed if p is not None and p != ".."))


def _opens_turn(messages: list[dict[str, Any]], i: int, responses: bool) -> bool:
    if responses:
        return is_output_item(messages[i]) and (i == 0 or not is_output_item(messages[i - 1]))
    return messages[i].get("role") == "assistant"


def session_reads(record: SessionRecord) -> SessionReads:
    placed = [[memory_read(p, record.cwd, record.workspace) for p in turn.paths] for turn in record.turns]
    reads = [p for turn in placed for p in turn if p is not None]
    return SessionReads(workspace=record.workspace, session=record.session, cwd=record.cwd, turns=len(record.turns),
                        turns_reading=sum(any(p not in (None, "..") for p in turn) for turn in placed),
                        reads=sum(p != ".." for p in reads), escaped=reads.count(".."),
                        files=sorted({p for p in reads if p != ".."}))


def index_links(text: str) -> set[str]:
    """The memory files an index lists, relative to the workspace (its links are relative to `memory/`)."""
    listed = set()
    for link, bare in _LINK_RE.findall(text):
        target = (link or bare).split("#", 1)[0]
        if not target or "://" in target or posixpath.isabs(target):
            continue
        normal = posixpath.normpath(target if target.startswith(f"{MEMORY}/") else f"{MEMORY}/{target}")
        if normal.startswith(f"{MEMORY}/"):
            listed.add(normal)
    return listed


def coverage(summary: WorkspaceReads, workspace_dir: Path) -> None:
    """Fill in the index coverage of `summary` from the workspace's memory tree (links are not followed)."""
    tree = workspace_dir / MEMORY
    if not tree.is_dir() or tree.is_symlink():
        return
    files = {p.relative_to(workspace_dir).as_posix() for p in tree.rglob("*") if p.is_file() and not p.is_symlink()}
    files -= set(ESSENTIAL_FILES)
    try:
        text = read_regular_bytes(workspace_dir / INDEX, follow_links=False).decode("utf-8", errors="replace")
    except NotReadableError:  # absent, a link, a FIFO, a device: no index to read
        text = ""
    listed = index_links(text) - set(ESSENTIAL_FILES)
    summary.memory_files, summary.listed = len(files), len(listed & files)
    summary.unlisted = sorted(files - listed)
    summary.never_read = sorted((listed & files) - set(summary.files_read))
    summary.dead_links = sorted(listed - files)


def retrieval(records: Iterator[SessionRecord], root: str, memory_dirs: dict[str, Path] | None = None,
              refused: list[str] | None = None) -> RetrievalReport:
    """The figures of every session and of each workspace (with its memory tree's coverage when given)."""
    report = RetrievalReport(root=root)
    by_workspace: dict[str, WorkspaceReads] = {}
    for record in records:
        reads = session_reads(record)
        report.sessions.append(reads)
        summary = by_workspace.setdefault(record.workspace, WorkspaceReads(workspace=record.workspace))
        summary.sessions += 1
        for key in ("turns", "turns_reading", "reads", "escaped"):
            setattr(summary, key, getattr(summary, key) + getattr(reads, key))
        summary.files_read = sorted(set(summary.files_read) | set(reads.files))
    for name, path in (memory_dirs or {}).items():
        coverage(by_workspace.setdefault(name, WorkspaceReads(workspace=name)), path)
    report.workspaces = [by_workspace[name] for name in sorted(by_workspace)]
    report.refused = list(refused or [])
    return report


def format_retrieval(report: RetrievalReport, shown: int = 10) -> str:
    """Per workspace: turns, reads per turn, files read, escapes, and the index's coverage."""
    columns = ("sessions", "turns", "turns reading", "reads/turn", "files read", "escaped", "memory files",
               "unlisted", "never read")
    width = max([len("workspace"), *(len(w.workspace) for w in report.workspaces)])
    lines = [f"memory reads in {report.root}", f"{'workspace':<{width}}  " + "  ".join(columns)]
    for w in report.workspaces:
        tree = ("-", "-", "-") if w.memory_files is None else (w.memory_files, len(w.unlisted), len(w.never_read))
        cells = (w.sessions, w.turns, w.turns_reading, f"{w.reads_per_turn:.2f}", len(w.files_read), w.escaped, *tree)
        lines.append(f"{w.workspace:<{width}}  " + "  ".join(f"{c:>{len(h)}}" for c, h in zip(cells, columns,
                                                                                               strict=True)))
    for w in report.workspaces:
        for label, names in (("not in the index", w.unlisted), ("listed, never read", w.never_read),
                             ("dead links in the index", w.dead_links)):
            if names:
                more = f" (+{len(names) - shown} more)" if len(names) > shown else ""
                lines.append(f"  {w.workspace}: {label}: " + ", ".join(names[:shown]) + more)
    if report.refused:
        lines.append(f"refused: {len(report.refused)} file(s)")
        lines += [f"  {reason}" for reason in report.refused]
    return "\n".join(lines)
