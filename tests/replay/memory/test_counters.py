"""`memory stats` on a generated fleet: three roots, dozens of workspaces, each counter exercised (CRLF
and both heading spellings, a rules file over the cap, a retired rule without a date), the expected
counts known by construction; the textfile read back by Prometheus' own parsers."""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from replay.cli import main as replay_main
from replay.memory.churn import WeekChurn
from replay.memory.counters import fleet_stats, format_fleet, textfile
from tests.support.hostile import special_files, within

NOW = time.time()
OLD = NOW - 30 * 24 * 3600


@dataclass(frozen=True)
class Plan:
    """What one generated workspace holds, so the expected counts are known without the reader."""

    rules: int  # binding rules with ids and evidence
    pending: int
    legacy: int
    retired_log: int  # retired in the corrections log (one of them without a date)
    files: int  # memory files
    fresh: int  # of those, touched in the last 7 days
    crlf: bool = False
    old_headings: bool = False


def write_workspace(path: Path, plan: Plan) -> None:
    rules_heading, pending_heading = ("## Rules — active", "## Pending — to merge") if plan.old_headings \
        else ("## Rules", "## Pending")
    lines = ["# Learned Corrections", "", rules_heading]
    lines += [f"- Rule {i} of the workspace. <!-- lc:rule-{i} evidence:user-explicit -->" for i in range(plan.rules)]
    lines += [f"- Legacy rule {i}. <!-- lc:legacy-{i} -->" for i in range(plan.legacy)]
    lines += ["", pending_heading]
    lines += [f"- Pending rule {i}. <!-- lc:pending-{i} evidence:user-explicit -->" for i in range(plan.pending)]
    newline = "\r\n" if plan.crlf else "\n"
    (path / "rules").mkdir(parents=True)
    (path / "rules" / "learned-corrections.md").write_text(newline.join(lines) + newline, newline="")
    if plan.files:
        reference = path / "memory" / "reference"
        reference.mkdir(parents=True)
        retired = [f"- lc:old-{i}: superseded by lc:rule-0 (merged), 2026-11-0{i + 1}" for i in range(plan.retired_log)]
        if retired:
            retired[-1] = retired[-1].rsplit(",", 1)[0]  # the last one without a date
        log = ["# Corrections log", "", "## Retired", *retired]
        (reference / "corrections-log.md").write_text("\n".join(log) + "\n")
        others = [path / "memory" / f"note-{i}.md" for i in range(plan.files - 1)]
        for other in others:
            other.write_text("a note\n")
        for index, file in enumerate([reference / "corrections-log.md", *others]):
            stamp = NOW - 3600 if index < plan.fresh else OLD
            os.utime(file, (stamp, stamp))


PLANS = [Plan(rules=5, pending=2, legacy=1, retired_log=2, files=3, fresh=1),
         Plan(rules=0, pending=0, legacy=0, retired_log=0, files=0, fresh=0),
         Plan(rules=59, pending=2, legacy=0, retired_log=1, files=2, fresh=2, crlf=True),  # 61 rules: over the cap
         Plan(rules=3, pending=0, legacy=2, retired_log=3, files=4, fresh=0, old_headings=True)]


@pytest.fixture(scope="module")
def fleet(tmp_path_factory) -> list[Path]:
    roots = []
    for r in range(3):
        root = tmp_path_factory.mktemp(f"host-{'ABC'[r]}")
        for w in range(12):
            write_workspace(root / f"ws-{r}-{w:02d}", PLANS[(r + w) % len(PLANS)])
        roots.append(root)
    return roots


def expected(plans: list[Plan]) -> dict[str, int]:
    return {"workspaces": len(plans), "rules_files": len(plans),
            "rules_with_ids": sum(p.rules + p.pending + p.legacy for p in plans),
            "pending": sum(p.pending for p in plans), "legacy": sum(p.legacy for p in plans),
            "retired": sum(p.retired_log for p in plans), "provenance_logs": sum(p.files > 0 for p in plans),
            "memory_trees": sum(p.files > 0 for p in plans), "memory_files": sum(p.files for p in plans),
            "touched_7d": sum(p.fresh for p in plans)}


def test_the_counts_of_every_root_and_of_the_fleet(fleet):
    stats = fleet_stats(fleet, NOW)
    for r, root in enumerate(stats.roots):
        assert root.totals == expected([PLANS[(r + w) % len(PLANS)] for w in range(12)]), root.root
    assert stats.totals == expected([PLANS[(r + w) % len(PLANS)] for r in range(3) for w in range(12)])
    assert stats.largest_rules_file == 61 > stats.cap == 60
    table = format_fleet(stats)
    assert table.splitlines()[0].split()[:3] == ["root", "workspaces", "rules"] and "of the cap 60" in table
    assert "Rule 1 of the workspace" not in stats.model_dump_json()  # counts only, never rule text


