"""`worker-replay memory stats ROOT...`: the fast loop's counters over a fleet of workspaces (001 S25, §10 item 7).

Read-only, and without carrying any rule text into what it writes: per workspace, the rules with ids
(in `## Rules` and `## Pending`, both binding), how many of those are Pending, the legacy ones (no
`evidence:`), the retired ones (`## Retired` in the rules file or the corrections log), whether it has a
rules file, a provenance log (`memory/reference/corrections-log.md`) and a memory tree (`memory/`), the
files in that tree and those touched in the last 7 days, and the rule count against the cap of 60. Each
root (a host's `groups/`, one directory per workspace) is summed, as S25's table is, and the whole fleet.
Only regular files are opened or counted: a link, a FIFO, a socket or a device among a workspace's files
(the tenant writes them) is listed as refused, with its reason, and never waited on.

`--textfile FILE` writes the same counters in the Prometheus text format for node_exporter's textfile
collector (written to a temporary file beside it and renamed over it, as that collector requires, so
it never reads half a file), labelled by root and workspace; `worker_memory_stats_timestamp_seconds`
says when. Churn (replay/memory/churn.py) is exported as three counters per workspace, every week of the
record summed (`worker_memory_rules_{added,merged,retired}_total`): a week's churn is `increase(...[7d])`.
`--git` also counts the churn from the git history of each workspace that keeps its memory in git and
lists the weeks where that and the record disagree. `--qa-modes FILE` and `--reviews FILE` add Stop-QA's
coverage of the same workspaces (replay/qa/coverage.py): the `worker_qa_*` series.
"""

from __future__ import annotations

import stat
import time
from pathlib import Path

from pydantic import Field

from core.atomicwrite import write_text_atomic
from core.records import Strict
from core.regularfile import not_regular
from replay.errors import ReplayError
from replay.memory.churn import KINDS, UNDATED, Churn, disagreements, git_churn, record_churn, sums, total
from replay.memory.contract import RULE_CAP
from replay.memory.files import BINDING, LC_FILE, LOG_FILE, Section, load_memory, workspace_dirs

WEEK_S = 7 * 24 * 3600
CHURN_WEEKS = 8
COUNTERS = ("rules_with_ids", "pending", "legacy", "retired", "rules_files", "provenance_logs", "memory_trees",
            "memory_files", "touched_7d")


class WorkspaceStats(Strict):
    workspace: str
    rules_with_ids: int = 0
    pending: int = 0
    legacy: int = 0
    retired: int = 0
    rules_files: int = 0
    provenance_logs: int = 0
    memory_trees: int = 0
    memory_files: int = 0
    touched_7d: int = 0
    binding_rules: int = 0
    """Rule lines in `## Rules` and `## Pending`, against the cap."""
    churn: Churn = Field(default_factory=dict)
    git_disagrees: list[str] | None = None
    """With `--git`, for a workspace whose memory is in git: the weeks where git and the record differ."""
    refused: list[str] = Field(default_factory=list)
    """Entries not read or not counted, each with its reason (`rules/x.md: not a regular file (a FIFO); not
    read`): the tenant writes these directories, so any of them can be a link, a FIFO, a socket or a device."""


class RootStats(Strict):
    root: str
    workspaces: list[WorkspaceStats] = Field(default_factory=list)
    totals: dict[str, int] = Field(default_factory=dict)
    largest_rules_file: int = 0
    cap: int = RULE_CAP
    churn: Churn = Field(default_factory=dict)


class FleetStats(Strict):
    """`memory stats --json`."""

    roots: list[RootStats]
    totals: dict[str, int]
    largest_rules_file: int
    cap: int = RULE_CAP
    churn: Churn = Field(default_factory=dict)
    at: float
    """When it was counted (Unix time)."""


