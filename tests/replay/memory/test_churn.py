"""Rule churn per ISO week from the provenance log, and the same counts from a real git history (001 S9)."""

from __future__ import annotations

import os
import shutil
import subprocess
from datetime import date
from pathlib import Path

import pytest

from replay.cli import main as replay_main
from replay.memory.churn import WeekChurn, disagreements, first_date, git_churn, iso_week, record_churn
from replay.memory.counters import format_churn
from replay.memory.files import load_memory, memory_from_texts


def rules_file(binding: list[str], retired: list[str] = ()) -> str:
    lines = ["# Learned Corrections", "", "## Rules"]
    lines += [f"- Rule {slug}. <!-- lc:{slug} evidence:user-explicit -->" for slug in binding]
    if retired:
        lines += ["", "## Retired", *(f"- Rule {slug}. <!-- lc:{slug} evidence:user-explicit -->" for slug in retired)]
    return "\n".join(lines) + "\n"


def log_file(entries: dict[str, str], retired: list[str] = ()) -> str:
    lines = ["# Corrections log", ""]
    for slug, history in entries.items():
        lines += [f"## lc:{slug}", f"**Rule (current):** Rule {slug}.", f"**History:** {history}",
                  "**Evidence:** user-explicit · scope: standing", ""]
    return "\n".join([*lines, "## Retired", *retired]) + "\n"


def test_iso_weeks_at_the_year_boundary():
    assert iso_week(date(2025, 12, 29)) == "2026-W01"  # a Monday in December opens week 1 of 2026
    assert iso_week(date(2026, 1, 4)) == "2026-W01" and iso_week(date(2026, 1, 5)) == "2026-W02"
    assert iso_week(date(2027, 1, 3)) == "2026-W53"  # 2026 has 53 ISO weeks


def test_a_history_is_dated_by_its_first_valid_date():
    assert first_date("2026-04-10 promoted · 2026-04-06 added") == date(2026, 4, 6)
    assert first_date("2026-02-30 added · 2026-03-02 promoted") == date(2026, 3, 2)
    assert first_date("added last spring") is None and first_date(None) is None


def test_the_record_counts_each_rule_once_and_never_guesses_a_date(tmp_path):
    """A duplicated retirement counts once; a history or retirement without a date and a rule retired only in
    the rules file are `undated`; CRLF files read the same."""
    log = log_file({"a": "2026-01-05 added", "b": "added (no date)", "c": "2026-01-07 added"},
                   ["- lc:c: superseded by lc:a (merged), 2026-01-12", "- lc:c: superseded by lc:a (again), 2026-01-19",
                    "- lc:old — eval-gate:harmful, 2026-01-13", "- lc:older: retired by hand"])
    crlf = memory_from_texts(tmp_path, rules_file(["a", "b"], retired=["gone"]).replace("\n", "\r\n"),
                             log.replace("\n", "\r\n"))
    assert record_churn(crlf) == {"2026-W02": WeekChurn(added=2), "2026-W03": WeekChurn(merged=1, retired=1),
                                  "undated": WeekChurn(added=1, retired=2)}


# The history a maintenance agent leaves: each step committed on the day the log records for it.
STEPS = [
    ("2025-12-29", rules_file(["a"]), log_file({"a": "2025-12-29 added"})),
    ("2026-01-04", rules_file(["a", "b"]), log_file({"a": "2025-12-29 added", "b": "2026-01-04 added"})),
    ("2026-01-05", rules_file(["a", "b", "c"]),
     log_file({"a": "2025-12-29 added", "b": "2026-01-04 added", "c": "2026-01-05 added · 2026-01-06 merged"})),
    ("2026-01-12", rules_file(["b", "c"]),
     log_file({"a": "2025-12-29 added", "b": "2026-01-04 added", "c": "2026-01-05 added · 2026-01-06 merged"},
              ["- lc:a: superseded by lc:c (merged), 2026-01-12"])),
    ("2026-01-13", rules_file(["c"]),
     log_file({"a": "2025-12-29 added", "b": "2026-01-04 added", "c": "2026-01-05 added · 2026-01-06 merged"},
              ["- lc:a: superseded by lc:c (merged), 2026-01-12", "- lc:b: eval-gate:harmful, 2026-01-13"])),
]
EXPECTED = {"2026-W01": WeekChurn(added=2), "2026-W02": WeekChurn(added=1),
            "2026-W03": WeekChurn(merged=1, retired=1)}


