"""What each condition reads and whether it is there: `gate --plan` before a run, and the verdict's line
beside every condition that was not run; the corpus-only policy."""

from __future__ import annotations

import json
from pathlib import Path
from typing import get_args

import pytest

from replay.analysis.compare import compare
from replay.analysis.gates import (
    CONDITION_KINDS,
    AnyCondition,
    Status,
    evaluate,
    evaluate_gate,
    format_plan,
    format_verdict,
    load_policy,
    plan_gate,
)
from replay.analysis.gates.inputs import SOURCES, sources
from tests.support.e13 import ARMS, BASE, Q_ONLY, e13_results
from tests.support.runs import bind, decision, write_sealed

ROOT = Path(__file__).resolve().parents[3]
SERIOUS = ROOT / "configs" / "gates" / "serious-candidate.toml"
PRODUCTION = ROOT / "configs" / "gates" / "production-candidate.toml"
CORPUS_ONLY = ROOT / "configs" / "gates" / "corpus-only.toml"
NEED_EVIDENCE = {"critical-failures": "critical_failures", "unsupported-completion": "unsupported_completion",
                 "isolated-replay-completion": "isolated_replay", "confirmation-run": "confirmation"}


@pytest.fixture
def run_dir(tmp_path: Path) -> Path:
    run = tmp_path / "s1"
    run.mkdir()
    write_sealed(run, e13_results(ARMS))
    return run


def test_the_serious_candidate_plan_without_evidence_lists_what_a_corpus_lacks() -> None:
    plan = plan_gate(SERIOUS)
    reads = {c.id: c.reads for c in plan.conditions}
    missing = {c: [(r.key, r.present, r.problem) for r in rs] for c, rs in reads.items() if c in NEED_EVIDENCE}
    assert missing == {c: [(key, False, "not given")] for c, key in NEED_EVIDENCE.items()}
    from_run = {c: [(r.key, r.present) for r in rs] for c, rs in reads.items() if c not in NEED_EVIDENCE}
    assert from_run == {c: [(None, None)] for c in ("paired-gain", "repeat-reduction", "targeted-ci",
                                                     "clean-non-inferiority", "overhead")}
    assert "sandbox evidence" in reads["critical-failures"][0].made_by
    assert "second seed or checkpoint" in reads["confirmation-run"][0].made_by
    text = format_plan(plan)
    assert ("missing now: critical-failures, unsupported-completion, isolated-replay-completion, confirmation-run"
            in text)
    assert "configs/gates/corpus-only.toml" in text


def test_the_plan_checks_the_run_and_each_evidence_given(run_dir: Path, tmp_path: Path) -> None:
    outcomes = tmp_path / "critical.json"
    outcomes.write_text("{}")
    evidence = {"critical_failures": outcomes, "unsupported_completion": tmp_path, "confirmation": run_dir,
                "isolated_replay": tmp_path / "absent.json", "typo": outcomes}
    plan = plan_gate(SERIOUS, run_dir, evidence, BASE, Q_ONLY)
    state = {c.id: (c.reads[0].present, c.reads[0].problem) for c in plan.conditions}
    assert state["paired-gain"] == (True, "") and state["critical-failures"] == (True, "")
    assert state["confirmation-run"] == (True, "")
    assert state["unsupported-completion"][0] is False and "not a regular file" in state["unsupported-completion"][1]
    assert state["isolated-replay-completion"][0] is False and "absent.json" in state["isolated-replay-completion"][1]
    assert plan.unused_evidence == ["typo"]
    other = plan_gate(SERIOUS, run_dir, {"confirmation": run_dir}, BASE, "strong")
    problems = {c.id: c.reads[0].problem for c in other.conditions}
    assert problems["paired-gain"] == problems["confirmation-run"] == f"{run_dir} has no results for arm(s) strong"


def test_a_not_run_condition_in_a_verdict_names_the_evidence_it_lacked(run_dir: Path) -> None:
    verdict = evaluate_gate(SERIOUS, run_dir, BASE, Q_ONLY)
    reads = {c.id: [(r.key, r.present) for r in c.reads] for c in verdict.conditions}
    assert {c: reads[c] for c in NEED_EVIDENCE} == {c: [(key, False)] for c, key in NEED_EVIDENCE.items()}
    assert reads["overhead"] == [(None, True)]  # read from the run, which holds no usage: not run all the same
    assert all(c.reads == [] for c in verdict.conditions if c.status is not Status.NOT_RUN)
    text = format_verdict(verdict)
    assert ("reads --evidence critical_failures=PATH (NO: not given), from `worker-replay sandbox run` on a "
            "scenario pack, then `sandbox evidence` (critical_failures.json)") in text
    assert "reads --evidence confirmation=PATH (NO: not given), from `worker-replay run` of a second seed" in text
    assert "reads RUN_DIR/results.jsonl (yes), from `worker-replay run`" in text