def workspace_stats(name: str, path: Path, now: float, git: bool = False) -> WorkspaceStats:
    """One workspace's counters (its memory files read, nothing written); `git`: cross-check the churn with
    the workspace's git history."""
    memory = load_memory(path)
    binding = [r for r in memory.rules if r.section in BINDING]
    tree = path / "memory"
    refused = {p.file: p.message for p in memory.problems if p.unread}
    files = []
    for entry in tree.rglob("*") if tree.is_dir() else ():
        mode = entry.lstat().st_mode
        if stat.S_ISDIR(mode):
            continue
        reason = not_regular(mode)
        if reason is None:
            files.append(entry)
        else:
            refused.setdefault(entry, f"{reason}; not counted")
    stats = WorkspaceStats(
        workspace=name, rules_with_ids=sum(r.id is not None for r in binding),
        pending=sum(r.id is not None and r.section is Section.PENDING for r in binding),
        legacy=sum(r.legacy for r in binding), retired=len(memory.retired_ids()),
        rules_files=int((path / LC_FILE).is_file()), provenance_logs=int((path / LOG_FILE).is_file()),
        memory_trees=int(tree.is_dir()), memory_files=len(files),
        touched_7d=sum(now - f.stat().st_mtime <= WEEK_S for f in files), binding_rules=len(binding),
        refused=[f"{entry.relative_to(path)}: {reason}" for entry, reason in sorted(refused.items())])
    stats.churn = record_churn(memory)
    history = git_churn(path) if git else None
    if history is not None:
        stats.git_disagrees = disagreements(stats.churn, history)
    return stats


def root_stats(root: Path, now: float, git: bool = False) -> RootStats:
    stats = RootStats(root=str(root),
                      workspaces=[workspace_stats(n, p, now, git) for n, p in workspace_dirs(root).items()])
    stats.churn = total(w.churn for w in stats.workspaces)
    stats.totals = {c: sum(getattr(w, c) for w in stats.workspaces) for c in COUNTERS}
    stats.totals["workspaces"] = len(stats.workspaces)
    stats.largest_rules_file = max((w.binding_rules for w in stats.workspaces), default=0)
    return stats


def fleet_stats(roots: list[Path], now: float | None = None, git: bool = False) -> FleetStats:
    now = time.time() if now is None else now
    counted = [root_stats(root, now, git) for root in roots]
    totals = {c: sum(r.totals[c] for r in counted) for c in (*COUNTERS, "workspaces")}
    return FleetStats(roots=counted, totals=totals, largest_rules_file=max((r.largest_rules_file for r in counted),
                                                                         default=0),
                      churn=total(r.churn for r in counted), at=now)


HEADINGS = {"workspaces": "workspaces", "rules_files": "rules files", "rules_with_ids": "rules with ids",
            "pending": "Pending", "legacy": "legacy", "retired": "retired", "provenance_logs": "provenance logs",
            "memory_trees": "memory trees", "memory_files": "memory files", "touched_7d": "touched in 7 days"}


def format_fleet(stats: FleetStats) -> str:
    """S25's table: one row per root, then the fleet; the largest rules file against its cap."""
    columns = list(HEADINGS)
    names = [r.root for r in stats.roots] + ["all"]
    width = max(len(n) for n in names)
    lines = [f"{'root':<{width}}  " + "  ".join(f"{HEADINGS[c]:>{len(HEADINGS[c])}}" for c in columns)]
    for name, totals in [*((r.root, r.totals) for r in stats.roots), ("all", stats.totals)]:
        lines.append(f"{name:<{width}}  " + "  ".join(f"{totals[c]:>{len(HEADINGS[c])},}" for c in columns))
    lines.append(f"largest rules file: {stats.largest_rules_file} of the cap {stats.cap} rules")
    lines += format_churn(stats.churn)
    refused = [f"  {r.root}/{w.workspace}/{line}" for r in stats.roots for w in r.workspaces for line in w.refused]
    if refused:
        lines += [f"refused: {len(refused)} file(s), not read or not counted", *refused]
    checked = [(r.root, w) for r in stats.roots for w in r.workspaces if w.git_disagrees is not None]
    if checked:
        differ = [(root, w) for root, w in checked if w.git_disagrees]
        lines.append(f"git history: {len(checked) - len(differ)} of {len(checked)} workspace(s) in git agree with "
                     "their log")
        lines += [f"  {root}/{w.workspace}: {d}" for root, w in differ for d in w.git_disagrees or ()]
    return "\n".join(lines)