def commit(repo: Path, day: str, message: str) -> None:
    stamp = f"{day}T18:00:00+01:00"
    env = {**os.environ, "GIT_AUTHOR_DATE": stamp, "GIT_COMMITTER_DATE": stamp, "GIT_AUTHOR_NAME": "nightly",
           "GIT_AUTHOR_EMAIL": "nightly@example.invalid", "GIT_COMMITTER_NAME": "nightly",
           "GIT_COMMITTER_EMAIL": "nightly@example.invalid"}
    for args in (["add", "-A"], ["commit", "-q", "-m", message]):
        subprocess.run(["git", "-C", str(repo), *args], check=True, env=env, capture_output=True)


@pytest.fixture
def repository(tmp_path) -> Path:
    """A host's config repository (S9) with one workspace's memory under `groups/ws-a`, built commit by commit."""
    if shutil.which("git") is None:
        pytest.fail("git is missing: install Debian's `git`")
    repo = tmp_path / "configs"
    workspace = repo / "groups" / "ws-a"
    (workspace / "rules").mkdir(parents=True)
    (workspace / "memory" / "reference").mkdir(parents=True)
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    for day, rules, log in STEPS:
        (workspace / "rules" / "learned-corrections.md").write_text(rules)
        (workspace / "memory" / "reference" / "corrections-log.md").write_text(log)
        commit(repo, day, f"nightly {day}")
    return workspace


def test_the_git_history_counts_what_the_log_records(repository):
    assert record_churn(load_memory(repository)) == EXPECTED
    assert git_churn(repository) == EXPECTED


def test_a_rule_added_without_a_provenance_record_is_where_they_disagree(repository, capsys):
    rules = repository / "rules" / "learned-corrections.md"
    rules.write_text(rules.read_text().replace("## Rules\n", "## Rules\n- Rule d. <!-- lc:d evidence:user-explicit -->\n"))
    commit(repository.parents[1], "2026-01-20", "a hand edit")
    assert disagreements(record_churn(load_memory(repository)), git_churn(repository) or {}) == [
        "2026-W04 added: the log records 0, git 1"]
    assert replay_main(["memory", "stats", str(repository.parent), "--git"]) == 0
    out = capsys.readouterr().out
    assert "git history: 0 of 1 workspace(s) in git agree with their log" in out
    assert f"{repository.parent}/ws-a: 2026-W04 added: the log records 0, git 1" in out


def test_a_workspace_outside_git_is_not_cross_checked(tmp_path):
    workspace = tmp_path / "ws-b"
    (workspace / "memory" / "reference").mkdir(parents=True)
    (workspace / "memory" / "reference" / "corrections-log.md").write_text(STEPS[-1][2])
    assert git_churn(workspace) is None
    assert record_churn(load_memory(workspace)) == EXPECTED


def test_the_table_shows_the_last_eight_weeks_and_sums_the_earlier_ones():
    churn = {f"2026-W{w:02d}": WeekChurn(added=w) for w in range(1, 11)} | {"undated": WeekChurn(retired=4)}
    lines = format_churn(churn)
    assert [line.split()[0] for line in lines[2:]] == ["before", *(f"2026-W{w:02d}" for w in range(3, 11)), "undated"]
    assert lines[2].split()[2:] == ["3", "0", "0"]  # weeks 1 and 2 together
    assert format_churn({}) == ["churn: the provenance logs record no rule added, merged or retired"]
