"""The sandbox report: arm summary, paired tables and the step-by-step drill-down, rendered in Chromium."""

from __future__ import annotations

import re
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

from replay.sandbox.gate_evidence import pair_results
from replay.sandbox.report_section import REPORT_HTML, write_sandbox_report
from tests.replay.sandbox.test_gate_evidence import PHONE, results
from tests.support.runs import seal, write_sealed


@pytest.fixture
def report(tmp_path: Path) -> Path:
    rows = results()
    return write_sandbox_report(tmp_path, rows, [pair_results(rows, "base", "cand")])


def test_each_episode_shows_its_steps_results_and_state_changes(report: Path) -> None:
    page = report.read_text()
    assert report.name == REPORT_HTML
    leak = re.search(r'<details id="ep-cand-s6".*?</details>', page, re.DOTALL)
    assert leak is not None
    episode = leak.group(0)
    assert "critical: phone" in episode and 'data-completed="true"' in episode
    assert len(re.findall(r'<tr data-step="\d"', episode)) == 3
    assert "items.a.held: 0 → 2" in episode and PHONE in episode
    failed = re.search(r'<details id="ep-cand-s4".*?</details>', page, re.DOTALL)
    assert failed is not None and "Not completed: assert failed: items.a.held" in failed.group(0)
    assert '<tr data-measure="task_completed" data-scope="all"><td>all</td><td class="num">7</td>' in page


def test_the_report_renders_in_chromium(report: Path, tmp_path: Path) -> None:
    binary = shutil.which("chromium")
    if binary is None:
        pytest.fail("Debian's chromium is not installed: scripts/setup.sh --test-tools installs it")
    flags = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking",
             "--virtual-time-budget=5000"]
    with tempfile.TemporaryDirectory() as profile:
        dom = subprocess.run([binary, *flags, f"--user-data-dir={profile}", "--dump-dom", report.as_uri()],
                             capture_output=True, text=True, timeout=120, check=False)
    assert dom.returncode == 0, dom.stderr
    assert dom.stdout.count("<details") == 14 and 'id="sandbox-arms"' in dom.stdout
    assert 'data-step="3" data-ok="true"' in dom.stdout


def test_hostile_values_never_run_as_script(tmp_path: Path) -> None:
    """Arm, scenario, answer and tool result come from files and the model: escaped, never run."""
    from tests.replay.analysis.test_report import HOSTILE, MARK, chromium

    rows = [r.model_copy(update={
        "arm": HOSTILE[0] if r.arm == "cand" else r.arm, "scenario_id": r.scenario_id + HOSTILE[2],
        "policy_family": HOSTILE[1],
        "trajectory": r.trajectory.model_copy(update={"final_answer": HOSTILE[1], "ended_by": HOSTILE[2]})})
        for r in results()]
    page = write_sandbox_report(tmp_path, rows, [pair_results(rows, "base", HOSTILE[0])])
    dom = chromium("--dump-dom", page.as_uri())
    assert dom.returncode == 0 and dom.stdout.count("<details") == 14, dom.stderr
    assert MARK not in dom.stdout


def _sandbox_run(tmp_path: Path, configured: list[str] | None) -> Path:
    """A sandbox run whose results.jsonl starts with the candidate (episodes finish in any order)."""
    import json

    run = tmp_path / "sandbox"
    run.mkdir()
    rows = sorted(results(), key=lambda r: r.arm != "cand")
    write_sealed(run, rows)
    if configured is not None:
        (run / "run.json").write_text(json.dumps({"kind": "sandbox", "config": {"arms": [{"name": a} for a in configured]}}))
        seal(run)
    return run


def test_report_command_compares_against_the_run_configs_first_arm(tmp_path: Path, capsys) -> None:
    from replay.cli import main

    run = _sandbox_run(tmp_path, ["base", "cand"])
    assert main(["sandbox", "report", str(run)]) == 0
    html = (run / REPORT_HTML).read_text()
    assert "<h3>base → cand" in html and "<h3>cand → base" not in html
    assert main(["sandbox", "report", str(run), "--baseline", "cand"]) == 0
    assert "<h3>cand → base" in (run / REPORT_HTML).read_text()


def test_report_command_rejects_a_malformed_pair(tmp_path: Path, capsys) -> None:
    from replay.cli import main

    run = _sandbox_run(tmp_path, None)
    with pytest.raises(SystemExit) as exit_:
        main(["sandbox", "report", str(run), "--pair", "base"])
    assert exit_.value.code == 2 and "expected BASELINE:CANDIDATE, got 'base'" in capsys.readouterr().err
