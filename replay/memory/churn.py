"""Rule churn per ISO week: rules added, merged and retired (001 §10 item 7), read from the record.

The record is the provenance log (`memory/reference/corrections-log.md`, 001 S6): a rule is *added* in
the week of the first date its `**History:**` names, and leaves in the week its `## Retired` line is
dated, as a *merge* when the line names the rule that superseded it (`superseded by lc:<new>`) and as a
plain *retirement* otherwise, so merged + retired is every rule that left. A rule retired only in the
rules file's own `## Retired` section carries no date there. What the record does not date is counted
under `undated`, never guessed.

Where a workspace keeps its memory in git (001 S9), `git_churn` counts the same three from the history
instead: a rule is added in the week of the first commit whose rules file or log holds its id, and leaves
in the week of the first commit that lists it as retired. The two agree when the maintenance agents
commit what they record, and `memory stats --git` lists the weeks where they do not.
"""

from __future__ import annotations

import re
import subprocess
from collections import Counter
from collections.abc import Iterable, Mapping
from datetime import date, datetime
from pathlib import Path

from core.records import Strict
from replay.errors import ReplayError
from replay.memory.files import BINDING, LC_FILE, LOG_FILE, WorkspaceMemory, memory_from_texts

KINDS = ("added", "merged", "retired")
UNDATED = "undated"
_DATE_RE = re.compile(r"\b(\d{4}-\d{2}-\d{2})\b")
# Reading another team's repository: never its fsmonitor hook, and whoever owns it.
GIT = ("git", "-c", "core.fsmonitor=false", "-c", "safe.directory=*")
GIT_TIMEOUT_S = 60


class WeekChurn(Strict):
    added: int = 0
    merged: int = 0
    retired: int = 0

    def __add__(self, other: WeekChurn) -> WeekChurn:
        return WeekChurn(**{k: getattr(self, k) + getattr(other, k) for k in KINDS})


Churn = dict[str, WeekChurn]
"""ISO week (`2026-W36`, or `undated`) -> what happened that week, weeks in order."""


def iso_week(day: date) -> str:
    year, week, _ = day.isocalendar()
    return f"{year}-W{week:02d}"


def first_date(text: str | None) -> date | None:
    """The earliest valid date a history names (`2026-04-06 added · 2026-04-10 promoted`)."""
    days = []
    for found in _DATE_RE.findall(text or ""):
        try:
            days.append(date.fromisoformat(found))
        except ValueError:
            continue
    return min(days, default=None)


def _count(events: Iterable[tuple[str, date | None]]) -> Churn:
    counted = Counter((iso_week(day) if day else UNDATED, kind) for kind, day in events)
    weeks = sorted({week for week, _ in counted})
    return {week: WeekChurn(**{kind: counted[week, kind] for kind in KINDS}) for week in weeks}


def record_churn(memory: WorkspaceMemory) -> Churn:
    """Added, merged and retired per week from the workspace's provenance log (each id counted once)."""
    events: list[tuple[str, date | None]] = []
    added: set[str] = set()
    for entry in memory.log:
        if entry.id not in added:
            added.add(entry.id)
            events.append(("added", first_date(entry.history)))
    left: set[str] = set()
    for retirement in memory.retirements:
        if retirement.id not in left:
            left.add(retirement.id)
            events.append(("merged" if retirement.superseded_by else "retired", retirement.on))
    events += [("retired", None) for rule_id in memory.retired_in_rules_file() - left]
    return _count(events)


def total(churns: Iterable[Churn]) -> Churn:
    summed: dict[str, WeekChurn] = {}
    for churn in churns:
        for week, counts in churn.items():
            summed[week] = summed.get(week, WeekChurn()) + counts
    return dict(sorted(summed.items()))


def sums(churn: Mapping[str, WeekChurn]) -> WeekChurn:
    """Every week together: the cumulative counts the textfile exports."""
    return sum(churn.values(), WeekChurn())


def _git(workspace: Path, *args: str) -> subprocess.CompletedProcess[str]:
    try:
        return subprocess.run([*GIT, "-C", str(workspace), *args], capture_output=True, text=True,
                              errors="replace", timeout=GIT_TIMEOUT_S, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise ReplayError(f"{workspace}: git could not read the history: {exc}") from exc


def git_churn(workspace: Path) -> Churn | None:
    """The same counts from the git history of the workspace's rules file and log, commit by commit (author
    date); None when the workspace is not in a git work tree or git never recorded those files."""
    top = _git(workspace, "rev-parse", "--show-toplevel")
    if top.returncode != 0:
        return None
    repository = Path(top.stdout.strip()).resolve()
    relative = workspace.resolve().relative_to(repository)
    paths = [(relative / LC_FILE).as_posix(), (relative / LOG_FILE).as_posix()]
    log = _git(repository, "log", "--reverse", "--format=%H %aI", "--", *paths)
    if log.returncode != 0:
        raise ReplayError(f"{workspace}: git log failed: {log.stderr.strip()}")
    if not log.stdout.strip():
        return None
    events: list[tuple[str, date | None]] = []
    present: set[str] = set()
    left: set[str] = set()
    for line in log.stdout.splitlines():
        commit, when = line.split(" ", 1)
        day = datetime.fromisoformat(when).date()
        rules, log_text = (_git(repository, "show", f"{commit}:{path}") for path in paths)
        memory = memory_from_texts(workspace, rules.stdout if rules.returncode == 0 else None,
                                   log_text.stdout if log_text.returncode == 0 else None)
        ids = {r.id for r in memory.rules if r.id and r.section in BINDING} | {e.id for e in memory.log}
        events += [("added", day) for _ in sorted(ids - present)]
        present |= ids
        successors = {t.id: t.superseded_by for t in reversed(memory.retirements)}
        for rule_id in sorted((successors.keys() | memory.retired_in_rules_file()) - left):
            events.append(("merged" if successors.get(rule_id) else "retired", day))
            left.add(rule_id)
    return _count(events)


def disagreements(record: Churn, history: Churn) -> list[str]:
    """The weeks and kinds where the record and the git history count differently, in words."""
    found = []
    for week in sorted(record.keys() | history.keys()):
        ours, theirs = record.get(week, WeekChurn()), history.get(week, WeekChurn())
        found += [f"{week} {kind}: the log records {getattr(ours, kind)}, git {getattr(theirs, kind)}"
                  for kind in KINDS if getattr(ours, kind) != getattr(theirs, kind)]
    return found
