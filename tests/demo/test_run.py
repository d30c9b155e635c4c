"""The README's main job, end to end on a small slice: engine + gateway + memory arms + report."""

from __future__ import annotations

import subprocess
import sys

import pytest

from demo.run import lesson_summary
from replay.analysis.compare import load_results
from replay.memory.lessons import LiftEvidence, RuleVerdict, Verdict

EVIDENCE = LiftEvidence(carried=4, absent=4, carried_mean=0.0, absent_mean=0.5, lift=-0.5)


def verdict(rule_id: str, method: str, outcome: Verdict) -> RuleVerdict:
    return RuleVerdict(rule_id, "ws-support", outcome, method, "test", EVIDENCE)


def test_lesson_summary_keeps_the_causal_catch_apart_from_leave_one_out_evictions():
    line = lesson_summary([
        verdict("lc:helpdesk-api-flaky", "ablation", Verdict.EVICT),
        verdict("lc:billing-escalations", "ablation", Verdict.EVICT),
        verdict("lc:closed-ticket-reopen", "ablation", Verdict.HOLD),
        verdict("rule:6f0ce30c157d", "leave-one-out", Verdict.EVICT),
        verdict("lc:billing-contact", "leave-one-out", Verdict.PROMOTE)])
    causal, correlational = line.splitlines()
    assert "harmful rule(s) evicted: lc:helpdesk-api-flaky of lc:helpdesk-api-flaky" in causal
    assert "genuine rules evicted: lc:billing-escalations" in causal
    assert "leave-one-out: evicted rule:6f0ce30c157d (" in correlational


@pytest.mark.engine
def test_quick_demo_runs_end_to_end_and_resumes(tmp_path):
    out = tmp_path / "demo"
    command = [sys.executable, "-m", "demo", "run", "--quick", "--out", str(out)]
    first = subprocess.run(command, capture_output=True, text=True, timeout=1800)
    assert first.returncode == 0, first.stderr[-3000:]
    assert "gateway healthy" in first.stderr and "replay done" in first.stderr
    for section in ("REJECTED", "Lesson gate", "harmful rule(s) evicted"):
        assert section in first.stdout
    assert (out / "run" / "report.html").is_file() and (out / "run" / "report.md").is_file()

    results = load_results(out / "run")
    arms = {r.arm for r in results}
    assert {"base", "base+rule", "base+memory", "recovery", "mix"} <= arms
    assert any(arm.startswith("minus-") for arm in arms)
    memory = [r for r in results if r.arm == "base+memory"]
    assert memory and any(r.injected_rule_ids for r in memory)
    assert all(not r.injected_rule_ids for r in results if r.arm == "base")
    assert len({r.model for r in results if r.arm == "recovery"}) == 1
    assert sum(r.parsed.outcome == "transport_error" for r in results) == 0

    again = subprocess.run(command, capture_output=True, text=True, timeout=1800)
    assert again.returncode == 0, again.stderr[-3000:]
    assert f"replay done: 0 new result(s), {len(results)} resumed" in again.stderr
