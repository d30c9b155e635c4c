"""The README's main job, end to end on a small slice: engine + gateway + memory arms + report."""

from __future__ import annotations

import subprocess
import sys
from collections import Counter
from types import SimpleNamespace

import pytest

from demo.run import SANDBOX_ARMS, SANDBOX_FAMILIES, lesson_summary
from replay.analysis.gates import Status, read_verdict, verdict_filename
from replay.cli import main as replay_main
from replay.memory.lessons import LessonVerdict, LiftEvidence, RuleVerdict
from replay.run.directory import load_results
from replay.sandbox.runner import load_sandbox_results
from tests.support.runs import write_sealed

EVIDENCE = LiftEvidence(carried=4, absent=4, carried_mean=0.0, absent_mean=0.5, lift=-0.5)


def verdict(rule_id: str, method: str, outcome: LessonVerdict) -> RuleVerdict:
    return RuleVerdict(rule_id, "ws-support", outcome, method, "test", EVIDENCE)


def test_lesson_summary_sets_each_ablated_rule_beside_its_leave_one_out_verdict_and_its_truth():
    causal = [verdict("lc:helpdesk-api-flaky", "ablation", LessonVerdict.EVICT),
              verdict("lc:billing-escalations", "ablation", LessonVerdict.EVICT),
              verdict("lc:closed-ticket-reopen", "ablation", LessonVerdict.HOLD),
              verdict("lc:billing-contact", "leave-one-out", LessonVerdict.PROMOTE)]
    loo = [verdict("lc:helpdesk-api-flaky", "leave-one-out", LessonVerdict.HOLD),
           verdict("lc:closed-ticket-reopen", "leave-one-out", LessonVerdict.EVICT)]
    lines = lesson_summary(causal, loo).splitlines()
    rows = {line.split()[0]: line for line in lines[2:5]}
    assert set(rows) == {"lc:helpdesk-api-flaky", "lc:billing-escalations", "lc:closed-ticket-reopen"}
    assert rows["lc:helpdesk-api-flaky"].split()[1:3] == ["harmful", "evict"]
    assert "hold (lift -0.50, 4 trials)" in rows["lc:helpdesk-api-flaky"]
    assert rows["lc:billing-escalations"].rstrip().endswith("not judged")
    assert "harmful rule(s) evicted: lc:helpdesk-api-flaky of lc:helpdesk-api-flaky" in lines[5]
    assert "genuine rules evicted: lc:billing-escalations" in lines[5]
    assert "genuine rules evicted: lc:closed-ticket-reopen" in lines[6]


FIRST_SCREEN = 40
DETAILS = ("REJECTED", "Lesson gate", "harmful rule(s) evicted", "The instrument beside the model. planted =",
           "A/A discordant", "Rule uptake")


@pytest.mark.engine
def test_quick_demo_runs_end_to_end_and_resumes(tmp_path):
    out = tmp_path / "demo"
    command = [sys.executable, "-m", "demo", "run", "--quick", "--out", str(out)]
    first = subprocess.run(command, capture_output=True, text=True, timeout=1800)
    assert first.returncode == 0, first.stderr[-3000:]
    assert "engine healthy after" in first.stderr and "[demo] replay 40/40 (100%)" in first.stderr
    # What ran and what it found fit a screen, counted as a log counts them (no terminal: every status line is
    # a line of its own); every table is in the report and demo.txt, not on it. The planted calibration is quiet.
    screen = first.stderr.splitlines() + first.stdout.splitlines()
    assert len(screen) <= FIRST_SCREEN, first.stderr + first.stdout
    assert "planted seed" not in first.stderr and len([s for s in screen if s.startswith("sandbox ")]) <= 4
    for line in ("Ran in ", "answers of the 135M model through the gateway (4 held-out decisions, 10 arms; 24 in the 6 "
                 "below), 12 sandbox episodes and a planted calibration.",
                 "Noise floor (base-aa replicates base, nothing changed):", "Gates:", ": REJECT",
                 "Causal lesson gate: evicted the planted harmful rule(s):", "The instrument on planted effects",
                 "passes the planted null", f"report: {out / 'run' / 'report.html'} (report.md beside it)",
                 f"every table: {out / 'run' / 'demo.txt'}"):
        assert line in first.stdout, line
    assert not [s for s in DETAILS if s in first.stdout]
    details = (out / "run" / "demo.txt").read_text()
    assert all(s in details for s in DETAILS)
    assert (out / "run" / "report.html").is_file() and (out / "run" / "report.md").is_file()

    results = load_results(out / "run")
    arms = {r.arm for r in results}
    assert {"base", "base-aa", "base+rule", "base+memory", "recovery", "mix"} <= arms
    assert {r.replicate_of for r in results if r.arm == "base-aa"} == {"base"}
    assert any(arm.startswith("minus-") for arm in arms)
    memory = [r for r in results if r.arm == "base+memory"]
    assert memory and any(r.injected_rule_ids for r in memory)
    assert all(not r.injected_rule_ids for r in results if r.arm == "base")
    assert len({r.model for r in results if r.arm == "recovery"}) == 1
    assert sum(r.parsed.outcome == "transport_error" for r in results) == 0

    episodes = load_sandbox_results(out / "sandbox")
    assert Counter(r.arm for r in episodes) == {arm: len(SANDBOX_FAMILIES) for arm in SANDBOX_ARMS}
    assert {r.endpoint_kind for r in episodes} == {"gateway"}
    for arm in ("recovery", "mix", "base+memory"):
        verdict = read_verdict(out / "run" / verdict_filename("serious-candidate", arm))
        for condition in ("critical-failures", "unsupported-completion", "isolated-replay-completion"):
            assert verdict.status(condition) in (Status.PASS, Status.FAIL), (arm, condition)
    verdicts = sorted((out / "run").glob("gate-*.json"))  # every verdict the demo wrote, checked against its files
    assert verdicts and replay_main(["verify", *map(str, verdicts)]) == 0

    again = subprocess.run([*command, "--verbose"], capture_output=True, text=True, timeout=1800)
    assert again.returncode == 0, again.stderr[-3000:]
    assert f"Resumed from {out}: {len(results)} answers, {len(episodes)} episodes." in again.stdout
    assert "[demo] replay" not in again.stderr  # nothing left to send
    assert all(s in again.stdout for s in DETAILS)  # --verbose: every table before the summary
    assert again.stdout.index("A/A discordant") < again.stdout.index("Ran in ")