def test_corpus_only_is_the_serious_candidates_run_conditions_with_their_thresholds() -> None:
    corpus, serious = load_policy(CORPUS_ONLY), load_policy(SERIOUS)
    assert all(sources(c) == {} for c in corpus.conditions)
    same = {c.id: c for c in serious.conditions}
    assert [c.id for c in corpus.conditions] == [c.id for c in serious.conditions if not sources(c)]
    assert all(c == same[c.id] for c in corpus.conditions)
    assert "NOT the\n# serious-candidate gate" in CORPUS_ONLY.read_text()


def test_corpus_only_judges_s1_from_its_results_alone(run_dir: Path) -> None:
    assert all(c.reads[0].present for c in plan_gate(CORPUS_ONLY, run_dir, {}, BASE, Q_ONLY).conditions)
    verdict = evaluate(load_policy(CORPUS_ONLY), compare(e13_results(), BASE, Q_ONLY))
    statuses = {c.id: c.status for c in verdict.conditions}
    assert statuses == {"paired-gain": Status.FAIL, "repeat-reduction": Status.PASS, "targeted-ci": Status.PASS,
                        "clean-non-inferiority": Status.FAIL, "overhead": Status.NOT_RUN}


def test_every_evidence_field_of_every_kind_says_what_writes_it() -> None:
    for kind in get_args(AnyCondition):
        name = get_args(kind.model_fields["kind"].annotation)[0]
        assert set(SOURCES.get(name, {})) == {"evidence", "suite_evidence"} & set(kind.model_fields), name
    assert set(SOURCES) <= set(CONDITION_KINDS)


def test_a_condition_with_two_evidence_keys_lists_both() -> None:
    data = json.loads(plan_gate(PRODUCTION).model_dump_json())
    fresh = next(c for c in data["conditions"] if c["id"] == "fresh-chronological")
    assert [r["key"] for r in fresh["reads"]] == ["fresh", "fresh_suite"]


def _suite_of(path: Path, strata: list[str]) -> Path:
    """A suite whose decisions are of `strata` in that order (positives with a target, known_failure with a
    failed call whose arguments are kept)."""
    path.mkdir()
    (path / "suite.toml").write_text('name = "t"\nversion = "1"\ncreated = 2026-08-01T00:00:00Z\n')
    lines = []
    for i, stratum in enumerate(strata):
        d = decision(i).model_dump(mode="json", exclude_none=True) | {"stratum": stratum}
        if stratum == "known_failure":
            d.pop("target")
            d["failed_action"] = {"tool": "list_invoices", "arguments": {}}
        lines.append(json.dumps(d))
    (path / "decisions.jsonl").write_text("\n".join(lines) + "\n")
    return path


def test_the_plan_says_which_conditions_the_suite_cannot_feed_before_any_run(tmp_path: Path) -> None:
    suite = _suite_of(tmp_path / "suite", ["verified_action", "verified_action", "known_failure"])
    plan = plan_gate(CORPUS_ONLY, suite=suite)
    feed = {c.id: (c.suite.held, c.suite.can_pass) for c in plan.conditions if c.suite is not None}
    assert feed == {"paired-gain": (2, True), "repeat-reduction": (1, True), "targeted-ci": (0, False),
                    "clean-non-inferiority": (0, False), "overhead": (3, True)}
    text = format_plan(plan)
    assert ("cannot pass on this suite, whatever the candidate does: targeted-ci (it holds 0 verified_recovery "
            "decisions with a target); clean-non-inferiority (it holds 0 clean_trajectory_action decisions with a "
            "target)") in text
    assert "paired-gain            the suite holds 2 held-out positive decisions" in text


def test_the_plan_reads_the_suite_the_run_names_and_says_when_none_is_read(run_dir: Path, tmp_path: Path) -> None:
    assert "not read (no RUN_DIR or --suite given)" in format_plan(plan_gate(CORPUS_ONLY))
    assert "names no suite (no run.json yet); give --suite DIR" in format_plan(plan_gate(CORPUS_ONLY, tmp_path))
    bind(run_dir, _suite_of(tmp_path / "suite", ["verified_recovery", "clean_trajectory_action"]))
    plan = plan_gate(CORPUS_ONLY, run_dir)
    assert plan.suite == str(tmp_path / "suite")
    assert [c.id for c in plan.conditions if c.suite is not None and not c.suite.can_pass] == ["repeat-reduction"]


def test_a_max_p_asks_for_as_many_decisions_as_its_sign_test_needs(tmp_path: Path) -> None:
    policy = tmp_path / "p.toml"
    policy.write_text('name = "p"\nversion = "1"\n[[conditions]]\nid = "gain"\nkind = "paired_gain"\n'
                      'description = "d"\nmin_points = 1\nmax_p = 0.05\n')
    suite = _suite_of(tmp_path / "suite", ["verified_action"] * 5)
    gain = plan_gate(policy, suite=suite).conditions[0].suite
    assert gain is not None and (gain.minimum, gain.held, gain.can_pass) == (6, 5, False)  # 5/0 → p 0.0625
    assert "(≥ 6 for its max_p, even if every one were a win): cannot pass on this suite" in gain.text()
