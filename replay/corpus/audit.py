"""`worker-replay corpus audit DIR`: what a Claude Code corpus holds, before any suite is built (001 S1, S18).

Counted per session, one at a time (memory is bounded by the largest session, not the corpus): main
sessions and subagent runs, records (lines), `tool_use` blocks (an answer spread over several lines of
one `message.id` counts once), `tool_result` blocks and those the runtime marked `is_error`, the
decisions each stratum would get (the strata of replay/corpus/capture_suite.py, from each call's
outcome as the guard reads its `tool_result`), the clusters (sessions) they come from, each tool's
share of the actions, and the time span. Only the conversation is read, not the request log, so
files without one count too. A file that cannot be read (no regular file: a FIFO, a socket, a device,
a link), and a workspace directory that is a link or whose name is no name, is refused with its reason
and the audit goes on.
"""

from __future__ import annotations

from collections import Counter

from pydantic import Field

from core.capture import CapturedDecision
from core.guard import GuardRules
from core.records import Strict
from core.scoring import chosen_call
from core.toolcalls import parse_response
from replay.corpus.capture_suite import assign_strata
from replay.corpus.claude_code import ClaudeCodeDir, SessionFile, neutral_answer
from replay.corpus.corpus_suite import tool_results

TOP_TOOLS = 10


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


def session_rows(workspace: str, session: str, files: list[SessionFile], rules: GuardRules) -> list[CapturedDecision]:
    """One row per answer, its first call read as the suite build reads it (an input Claude Code could not
    parse is no call) with that call's outcome; no request is rebuilt."""
    outcomes = tool_results(files, rules)
    rows = []
    for f in files:
        for number, (_, answer) in enumerate(f.answers.values()):
            neutral = neutral_answer(answer)
            call = chosen_call(parse_response(neutral, None))
            first_id = (neutral.get("tool_calls") or [{}])[0].get("id")
            result = outcomes.get(str(first_id)) if call else None
            rows.append(CapturedDecision(
                id=f"{session}.{f.thread or 'main'}.{number}", captured_at="", mode="audit", workspace=workspace,
                session=session, route="", adapter="", kind="audit", request_sha256="", message_hashes=[], roles=[],
                tools_offered=[], tool_choice="", parse_outcome="ok", chosen_tool=call.tool if call else None,
                chosen_keys=[], call_id=None, calls=1, duration_s=0.0,
                outcome=result.kind if result else None, thread=f.thread or "main"))
    return rows


def audit(corpus: ClaudeCodeDir, rules: GuardRules | None = None) -> CorpusAudit:
    """The corpus's counts, one session at a time."""
    rules = rules or GuardRules()
    report = CorpusAudit(root=str(corpus.root))
    tools, strata, workspaces, counts = Counter[str](), Counter[str](), set(), Counter[str]()
    for workspace, session, files in corpus.read_sessions(report.refused):
        workspaces.add(workspace)
        counts["sessions"] += 1
        counts["subagent_runs"] += len(files) - 1
        for f in files:
            counts["records"] += f.lines
            tools.update(str(b.get("name")) for b in f.tool_uses())
            results = list(f.tool_results())
            counts["tool_result"] += len(results)
            counts["is_error"] += sum(b.get("is_error") is True for b in results)
        found = Counter(s for s in assign_strata(session_rows(workspace, session, files, rules)) if s)
        strata.update(found)
        counts["clusters"] += bool(found)
        stamps = [line["timestamp"] for f in files for _, line in f.conversation
                  if isinstance(line.get("timestamp"), str)]
        if stamps:
            report.first = min(s for s in (report.first, min(stamps)) if s)
            report.last = max(s for s in (report.last, max(stamps)) if s)
    for name, value in counts.items():
        setattr(report, name, value)
    report.workspaces = len(workspaces)
    report.tool_use = sum(tools.values())
    report.decisions = dict(sorted(strata.items()))
    report.top_tools = [ToolShare(tool=t, actions=n, share=round(n / report.tool_use, 4))
                        for t, n in tools.most_common(TOP_TOOLS)]
    return report


def format_audit(report: CorpusAudit) -> str:
    """The audit as a table a person reads."""
    rows = [("workspaces", report.workspaces), ("sessions", report.sessions),
            ("subagent runs", report.subagent_runs), ("records", report.records), ("tool_use", report.tool_use),
            ("tool_result", report.tool_result), ("is_error", report.is_error),
            *((f"decisions: {s}", n) for s, n in report.decisions.items()),
            ("decisions (all strata)", sum(report.decisions.values())), ("clusters", report.clusters)]
    width = max(len(name) for name, _ in rows)
    lines = [f"corpus {report.root}" + (f" ({report.first} to {report.last})" if report.first else "")]
    lines += [f"  {name:<{width}}  {value:>9,}" for name, value in rows]
    if report.top_tools:
        lines.append("  top tools (share of actions):")
        lines += [f"    {t.tool:<40} {t.actions:>9,}  {100 * t.share:5.1f}%" for t in report.top_tools]
    if report.refused:
        lines.append(f"  refused: {len(report.refused)} path(s)")
        lines += [f"    {reason}" for reason in report.refused]
    return "\n".join(lines)