def test_the_demo_slice_is_the_harmful_rules_strata_and_the_gated_positives_elsewhere_in_142_requests(tmp_path):
    """The full demo's slice (demo.run's comment on ABLATED_STRATA): in the ablated workspace up to six decisions
    of each stratum the planted harmful rule acts on, elsewhere one of each positive stratum a gate condition
    reads, each cell spread over its clusters in the suite's order; 142 requests, of which no `only-` arm spends
    one on a rule its decisions do not concern (286 before, on 31 decisions)."""
    from demo.demo_data import write_demo
    from demo.rule_claims import CLAIMS
    from demo.run import ABLATED_WORKSPACES, demo_cell, held_out_slice, run_config
    from replay.memory.uptake import concerns
    from replay.suite import load_suite

    suite_dir, memory = write_demo(tmp_path / "data")
    suite = load_suite(suite_dir)
    picked = held_out_slice(suite, tmp_path / "slice", demo_cell)
    held_out = [d for d in suite.decisions if d.stratum != "training_sanity"]
    others = sorted({d.workspace for d in held_out} - ABLATED_WORKSPACES)
    cells = Counter((d.workspace, d.stratum) for d in picked.decisions)
    assert sorted(ABLATED_WORKSPACES) == ["ws-support"] and len(others) == 3
    assert cells == {("ws-support", "verified_recovery"): 6, ("ws-support", "known_failure"): 4,
                     **{(ws, s): 1 for ws in others
                        for s in ("verified_recovery", "clean_trajectory_action")}}
    for (workspace, stratum), n in cells.items():
        available = {d.cluster for d in held_out if (d.workspace, d.stratum) == (workspace, stratum)}
        chosen = [d.cluster for d in picked.decisions if (d.workspace, d.stratum) == (workspace, stratum)]
        assert len(set(chosen)) == min(n, len(available))
    assert [d.id for d in picked.decisions] == [d.id for d in held_out if d.id in {p.id for p in picked.decisions}]

    config = run_config("http://127.0.0.1:9", {"recovery": "r", "mix": "m"}, picked, memory)
    asked = {a.name: [d for d in picked.decisions if a.workspaces is None or d.workspace in a.workspaces]
             for a in config.arms}
    assert sum(map(len, asked.values())) == 142 and len(config.arms) == 13
    for arm in config.arms:
        if arm.name.startswith("only-"):
            assert any(concerns(CLAIMS[arm.memory.removeprefix("rules:")], d) for d in asked[arm.name]), arm.name


def test_the_run_ends_with_what_it_measured_in_words_not_a_checklist():
    from demo.run import measured_lines
    from replay.analysis.report.summary import Count, SummaryRow

    def row(arm, joint, tool, changed):
        return SummaryRow(arm, Count(joint, 20), (), Count(tool, 20), Count(0, 4), changed)

    rows = [row("base", 6, 10, None), row("base+memory", 9, 12, Count(8, 40))]
    lessons = [verdict("lc:helpdesk-api-flaky", "ablation", LessonVerdict.EVICT),
               verdict("lc:billing-escalations", "leave-one-out", LessonVerdict.EVICT),
               verdict("lc:closed-ticket-reopen", "ablation", LessonVerdict.EVICT)]
    text = measured_lines(rows, lessons)
    assert "right tool on 10/20 positive decisions (50%), the right tool and keys on 6/20 (30%)" in text
    assert "memory changed the chosen call on 8/40 (20%)" in text
    assert "planted harmful rule(s): lc:helpdesk-api-flaky" in text
    assert text.endswith("genuine rules evicted: lc:closed-ticket-reopen")  # leave-one-out is not the causal gate
    for word in ("issue", "#", "Targets", "met"):
        assert word not in text