def test_churn_per_iso_week_of_the_fleet(fleet):
    """Each workspace's retired lines are dated 2026-11-01 (a Sunday: ISO week 44), 11-02 (Monday: week 45),
    11-03, the last one without a date; all superseded, so all merges."""
    plans = [PLANS[(r + w) % len(PLANS)] for r in range(3) for w in range(12)]
    week_of_line = {0: "2026-W44", 1: "2026-W45", 2: "2026-W45"}
    merged: dict[str, int] = {}
    for plan in plans:
        for line in range(plan.retired_log):
            week = "undated" if line == plan.retired_log - 1 else week_of_line[line]
            merged[week] = merged.get(week, 0) + 1
    stats = fleet_stats(fleet, NOW)
    assert stats.churn == {week: WeekChurn(merged=n) for week, n in sorted(merged.items())}
    table = format_fleet(stats)
    assert "  2026-W44        0  " + f"{merged['2026-W44']:>7}" in table and "  undated  " in table
    families = {f.name: f for f in text_string_to_metric_families(textfile(stats))}
    assert sum(s.value for s in families["worker_memory_rules_merged"].samples) == sum(merged.values())


def test_the_textfile_is_what_prometheus_reads(fleet, tmp_path):
    text = textfile(fleet_stats(fleet, NOW))
    families = {f.name: f for f in text_string_to_metric_families(text)}
    rules = {(s.labels["root"], s.labels["workspace"]): s.value for s in families["worker_memory_rules_with_ids"].samples}
    assert len(rules) == 36 and sum(rules.values()) == fleet_stats(fleet, NOW).totals["rules_with_ids"]
    promtool = shutil.which("promtool")
    if promtool is None:
        pytest.fail("promtool is missing: `make test` installs Prometheus (scripts/setup.sh --test-tools)")
    checked = subprocess.run([promtool, "check", "metrics"], input=text, capture_output=True, text=True)
    assert checked.returncode == 0, checked.stdout + checked.stderr


def test_the_cli_writes_the_textfile_atomically_and_leaves_nothing_else(fleet, tmp_path, capsys):
    out = tmp_path / "collector"
    out.mkdir()
    target = out / "worker_memory.prom"
    target.write_text("stale\n")
    assert replay_main(["memory", "stats", *map(str, fleet), "--textfile", str(target)]) == 0
    assert "largest rules file: 61 of the cap 60 rules" in capsys.readouterr().out
    assert [p.name for p in out.iterdir()] == ["worker_memory.prom"]
    assert target.read_text().startswith("# HELP worker_memory_rules_with_ids")
    assert replay_main(["memory", "stats", str(tmp_path / "missing")]) == 2
    assert "memory root directory not found" in capsys.readouterr().err


def test_what_is_no_regular_file_is_refused_by_name_and_never_waited_on(tmp_path):
    """A tenant writes its own memory: each file stats reads, and each entry of the memory tree, may be a FIFO (an
    open waits for a writer for good), a socket, a device or a link to one. Stats finishes and names each."""
    root = tmp_path / "groups"
    write_workspace(root / "ws-clean", PLANS[0])
    spoiled = root / "ws-spoiled"
    write_workspace(spoiled, Plan(rules=1, pending=0, legacy=0, retired_log=0, files=2, fresh=0))
    (spoiled / "rules" / "learned-corrections.md").unlink()
    (spoiled / "memory" / "reference" / "corrections-log.md").unlink()
    read = special_files([spoiled / name for name in ("rules/learned-corrections.md", "memory/profile.md",
                                                      "memory/index.md", "memory/weekly-summary.md",
                                                      "memory/reference/corrections-log.md")])
    counted = special_files([spoiled / "memory" / "notes" / name for name in ("fifo", "socket", "zero", "null", "dev")])

    stats = within(20, lambda: fleet_stats([root], NOW))

    clean, workspace = stats.roots[0].workspaces
    assert clean.refused == []
    assert workspace.memory_files == 1 and workspace.rules_with_ids == 0  # note-0.md; no rules file was read
    refused = dict(line.split(": ", 1) for line in workspace.refused)
    for entries, verb in ((read, "not read"), (counted, "not counted")):
        for path, kind in entries.items():
            reason = refused.pop(str(path.relative_to(spoiled)))
            assert kind in reason and verb in reason, reason
    assert refused == {}
    table = format_fleet(stats)
    assert f"refused: {len(workspace.refused)} file(s), not read or not counted" in table
    assert f"  {root}/ws-spoiled/rules/learned-corrections.md: not a regular file (a FIFO); not read" in table
