"""`worker-replay corpus audit DIR`: what a Claude Code corpus holds, before any suite is built (001 S1, S18).

Counted per session, one at a time (memory is bounded by the largest session, not the corpus): main
sessions and subagent runs, records (lines), `tool_use` blocks (an answer spread over several lines of
one `message.id` counts once), `tool_result` blocks and those the runtime marked `is_error`, the
decisions each stratum would get (the strata of replay/corpus/capture_suite.py, from each call's
outcome as the guard reads its `tool_result`), the clusters (sessions) they come from, each tool's
share of the actions, and the time span. Only the conversation is read, not the request log, so
files without one count too. A file that cannot be read (no regular file: a FIFO, a socket, a device,
a link), and a workspace directory that is a link or whose name is no name, is refused with its reason
and the audit goes on. Of each line only the fields a count reads are parsed (`read_session_file`'s
`conversation_only`): the request log, most of a file's bytes, is skipped unbuilt.

Sessions are counted in batches on every core the process may use (parsing is the cost, and a corpus of
S1's size is 19,000 sessions), with at most `IN_FLIGHT` batches queued per worker, so memory stays a few
sessions' worth per process; the counts are merged in session order, so the report is the one a single
process writes, byte for byte (a tool's place among equals in `top_tools`, the refusals' order). A corpus
of one batch is counted in the process itself.
"""

from __future__ import annotations

import os
from collections import Counter, deque
from collections.abc import Iterator
from concurrent.futures import Future, ProcessPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

from pydantic import Field

from core.guard import GuardRules
from core.records import Strict
from core.scoring import chosen_call
from core.toolcalls import parse_response
from replay.corpus.capture_suite import assign_strata
from replay.corpus.claude_code import ClaudeCodeDir, SessionFile, neutral_answer
from replay.corpus.corpus_suite import ToolOutcomes
from replay.corpus.transcripts import TranscriptError

TOP_TOOLS = 10
BATCH = 256
"""Sessions a worker counts per task (a tenth of a second or so): each hand-over needs the main process, which
a busy machine schedules late, so fewer and larger tasks keep the workers fed."""
IN_FLIGHT = 2
"""Batches queued per worker beyond the ones being counted."""


class ToolShare(Strict):
    tool: str
    actions: int
    share: float
    """Of all `tool_use` blocks, 0–1."""


class CorpusAudit(Strict):
    """`corpus audit --json`: the corpus's counts."""

    root: str
    workspaces: int = 0
    sessions: int = 0
    subagent_runs: int = 0
    records: int = 0
    tool_use: int = 0
    tool_result: int = 0
    is_error: int = 0
    decisions: dict[str, int] = Field(default_factory=dict)
    """Decisions eligible per stratum (answers whose first call has a result that gives a stratum)."""
    clusters: int = 0
    """Sessions with at least one eligible decision."""
    top_tools: list[ToolShare] = Field(default_factory=list)
    first: str | None = None
    last: str | None = None
    refused: list[str] = Field(default_factory=list)
    """Files and workspace directories that were not read, each with its reason."""


class AuditRow(NamedTuple):
    """An answer as strata read it (a capture row holds a request's worth of fields the audit never fills)."""

    workspace: str
    session: str
    thread: str
    chosen_tool: str | None
    outcome: str | None


def session_rows(workspace: str, session: str, files: list[SessionFile], outcomes: ToolOutcomes) -> list[AuditRow]:
    """One row per answer, its first call read as the suite build reads it (an input Claude Code could not
    parse is no call) with that call's outcome; no request is rebuilt."""
    rows = []
    for f in files:
        for _, answer in f.answers.values():
            neutral = neutral_answer(answer)
            call = chosen_call(parse_response(neutral, None))
            calls = neutral.get("tool_calls") or []
            first_id = calls[0].get("id") if calls else None
            result = outcomes.get(str(first_id)) if call else None
            rows.append(AuditRow(workspace, session, f.thread, call.tool if call else None,
                                 result.kind if result else None))
    return rows


Task = tuple[list[str], str, str, Path]
"""One session to count: the refusals met since the previous session, its workspace, id and main file."""


@dataclass
class Tally:
    """The counts of sessions taken in order (a batch's, or the corpus's): what a worker sends back, small
    whatever the sessions held. Adding tallies in session order keeps `tools`' order of first appearance,
    which breaks ties in `top_tools`."""

    refused: list[str] = field(default_factory=list)
    workspaces: set[str] = field(default_factory=set)
    sessions: int = 0
    subagent_runs: int = 0
    records: int = 0
    tool_result: int = 0
    is_error: int = 0
    clusters: int = 0
    tools: Counter[str] = field(default_factory=Counter)
    strata: Counter[str] = field(default_factory=Counter)
    first: str | None = None
    last: str | None = None

    def add(self, other: Tally) -> None:
        self.refused += other.refused
        self.workspaces |= other.workspaces
        for name in ("sessions", "subagent_runs", "records", "tool_result", "is_error", "clusters"):
            setattr(self, name, getattr(self, name) + getattr(other, name))
        self.tools.update(other.tools)
        self.strata.update(other.strata)
        self.span(other.first, other.last)

    def span(self, first: str | None, last: str | None) -> None:
        """Widen the time span to [first, last] (an empty time is none)."""
        self.first = min((s for s in (self.first, first) if s), default=None)
        self.last = max((s for s in (self.last, last) if s), default=None)

    def count(self, workspace: str, session: str, files: list[SessionFile], rules: GuardRules) -> None:
        """Add one session's files."""
        self.workspaces.add(workspace)
        self.sessions += 1
        self.subagent_runs += len(files) - 1
        self.records += sum(f.lines for f in files)
        outcomes = ToolOutcomes(files, rules)
        self.tools.update(str(b.get("name")) for b in outcomes.uses)
        self.tool_result += len(outcomes.results)
        self.is_error += sum(b.get("is_error") is True for b in outcomes.results)
        found = Counter(s for s in assign_strata(session_rows(workspace, session, files, outcomes)) if s)
        self.strata.update(found)
        self.clusters += bool(found)
        stamps = [line["timestamp"] for f in files for _, line in f.conversation
                  if isinstance(line.get("timestamp"), str)]
        if stamps:
            self.span(min(stamps), max(stamps))


