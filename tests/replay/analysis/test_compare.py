"""Paired comparison of two arms: 001's E13 numbers end to end, run-dir reading, errors, taint."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings

from core.records import ResultRecord
from replay.analysis.compare import (
    ALL_POSITIVE,
    Comparison,
    compare,
    compare_run,
    format_comparison,
    relative_change,
)
from replay.memory.ledger import RuleRef
from replay.run.directory import ResultsError, RunError, load_results, read_run_json
from tests.support.e13 import ARMS, BASE, MIXED, Q_ONLY, e13_results, positive_record, with_replicate
from tests.support.hostile import hostile_bytes
from tests.support.runs import seal, write_sealed


def write_run(run_dir: Path, records: list[ResultRecord]) -> Path:
    run_dir.mkdir(parents=True, exist_ok=True)
    write_sealed(run_dir, records)
    return run_dir


@pytest.fixture(scope="module")
def q_only() -> Comparison:
    return compare(e13_results(), BASE, Q_ONLY)


@pytest.mark.parametrize(
    ("scope", "n", "base", "cand", "wins", "losses"),
    [
        ("verified_recovery", 73, 31, 38, 7, 0),
        ("clean_trajectory_action", 73, 49, 45, 3, 7),
        ("verified_action", 118, 58, 58, 4, 4),
        (ALL_POSITIVE, 264, 138, 141, 14, 11),
        ("training_sanity", 60, 34, 38, 5, 1),
    ],
)
def test_e13_q_only_joint_correctness_per_stratum(q_only: Comparison, scope, n, base, cand, wins, losses) -> None:
    s = q_only.row("joint", scope).stats
    assert (s.n, s.baseline_correct, s.candidate_correct, s.wins, s.losses) == (n, base, cand, wins, losses)
    assert s.points == pytest.approx(100 * (cand - base) / n)


def test_e13_q_only_p_values_are_the_papers(q_only: Comparison) -> None:
    assert q_only.row("joint", "verified_recovery").stats.p_value == 0.015625
    assert q_only.row("joint", "clean_trajectory_action").stats.p_value == 0.34375
    assert q_only.row("joint", ALL_POSITIVE).stats.p_value == pytest.approx(0.69, abs=0.005)
    assert q_only.row("joint", ALL_POSITIVE).stats.points == pytest.approx(1.14, abs=0.005)  # E6: +1.14 points


def test_e13_q_only_all_positives_leave_out_training_sanity_and_known_failure(q_only: Comparison) -> None:
    held_out = ("verified_recovery", "clean_trajectory_action", "verified_action")
    strata_n = sum(q_only.row("joint", s).stats.n for s in held_out)
    assert q_only.row("joint", ALL_POSITIVE).stats.n == strata_n == 264
    assert q_only.decisions == 484


@pytest.mark.parametrize(("scope", "correct"), [("verified_recovery", 61), ("clean_trajectory_action", 54),
                                                ("verified_action", 89), (ALL_POSITIVE, 204)])
def test_e13_q_only_tool_choice_is_unchanged(q_only: Comparison, scope: str, correct: int) -> None:
    s = q_only.row("tool", scope).stats
    assert (s.baseline_correct, s.candidate_correct, s.wins, s.losses, s.p_value) == (correct, correct, 0, 0, 1.0)


def test_e13_known_failure_exact_repeats(q_only: Comparison) -> None:
    s = q_only.repeat("exact").stats
    assert (s.n, s.baseline_repeats, s.candidate_repeats, s.fixes, s.regressions) == (160, 32, 24, 9, 1)
    assert s.p_value == 0.021484375
    assert s.relative_reduction == pytest.approx(0.25)
    assert (q_only.repeat("tool").stats.baseline_repeats, q_only.repeat("tool").stats.candidate_repeats) == (122, 114)


def test_e13_mixed_arm_matches_the_paper() -> None:
    mixed = compare(e13_results(ARMS), BASE, MIXED)
    recovery, clean = mixed.row("joint", "verified_recovery").stats, mixed.row("joint", "clean_trajectory_action").stats
    everything = mixed.row("joint", ALL_POSITIVE).stats
    assert (recovery.candidate_correct, recovery.wins, recovery.losses) == (36, 7, 2)
    assert recovery.p_value == pytest.approx(0.18, abs=0.005)
    assert (clean.candidate_correct, clean.wins, clean.losses) == (46, 5, 8)
    assert clean.p_value == pytest.approx(0.58, abs=0.005)
    assert (everything.baseline_correct, everything.candidate_correct) == (138, 139)
    assert (everything.wins, everything.losses) == (17, 16)


def test_number_of_comparisons_counts_every_row(q_only: Comparison) -> None:
    # joint and tool on four strata and all positives, plus three repeat levels
    assert q_only.comparisons_made == 2 * 5 + 3 == len(q_only.correctness) + len(q_only.repeats)


def test_text_table_in_the_style_of_table_1(q_only: Comparison) -> None:
    text = format_comparison(q_only)
    recovery = next(line for line in text.splitlines() if line.startswith("verified_recovery, joint (73)"))
    assert recovery.split()[3:5] == ["31", "38"] and "+7 / −0, p = 0.0156" in recovery and "+9.59" in recovery
    repeats = next(line for line in text.splitlines() if line.startswith("known_failure, exact repeats (160)"))
    assert "32 (20%)" in repeats and "24 (15%)" in repeats and "9 fixes / 1 regression, p = 0.0215" in repeats
    assert "all positives, joint (264)" in text and "+14 / −11, p = 0.6900" in text
    assert "13 paired tests" in text and "uncorrected" in text


def test_json_round_trip(q_only: Comparison) -> None:
    data = json.loads(q_only.model_dump_json())
    assert data["correctness"][0]["stats"]["p_value"] == 0.015625
    assert Comparison.model_validate(data) == q_only


def test_breakdowns_partition_the_held_out_positives() -> None:
    records = e13_results()
    for by in ("workspace", "cluster", "tool"):
        comparison = compare(records, BASE, Q_ONLY, by=by)
        joint = [r for r in comparison.breakdown if r.measure == "joint"]
        assert sum(r.stats.n for r in joint) == 264
        assert sum(r.stats.wins for r in joint) == 14 and sum(r.stats.losses for r in joint) == 11
        assert comparison.comparisons_made == 13 + len(comparison.breakdown)
    by_tool = compare(records, BASE, Q_ONLY, by="tool")
    assert {r.scope for r in by_tool.breakdown} == {"search_invoices", "send_email", "create_ticket", "update_record"}


def test_unknown_breakdown_is_an_error() -> None:
    with pytest.raises(ResultsError, match="unknown breakdown 'model'"):
        compare(e13_results(), BASE, Q_ONLY, by="model")  # type: ignore[arg-type]


def test_arms_with_different_decisions_name_the_missing_ids() -> None:
    dropped = {"verified_action-007", "known_failure-100"}
    records = [r for r in e13_results() if not (r.arm == Q_ONLY and r.decision_id in dropped)]
    with pytest.raises(ResultsError) as err:
        compare(records, BASE, Q_ONLY)
    assert "missing from 'q-only': known_failure-100, verified_action-007" in str(err.value)


def test_an_unknown_arm_lists_the_arms_present() -> None:
    with pytest.raises(ResultsError, match=r"no results for arm 'nope' \(arms in these results: base, q-only\)"):
        compare(e13_results(), BASE, "nope")


def test_tainted_rule_marks_only_the_rows_whose_results_carried_it() -> None:
    records = e13_results(rules={"verified_recovery-040": ["lc:anchor"], "clean_trajectory_action-001": ["lc:fine"]})
    comparison = compare(records, BASE, Q_ONLY, tainted={"lc:anchor"})
    assert comparison.row("joint", "verified_recovery").tainted_results == 2  # both arms carried it
    assert comparison.row("joint", ALL_POSITIVE).tainted_results == 2
    assert comparison.row("joint", "clean_trajectory_action").tainted_results == 0
    assert comparison.tainted_rule_ids == ["lc:anchor"]
    text = format_comparison(comparison)
    assert "verified_recovery, joint (73) †" in text and "disputed rule(s) lc:anchor" in text
    assert "clean_trajectory_action, joint (73) †" not in text


def test_tainted_rule_ref_applies_only_in_its_workspace() -> None:
    records = e13_results(rules={"verified_recovery-040": ["lc:anchor"]})
    workspace = next(r.workspace for r in records if r.decision_id == "verified_recovery-040")
    assert compare(records, BASE, Q_ONLY, tainted={RuleRef(workspace, "lc:anchor")}).tainted_results == 2
    assert compare(records, BASE, Q_ONLY, tainted={RuleRef("ws-elsewhere", "lc:anchor")}).tainted_results == 0


def test_overhead_from_usage_and_latency() -> None:
    records = [
        positive_record(arm, "verified_action", f"d-{i}", i, True, True, tokens=tokens, latency_s=latency)
        for i in range(4)
        for arm, tokens, latency in ((BASE, 100, 1.0), (Q_ONLY, 112, 1.25))
    ]
    cost = compare(records, BASE, Q_ONLY).overhead
    assert cost.token_ratio == pytest.approx(1.12)
    assert cost.latency_ratio == pytest.approx(1.25)
    assert cost.p50_latency_ratio == pytest.approx(1.25)


def test_suite_defined_strata_count_among_the_positives() -> None:
    records = e13_results() + [
        positive_record(arm, "policy_lookup", f"policy-{i}", i, joint, True)
        for i in range(3)
        for arm, joint in ((BASE, False), (Q_ONLY, True))
    ]
    comparison = compare(records, BASE, Q_ONLY)
    assert comparison.row("joint", "policy_lookup").stats.wins == 3
    assert comparison.row("joint", ALL_POSITIVE).stats.n == 267


def test_compare_run_reads_results_jsonl(tmp_path: Path) -> None:
    run = write_run(tmp_path / "run", e13_results())
    assert compare_run(run, BASE, Q_ONLY) == compare(e13_results(), BASE, Q_ONLY)
    assert len(load_results(run)) == 2 * 484


def test_load_results_reports_a_bad_line_with_file_and_line(tmp_path: Path) -> None:
    records = e13_results()[:3]
    run = write_run(tmp_path / "run", records)
    results = run / "results.jsonl"
    lines = results.read_text().splitlines()
    results.write_text("\n".join([lines[0], "", lines[1], "{not json"]) + "\n")
    seal(run)  # a sealed run whose lines are bad: the reader's own line check is what refuses it
    with pytest.raises(ResultsError, match=r"results\.jsonl:4: "):
        load_results(run)
    broken = json.loads(lines[1])
    del broken["parsed"]
    results.write_text("\n".join([lines[0], json.dumps(broken)]) + "\n")
    seal(run)
    with pytest.raises(ResultsError, match=r"results\.jsonl:2: field parsed: Field required"):
        load_results(run)


def test_load_results_refuses_a_duplicate_arm_and_decision(tmp_path: Path) -> None:
    record = e13_results()[0]
    run = write_run(tmp_path / "run", [record, record])
    with pytest.raises(ResultsError, match=r"results\.jsonl:2: second result .* \(first at line 1\)"):
        load_results(run)


def test_load_results_names_a_missing_run(tmp_path: Path) -> None:
    with pytest.raises(ResultsError, match="not found"):
        load_results(tmp_path / "nowhere")


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=hostile_bytes([positive_record(BASE, "verified_action", "d-1", 1, True, True).model_dump_json().encode()]))
def test_any_results_bytes_are_records_or_one_error_with_file_and_line(tmp_path: Path, data: bytes) -> None:
    (tmp_path / "results.jsonl").write_bytes(data)
    seal(tmp_path)
    try:
        load_results(tmp_path)
    except ResultsError as exc:
        assert str(exc).startswith(str(tmp_path / "results.jsonl"))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=hostile_bytes([b'{"suite": {"path": "s", "sha256": "a"}, "config": {"arms": [{"name": "a"}]}}',
                           b'{"suite": null}', b'{"config": {"arms": [1]}}']))
def test_any_run_json_bytes_are_a_dict_or_one_error_naming_the_file(tmp_path: Path, data: bytes) -> None:
    (tmp_path / "run.json").write_bytes(data)
    try:
        info = read_run_json(tmp_path)
    except RunError as exc:
        assert str(exc).startswith(str(tmp_path / "run.json"))
    else:
        assert isinstance(info, dict)


# ── the noise floor: an A/A replicate of the baseline ───────────────────────


def test_a_comparison_shows_the_baselines_noise_floor_per_scope() -> None:
    records = with_replicate(e13_results())
    comparison = compare(records, BASE, Q_ONLY)
    noise = comparison.noise
    assert noise is not None and (noise.arm, noise.replicate, noise.decisions) == (BASE, "base-aa", 484)
    base = {r.decision_id: r for r in records if r.arm == BASE}
    twin = {r.decision_id: r for r in records if r.arm == "base-aa"}
    for row in comparison.correctness:
        aa = noise.row(row.measure, row.scope)
        assert aa is not None and aa.stats.n == row.stats.n
        ids = [d for d, r in base.items() if r.score.joint_correct is not None
               and (r.stratum == row.scope or (row.scope == ALL_POSITIVE and r.stratum in (
                   "verified_recovery", "clean_trajectory_action", "verified_action")))]
        field = "joint_correct" if row.measure == "joint" else "tool_correct"
        expected = sum(getattr(base[d].score, field) != getattr(twin[d].score, field) for d in ids)
        assert aa.discordant == expected
    assert noise.row("joint", ALL_POSITIVE).discordant == 15  # 5 in each of the three held-out strata
    assert noise.row("tool", ALL_POSITIVE).discordant == 0
    text = format_comparison(comparison)
    assert "A/A discordant" in text
    assert ("Noise floor: 15 of 264 decisions change with nothing changed (base-aa replicates base; all positives, "
            "joint: ") in text
    assert "q-only has 25 discordant pairs against base (+14 / −11)." in text


def test_the_candidates_replicate_stands_in_and_an_arm_against_its_replicate_has_none() -> None:
    records = e13_results()
    records += [r.model_copy(update={"arm": "q-aa", "replicate_of": Q_ONLY}) for r in records if r.arm == Q_ONLY]
    noise = compare(records, BASE, Q_ONLY).noise
    assert noise is not None and (noise.arm, noise.replicate) == (Q_ONLY, "q-aa")
    assert noise.row("joint", ALL_POSITIVE).discordant == 0
    assert compare(records, Q_ONLY, "q-aa").noise is None
    assert compare(with_replicate(e13_results()), BASE, "base-aa").noise is None
    assert compare(e13_results(), BASE, Q_ONLY).noise is None
    assert "A/A" not in format_comparison(compare(e13_results(), BASE, Q_ONLY))


def test_a_breakdown_by_thread_splits_the_main_loop_from_the_subagents(tmp_path: Path, capsys) -> None:
    """Each result carries its decision's thread: `main`, a subagent's (`agent-<id>`, all one group), or none
    (a suite built before threads were recorded); the groups partition the held-out positives."""
    def thread(decision_id: str) -> str | None:
        return ("main", "agent-a1", "agent-b2", None)[sum(map(ord, decision_id)) % 4]

    records = [r.model_copy(update={"thread": thread(r.decision_id)}) for r in e13_results()]
    comparison = compare(records, BASE, Q_ONLY, by="thread")
    joint = {r.scope: r.stats for r in comparison.breakdown if r.measure == "joint"}
    assert set(joint) == {"main", "subagent", "unknown"}
    assert sum(s.n for s in joint.values()) == 264 and sum(s.wins for s in joint.values()) == 14
    subagents = [r for r in records if r.arm == BASE and r.thread not in (None, "main")
                 and r.score.joint_correct is not None and r.stratum not in ("training_sanity", "known_failure")]
    assert joint["subagent"].n == len(subagents)
    from replay.cli import main

    assert main(["compare", str(write_run(tmp_path / "run", records)), "--baseline", BASE, "--candidate", Q_ONLY,
                 "--by", "thread"]) == 0
    out = capsys.readouterr().out
    assert "by thread:" in out and "  subagent, joint (" in out and "  main, joint (" in out


@pytest.mark.parametrize(("reduction", "text"), [
    (0.4, " (40% fewer)"), (-5 / 3, " (167% more)"), (0.0, " (as many)"), (-0.001, " (<1% more)"), (None, ""),
])
def test_a_relative_change_of_repeats_reads_as_words(reduction: float | None, text: str) -> None:
    assert relative_change(reduction) == text
