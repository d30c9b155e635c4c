"""`worker-replay qa check`: the deterministic checks over every run of the corpora, findings per run and
counts per workspace and kind (`--json`: `CheckReport`)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable

from pydantic import Field

from core.guard import GuardRules
from core.records import Strict
from replay.corpus.claude_code import ClaudeCodeDir
from replay.qa.checks import CheckRules, Finding, FindingKind, check_run
from replay.qa.finished_run import Run, Unchecked, corpus_runs


class UncheckedRun(Strict):
    workspace: str
    session: str
    reason: str


class CheckReport(Strict):
    findings: list[Finding] = Field(default_factory=list)
    runs: int = 0
    """Finished runs checked."""
    counts: dict[str, dict[FindingKind, int]] = Field(default_factory=dict)
    """Per workspace with a run, findings per kind (every kind, zeros included)."""
    unchecked: list[UncheckedRun] = Field(default_factory=list)
    """Sessions that hold no finished run, with the reason."""
    refused: list[str] = Field(default_factory=list)
    """Session files that could not be read, with the reason."""


def check_runs(runs: Iterable[Run | Unchecked], rules: CheckRules) -> CheckReport:
    """The report of a stream of runs (pure)."""
    report = CheckReport()
    for run in runs:
        if isinstance(run, Unchecked):
            report.unchecked.append(UncheckedRun(workspace=run.workspace, session=run.session, reason=run.reason))
            continue
        report.runs += 1
        counts = report.counts.setdefault(run.workspace, dict.fromkeys(FindingKind, 0))
        for finding in check_run(run, rules):
            report.findings.append(finding)
            counts[finding.kind] += 1
    return report


def check_corpora(corpora: list[ClaudeCodeDir], rules: CheckRules, guard: GuardRules) -> CheckReport:
    refused: list[str] = []
    report = check_runs(corpus_runs(corpora, guard, refused), rules)
    report.refused = refused
    return report


WHY_UNCHECKED = {
    "a tool result": "the run stopped on a tool's result (max turns, a crash, a session cut short)",
    "the runtime's API-error message": "the runtime's API call failed and it wrote its own error as the answer",
    "a tool call": "the last answer asked for a tool and nothing answered it",
    "a user prompt": "a prompt was never answered",
}
"""What each way a thread can end without a final answer means, for the tally a report ends with."""


def _why_unchecked(report: CheckReport) -> list[str]:
    """The sessions without a finished run counted by how their thread ends (the reason without its record), so
    a corpus where nothing was checked says why in one line rather than one per session."""
    if not report.unchecked:
        return []
    ends = Counter(u.reason.split(" (record ")[0] for u in report.unchecked)
    lines = [f"  {len(report.unchecked)} session(s) without a finished run (Stop-QA judges a run by its final "
             "answer), by how the thread ends:"]
    for reason, n in ends.most_common():
        end = reason.removeprefix("no final answer: the thread ends in ")
        lines.append(f"    {n} {reason}" + (f": {WHY_UNCHECKED[end]}" if end in WHY_UNCHECKED else ""))
    if not report.runs:
        lines.append("  nothing was checked: no session ends in a final answer with text")
    return lines


def format_check(report: CheckReport) -> str:
    kinds = list(FindingKind)
    lines = [f"qa check: {report.runs} finished run(s) in {len(report.counts)} workspace(s), "
             f"{len(report.findings)} finding(s); {len(report.unchecked)} session(s) without a finished run, "
             f"{len(report.refused)} unreadable"]
    lines += [f"  {f.workspace}/{f.session}  {f.kind}: {f.detail}  [records {', '.join(f.records)}]"
              for f in report.findings]
    if report.counts:
        width = max(len("workspace"), *(len(w) for w in report.counts))
        lines.append(f"  {'workspace':<{width}}  " + "  ".join(kinds))
        lines += [f"  {workspace:<{width}}  " + "  ".join(f"{counts[k]:>{len(k)}}" for k in kinds)
                  for workspace, counts in sorted(report.counts.items())]
    lines += [f"  not checked: {u.workspace}/{u.session}: {u.reason}" for u in report.unchecked]
    lines += _why_unchecked(report)
    lines += [f"  unreadable: {reason}" for reason in report.refused]
    return "\n".join(lines)