def test_a_demo_run_begun_under_other_engine_settings_is_not_resumed(tmp_path):
    from core.errors import WorkerTierError
    from core.records import EngineSettings
    from demo.run import record_engine
    from replay.run.directory import read_engine_settings

    run_dir = tmp_path / "run"
    record_engine(run_dir)
    here = read_engine_settings(run_dir)
    assert here is not None
    record_engine(run_dir)  # the same machine resumes
    other = "float16" if here.dtype != "float16" else "float32"
    (run_dir / "engine.json").write_text(EngineSettings(dtype=other, settings=f"dtype {other}").model_dump_json())
    with pytest.raises(WorkerTierError, match=f"replayed with dtype {other}.*would mix"):
        record_engine(run_dir)


def test_demo_report_and_console_summary_count_changes_against_base_whatever_the_results_order(tmp_path):
    """The runner writes results in its work order (here `mix` first): the report's summary and the
    console's both say "calls changed vs base" and leave base's cell empty."""
    from demo.run import BASELINE, MAIN_ARMS, demo_report
    from replay.analysis.compare import compare
    from replay.analysis.report.summary import format_summary
    from tests.support.e13 import positive_record

    order = ["mix", *(a for a in MAIN_ARMS if a != "mix")]
    results = [positive_record(arm, "verified_action", f"d-{i}", i, joint=(i + k) % 3 == 0, tool=True)
               for k, arm in enumerate(order) for i in range(6)]
    write_sealed(tmp_path, results)
    comparisons = [compare(results, BASELINE, arm) for arm in MAIN_ARMS[1:]]
    html, rows = demo_report(tmp_path, results, comparisons, [])
    assert rows[0].arm == BASELINE and rows[0].changed is None
    assert format_summary(rows).splitlines()[1].endswith("calls changed vs base")
    text = html.read_text()
    assert "calls changed vs base" in text and "calls changed vs mix" not in text
    assert "| calls changed vs base |" in html.with_suffix(".md").read_text()


def test_the_demo_replicates_base_and_prints_its_noise_floor_beside_the_effects(tmp_path):
    """The run config has one A/A arm (base again); the console line counts its changed calls and
    its joint-correctness changes (the comparisons' noise floor) beside each effect arm's."""
    from demo.run import BASELINE, EFFECT_ARMS, MAIN_ARMS, NOISE_ARM, demo_report, noise_floor_line, run_config
    from replay.analysis.compare import compare
    from tests.support.e13 import positive_record

    no_decisions = SimpleNamespace(decisions=[])  # the arms that need none: ablation and uptake arms need decisions
    config = run_config("http://127.0.0.1:9", {"recovery": "demo-recovery-x", "mix": "demo-mix-x"},
                        no_decisions, tmp_path)
    twin = next(a for a in config.arms if a.name == NOISE_ARM)
    base = next(a for a in config.arms if a.name == BASELINE)
    assert (twin.replicate_of, twin.model, twin.memory, twin.workspaces) == (BASELINE, base.model, base.memory, None)

    def answers(arm: str, k: int) -> list:
        return [positive_record(arm, "verified_action", f"d-{i}", i, joint=(i + k) % 4 == 0, tool=True)
                for i in range(8)]

    results = [*answers(BASELINE, 0), *(r for k, arm in enumerate(EFFECT_ARMS, 1) for r in answers(arm, k))]
    flipped = answers(BASELINE, 1)[:1] + answers(BASELINE, 0)[1:]  # d-0 answered wrong this time
    results += [r.model_copy(update={"arm": NOISE_ARM, "replicate_of": BASELINE}) for r in flipped]
    comparisons = [compare(results, BASELINE, arm) for arm in EFFECT_ARMS]
    _, rows = demo_report(tmp_path, results, comparisons, [])
    assert [r.arm for r in rows] == list(MAIN_ARMS)
    line = noise_floor_line(rows, comparisons)
    assert line.startswith("Noise floor (base-aa replicates base, nothing changed): 1/8 chosen calls and joint "
                           "correctness on 1 of 8 positives change.")
    assert line.endswith("Calls changed vs base beside it: base+rule 4/8, base+memory 4/8, recovery 4/8, mix 0/8.")
    assert noise_floor_line(rows[:-1], comparisons).startswith("Noise floor: not measured")
