"""Stop-QA coverage: modes per registered workspace (off unless set), the runs with a reviewer verdict and with a
person's disposition, the modes file's refusals, and `memory stats --qa-modes --reviews` writing it all beside
the fast loop's counters in a textfile Prometheus accepts."""

from __future__ import annotations

import json
import os
import shutil
import subprocess

import pytest
from hypothesis import given
from hypothesis import strategies as st
from prometheus_client.parser import text_string_to_metric_families

from core.evidence import Disposition, ReviewVerdict
from replay.cli import main
from replay.qa.coverage import coverage_lines, qa_coverage, read_modes
from replay.qa.errors import QAError
from replay.qa.labels import LabelledRun, Mode
from replay.qa.qa_files import write_jsonl
from tests.replay.memory.test_counters import PLANS, write_workspace

FLEET = {"host-A": ["ws-1", "ws-2", "ws-3"], "host-B": ["ws-4"]}


def run(workspace: str, n: int, reviewer: dict[Mode, ReviewVerdict] | None = None,
        disposition: Disposition | None = None) -> LabelledRun:
    return LabelledRun(workspace=workspace, session=f"s{n}", final_record=f"f{n}", reviewer=reviewer or {},
                       disposition=disposition)


def test_unset_workspaces_are_off_and_each_run_counts_once_per_label() -> None:
    runs = [run("ws-1", 1, {Mode.SHADOW_QWEN: ReviewVerdict.PASS, Mode.SHADOW_CASCADE: ReviewVerdict.FAIL},
                Disposition.FAIL),
            run("ws-1", 2, disposition=Disposition.PASS), run("ws-1", 3),
            run("ws-4", 4, {Mode.SHADOW_QWEN: ReviewVerdict.ESCALATE}), run("elsewhere", 5, disposition=Disposition.PASS)]
    coverage = qa_coverage(FLEET, {"ws-1": Mode.SHADOW_QWEN, "ws-4": Mode.SHADOW_CASCADE, "gone": Mode.SHADOW_QWEN},
                           runs)
    rows = {row.workspace: (row.root, row.mode, row.runs, row.reviewed, row.disposed) for row in coverage.workspaces}
    assert rows == {"ws-1": ("host-A", Mode.SHADOW_QWEN, 3, 1, 2), "ws-2": ("host-A", Mode.OFF, 0, 0, 0),
                    "ws-3": ("host-A", Mode.OFF, 0, 0, 0), "ws-4": ("host-B", Mode.SHADOW_CASCADE, 1, 1, 0)}
    assert coverage.modes == {Mode.OFF: 2, Mode.SHADOW_QWEN: 1, Mode.SHADOW_DUAL: 0, Mode.SHADOW_CASCADE: 1,
                              Mode.ENFORCE_CASCADE: 0}
    assert (coverage.runs, coverage.reviewed, coverage.disposed) == (4, 2, 2)
    assert coverage.unregistered == ["elsewhere", "gone"]
    assert coverage_lines(coverage) == [
        "Stop-QA: a mode set on 2 of 4 (50%) workspaces (shadow-qwen 1, shadow-cascade 1)",
        "  finished runs 4: with a reviewer verdict 2 of 4 (50%), with a person's disposition 2 of 4 (50%)",
        "  not on any root, not counted: elsewhere, gone"]


names = st.sampled_from(["ws-1", "ws-2", "ws-3", "ws-4", "other"])


@given(st.dictionaries(names, st.sampled_from(list(Mode))),
       st.lists(st.tuples(names, st.booleans(), st.booleans()), max_size=30))
def test_the_fleets_totals_are_its_workspaces_sums(modes, labels) -> None:
    runs = [run(w, n, {Mode.SHADOW_DUAL: ReviewVerdict.PASS} if reviewed else None,
                Disposition.PASS if disposed else None) for n, (w, reviewed, disposed) in enumerate(labels)]
    coverage = qa_coverage(FLEET, modes, runs)
    assert sum(coverage.modes.values()) == len(coverage.workspaces) == 4
    assert coverage.runs == sum(w != "other" for w, _, _ in labels) == sum(r.runs for r in coverage.workspaces)
    assert coverage.reviewed == sum(w != "other" and r for w, r, _ in labels)
    assert coverage.disposed == sum(w != "other" and d for w, _, d in labels)
    assert all(row.disposed <= row.runs and row.reviewed <= row.runs for row in coverage.workspaces)
    assert coverage_lines(coverage)[0].startswith(f"Stop-QA: a mode set on {4 - coverage.modes[Mode.OFF]} of 4")