def format_churn(churn: Churn) -> list[str]:
    """The fleet's churn per ISO week, the last `CHURN_WEEKS` dated weeks (the earlier ones summed)."""
    if not churn:
        return ["churn: the provenance logs record no rule added, merged or retired"]
    dated = [w for w in churn if w != UNDATED]
    shown = dated[-CHURN_WEEKS:]
    rows = [(w, churn[w]) for w in shown]
    if len(dated) > len(shown):
        rows.insert(0, (f"before {shown[0]}", sums({w: churn[w] for w in dated[:-CHURN_WEEKS]})))
    if UNDATED in churn:
        rows.append((UNDATED, churn[UNDATED]))
    width = max(len("ISO week"), *(len(name) for name, _ in rows))
    lines = ["rule churn per ISO week (from the provenance logs):",
             f"  {'ISO week':<{width}}  " + "  ".join(f"{k:>7}" for k in KINDS)]
    lines += [f"  {name:<{width}}  " + "  ".join(f"{getattr(c, k):>7,}" for k in KINDS) for name, c in rows]
    return lines


METRICS = {"rules_with_ids": "Rules with an lc: id in ## Rules and ## Pending.",
           "pending": "Rules with an id in ## Pending.", "legacy": "Binding rules without evidence:.",
           "retired": "Rules retired (rules file or corrections log).",
           "memory_files": "Files in the memory tree.", "touched_7d": "Memory files modified in the last 7 days.",
           "binding_rules": "Rule lines in ## Rules and ## Pending (the cap applies to these)."}


CHURN_METRICS = {"added": "Rules the provenance log records as added, every week together.",
                 "merged": "Rules retired with a superseding id, every week together.",
                 "retired": "Rules retired without a successor, every week together."}


def label_value(value: str) -> str:
    """A Prometheus label value, escaped."""
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def textfile(stats: FleetStats) -> str:
    """The counters in the Prometheus text format (node_exporter's textfile collector)."""
    out: list[str] = []
    for key, text in METRICS.items():
        name = f"worker_memory_{key}"
        out += [f"# HELP {name} {text}", f"# TYPE {name} gauge"]
        out += [f'{name}{{root="{label_value(r.root)}",workspace="{label_value(w.workspace)}"}} {getattr(w, key)}'
                for r in stats.roots for w in r.workspaces]
    for kind, text in CHURN_METRICS.items():
        name = f"worker_memory_rules_{kind}_total"
        out += [f"# HELP {name} {text}", f"# TYPE {name} counter"]
        out += [f'{name}{{root="{label_value(r.root)}",workspace="{label_value(w.workspace)}"}} '
                f'{getattr(sums(w.churn), kind)}' for r in stats.roots for w in r.workspaces]
    for key, text in (("rules_files", "Workspaces with a rules file."),
                      ("provenance_logs", "Workspaces with a corrections log."),
                      ("memory_trees", "Workspaces with a memory tree."), ("workspaces", "Workspaces.")):
        name = f"worker_memory_{key}"
        out += [f"# HELP {name} {text}", f"# TYPE {name} gauge"]
        out += [f'{name}{{root="{label_value(r.root)}"}} {r.totals[key]}' for r in stats.roots]
    out += ["# HELP worker_memory_rule_cap The rules file's cap.", "# TYPE worker_memory_rule_cap gauge",
            f"worker_memory_rule_cap {RULE_CAP}",
            "# HELP worker_memory_stats_timestamp_seconds When the counters were taken.",
            "# TYPE worker_memory_stats_timestamp_seconds gauge", f"worker_memory_stats_timestamp_seconds {stats.at}"]
    return "\n".join(out) + "\n"


def write_textfile(path: Path, text: str) -> None:
    """Write `text` to `path` atomically (node_exporter's collector must never read half a file). A path
    that cannot be written (a directory, a missing folder, no permission) is one `ReplayError`."""
    try:
        write_text_atomic(path, text)
    except OSError as exc:
        raise ReplayError(f"{path}: cannot write the textfile: {exc.strerror or exc}") from exc