def count_batch(corpus: ClaudeCodeDir, rules: GuardRules, tasks: list[Task]) -> Tally:
    """A batch of sessions counted."""
    tally = Tally()
    for refused_before, workspace, session, main in tasks:
        tally.refused += refused_before
        try:
            files = corpus.read_with_subagents(workspace, session, main, conversation_only=True)
        except TranscriptError as exc:
            tally.refused.append(str(exc))
            continue
        tally.count(workspace, session, files, rules)
    return tally


_worker: tuple[ClaudeCodeDir, GuardRules] | None = None
"""A worker process's corpus and rules, opened once: the directories it resolves serve every batch it counts."""


def _open_worker(root: Path, max_line_bytes: int, rules: GuardRules) -> None:
    global _worker
    _worker = ClaudeCodeDir(root, max_line_bytes), rules


def _count_in_worker(tasks: list[Task]) -> Tally:
    assert _worker is not None, "a worker's corpus is opened when the pool starts it"
    return count_batch(*_worker, tasks)


def batches(corpus: ClaudeCodeDir, refused: list[str], size: int) -> Iterator[list[Task]]:
    """The corpus's sessions in order, `size` at a time, each with the refusals met before it (those after the
    last session stay in `refused`)."""
    batch: list[Task] = []
    for workspace, session, main in corpus.sessions(refused):
        batch.append((refused[:], workspace, session, main))
        refused.clear()
        if len(batch) == size:
            yield batch
            batch = []
    if batch:
        yield batch


def tallies(corpus: ClaudeCodeDir, rules: GuardRules, refused: list[str], workers: int, size: int) -> Iterator[Tally]:
    """Each batch's tally in session order: in this process for a corpus of one batch (or one worker), else on
    `workers` processes."""
    tasks = batches(corpus, refused, size)
    head = [batch for batch in (next(tasks, None), next(tasks, None)) if batch is not None]
    if len(head) < 2 or workers < 2:
        yield from (count_batch(corpus, rules, batch) for batch in (*head, *tasks))
        return
    with ProcessPoolExecutor(workers, initializer=_open_worker,
                             initargs=(corpus.root, corpus.max_line_bytes, rules)) as pool:
        pending: deque[Future[Tally]] = deque()
        try:
            for batch in (*head, *tasks):
                pending.append(pool.submit(_count_in_worker, batch))
                if len(pending) > workers * IN_FLIGHT:
                    yield pending.popleft().result()
            while pending:
                yield pending.popleft().result()
        finally:  # stopped (SIGTERM, Ctrl-C, an error): wait for the batches being counted, not the queued ones
            for future in pending:
                future.cancel()


def audit(corpus: ClaudeCodeDir, rules: GuardRules | None = None, *, workers: int | None = None,
          batch: int = BATCH) -> CorpusAudit:
    """The corpus's counts: sessions counted `batch` at a time on `workers` processes (default: every core
    this process may use), added up in session order."""
    total, refused = Tally(), list[str]()
    for tally in tallies(corpus, rules or GuardRules(), refused, workers or len(os.sched_getaffinity(0)), batch):
        total.add(tally)
    tool_use = sum(total.tools.values())
    return CorpusAudit(
        root=str(corpus.root), workspaces=len(total.workspaces), sessions=total.sessions,
        subagent_runs=total.subagent_runs, records=total.records, tool_use=tool_use, tool_result=total.tool_result,
        is_error=total.is_error, decisions=dict(sorted(total.strata.items())), clusters=total.clusters,
        top_tools=[ToolShare(tool=t, actions=n, share=round(n / tool_use, 4))
                   for t, n in total.tools.most_common(TOP_TOOLS)],
        first=total.first, last=total.last, refused=total.refused + refused)


def format_audit(report: CorpusAudit) -> str:
    """The audit as a table a person reads."""
    rows = [("workspaces", report.workspaces), ("sessions", report.sessions),
            ("subagent runs", report.subagent_runs), ("records", report.records), ("tool_use", report.tool_use),
            ("tool_result", report.tool_result), ("is_error", report.is_error),
            *((f"decisions: {s}", n) for s, n in report.decisions.items()),
            ("decisions (all strata)", sum(report.decisions.values())),
            ("clusters (sessions with a decision)", report.clusters)]
    width = max(len(name) for name, _ in rows)
    lines = [f"corpus {report.root}" + (f" ({report.first} to {report.last})" if report.first else "")]
    lines += [f"  {name:<{width}}  {value:>9,}" for name, value in rows]
    lines.append("  a cluster is one task: a split keeps it on one side, a curated set takes at most max_per_cluster "
                 "of it")
    if report.top_tools:
        lines.append("  top tools (share of actions):")
        lines += [f"    {t.tool:<40} {t.actions:>9,}  {100 * t.share:5.1f}%" for t in report.top_tools]
    if report.refused:
        lines.append(f"  refused: {len(report.refused)} path(s)")
        lines += [f"    {reason}" for reason in report.refused]
    return "\n".join(lines)