@pytest.mark.parametrize(("text", "says"), [
    ('{"ws-1": "shadow-maybe"}', "field ws-1: Input should be 'off', 'shadow-qwen'"),
    ('["ws-1", "shadow-qwen"]', "Input should be a valid dictionary"),
    ('{"../etc": "off"}', "field ../etc"),
    ('{"ws-1": ', "invalid JSON"),
])
def test_a_modes_file_that_is_not_one_is_refused_with_its_name(tmp_path, text, says) -> None:
    path = tmp_path / "modes.json"
    path.write_text(text)
    with pytest.raises(QAError) as refused:
        read_modes(path)
    assert str(refused.value).startswith(str(path)) and says in str(refused.value)
    assert "a JSON object, workspace → one of off, shadow-qwen" in str(refused.value)


def test_a_fifo_given_as_the_modes_file_is_refused_not_waited_on(tmp_path) -> None:
    os.mkfifo(tmp_path / "modes.json")
    with pytest.raises(QAError, match="not a regular file"):
        read_modes(tmp_path / "modes.json")


def test_memory_stats_writes_the_coverage_beside_the_fast_loops_counters(tmp_path, capsys) -> None:
    root = tmp_path / "host-A"
    for n in range(1, 4):
        write_workspace(root / f"ws-{n}", PLANS[n])
    (tmp_path / "modes.json").write_text(json.dumps({"ws-1": "shadow-qwen", "ws-2": "off"}))
    write_jsonl(tmp_path / "reviews.jsonl", [run("ws-1", 1, {Mode.SHADOW_QWEN: ReviewVerdict.PASS}, Disposition.PASS),
                                             run("ws-1", 2), run("ws-3", 3, disposition=Disposition.FAIL)])
    textfile = tmp_path / "worker_memory.prom"
    assert main(["memory", "stats", str(root), "--qa-modes", str(tmp_path / "modes.json"), "--reviews",
                 str(tmp_path / "reviews.jsonl"), "--textfile", str(textfile)]) == 0
    printed = capsys.readouterr().out
    assert "Stop-QA: a mode set on 1 of 3 (33%) workspaces (shadow-qwen 1)" in printed
    assert "finished runs 3: with a reviewer verdict 1 of 3 (33%), with a person's disposition 2 of 3 (67%)" in printed

    families = {f.name: f for f in text_string_to_metric_families(textfile.read_text())}
    assert {s.labels["mode"]: s.value for s in families["worker_qa_workspaces"].samples} == {
        "off": 2, "shadow-qwen": 1, "shadow-dual": 0, "shadow-cascade": 0, "enforce-cascade": 0}
    assert {s.labels["workspace"]: s.value for s in families["worker_qa_runs_disposed"].samples} == {
        "ws-1": 1, "ws-2": 0, "ws-3": 1}
    assert "worker_memory_rules_with_ids" in families  # the fast loop's counters are all still there
    promtool = shutil.which("promtool")
    if promtool is None:
        pytest.fail("promtool is missing: `make test` installs Prometheus (scripts/setup.sh --test-tools)")
    checked = subprocess.run([promtool, "check", "metrics"], input=textfile.read_text(), capture_output=True,
                             text=True, timeout=60)
    assert checked.returncode == 0, checked.stdout + checked.stderr

    assert main(["memory", "stats", str(root), "--json"]) == 0
    assert "qa" not in json.loads(capsys.readouterr().out)  # without the files, no coverage is claimed
    (tmp_path / "modes.json").write_text('{"ws-1": "always"}')
    assert main(["memory", "stats", str(root), "--qa-modes", str(tmp_path / "modes.json")]) == 2
    assert "modes.json: field ws-1" in capsys.readouterr().err
