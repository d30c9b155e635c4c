"""Evidence bound by identity (custody, issue 60 items 1–2): a condition that reads another run judges it only
when it is another sealed run of the judged run's suite. The judged run handed back as its own confirmation or
quantised run, a copy of its directory, or a run of other decisions is `not_run` with the reason, never judged;
the same evidence made right still passes."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from replay.analysis.gates import Status, evaluate_gate
from replay.run.directory import RUN_JSON
from tests.replay.analysis.test_gates import CANDIDATE, PRODUCTION, SERIOUS, strong_records, write_run
from tests.support.e13 import BASE
from tests.support.runs import quantised, seal

RUN_EVIDENCE = {"quantised": "quantisation-survives", "confirmation": "confirmation-run"}


def policy(tmp_path: Path, key: str) -> Path:
    """One run-evidence condition, as the shipped policies write it."""
    body = {"quantised": 'kind = "quantisation_survives"\nmin_points = 5.0\nmax_drop_points = 2.0\n',
            "confirmation": 'kind = "confirmation_run"\nmin_points = 5.0\n'}[key]
    path = tmp_path / f"{key}.toml"
    path.write_text(f'name = "custody"\nversion = "1"\n\n[[conditions]]\nid = "{RUN_EVIDENCE[key]}"\n'
                    f'description = "d"\nevidence = "{key}"\n{body}')
    return path


def status(tmp_path: Path, key: str, judged: Path, evidence: Path) -> tuple[Status, str]:
    [result] = evaluate_gate(policy(tmp_path, key), judged, BASE, CANDIDATE, {key: evidence}).conditions
    return result.status, result.reason


@pytest.mark.parametrize("key", sorted(RUN_EVIDENCE))
def test_the_judged_run_is_not_its_own_evidence(tmp_path: Path, key: str) -> None:
    judged = write_run(tmp_path / "run", strong_records())
    got, reason = status(tmp_path, key, judged, judged)
    assert got is Status.NOT_RUN and f"evidence {key!r} is the judged run itself" in reason
    copy = Path(shutil.copytree(judged, tmp_path / "copy"))
    got, reason = status(tmp_path, key, judged, copy)
    assert got is Status.NOT_RUN and "or a copy of it" in reason
    other = write_run(tmp_path / "other", strong_records(gain=9))  # another run of the same suite: judged
    assert status(tmp_path, key, judged, quantised(other) if key == "quantised" else other)[0] is Status.PASS


@pytest.mark.parametrize("key", sorted(RUN_EVIDENCE))
def test_a_run_of_other_decisions_is_not_evidence(tmp_path: Path, key: str) -> None:
    judged = write_run(tmp_path / "run", strong_records())
    elsewhere = write_run(tmp_path / "elsewhere", strong_records(gain=9))
    seal(elsewhere, "e" * 64)
    got, reason = status(tmp_path, key, judged, elsewhere)
    assert got is Status.NOT_RUN and f"evidence {key!r} replayed another suite (sha256 eeeeeeeeeeee" in reason


@pytest.mark.parametrize("key", sorted(RUN_EVIDENCE))
def test_evidence_changed_after_its_run_is_not_judged(tmp_path: Path, key: str) -> None:
    judged = write_run(tmp_path / "run", strong_records())
    other = write_run(tmp_path / "other", strong_records(gain=9))
    results = other / "results.jsonl"
    results.write_text(results.read_text().replace('"joint_correct":false', '"joint_correct":true', 1))
    got, reason = status(tmp_path, key, judged, other)
    assert got is Status.NOT_RUN and "changed after its run sealed it" in reason


@pytest.mark.parametrize("key", sorted(RUN_EVIDENCE))
def test_a_run_that_records_no_identity_binds_nothing(tmp_path: Path, key: str) -> None:
    """A run made before run ids (or a hand-made directory) cannot be told from the judged run."""
    judged = write_run(tmp_path / "run", strong_records())
    other = write_run(tmp_path / "other", strong_records(gain=9))
    manifest = json.loads((other / RUN_JSON).read_text())
    del manifest["run_id"]
    (other / RUN_JSON).write_text(json.dumps(manifest))
    got, reason = status(tmp_path, key, judged, other)
    assert got is Status.NOT_RUN and "records no run_id and suite sha256" in reason


SHIPPED = {"quantised": (PRODUCTION, "quantisation-survives"), "confirmation": (SERIOUS, "confirmation-run")}


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(key=st.sampled_from(sorted(SHIPPED)), copy=st.booleans(), gain=st.integers(-5, 15))
def test_the_judged_run_as_another_run_of_its_suite_is_never_judged_by_a_shipped_policy(
        tmp_path_factory: pytest.TempPathFactory, key: str, copy: bool, gain: int) -> None:
    """The shipped policies, the judged run (or a copy of it) handed in as its own confirmation or quantised run,
    whatever its gain: that condition is not run, for that reason. (A fresh run may be the judged run: its own
    decisions can be the fresh ones.)"""
    policy, condition = SHIPPED[key]
    root = tmp_path_factory.mktemp("custody")
    judged = write_run(root / "run", strong_records(gain=gain))
    handed = Path(shutil.copytree(judged, root / "copy")) if copy else judged
    verdict = evaluate_gate(policy, judged, BASE, CANDIDATE, {key: handed})
    [result] = [c for c in verdict.conditions if c.id == condition]
    assert result.status is Status.NOT_RUN and f"evidence {key!r} is the judged run itself" in result.reason


# ── sandbox and other outcome evidence bound by what served the arms (issue 60 item 3) ─────────────────────

WEIGHTS_A, WEIGHTS_B = "a" * 64, "b" * 64


def served_run(tmp_path: Path, candidate_weights: str) -> Path:
    """A judged run whose run.json records what served its arms, as the executor writes it."""
    run = write_run(tmp_path / "run", strong_records())
    manifest = json.loads((run / RUN_JSON).read_text())
    manifest["served"] = {BASE: {"model": "worker-base"}, CANDIDATE: {"model": "mix", "version": "mix-v2",
                                                                      "fingerprint": candidate_weights}}
    (run / RUN_JSON).write_text(json.dumps(manifest))
    return seal(run)


def isolated(tmp_path: Path, candidate_weights: str | None) -> Path:
    """`sandbox evidence`'s isolated-replay file, its subject naming the candidate's weights."""
    subject = {"run_id": "sandbox", "baseline": {"model": "worker-base"},
               "candidate": {"model": "mix", "version": "mix-v1", "fingerprint": candidate_weights}}
    items = [{"id": f"t{i}", "baseline": True, "candidate": True} for i in range(10)]
    path = tmp_path / f"isolated-{candidate_weights}.json"
    path.write_text(json.dumps({"measure": "task_completed", "candidate": CANDIDATE, "items": items,
                                "subject": subject}))
    return path


def isolated_status(tmp_path: Path, run: Path, evidence: Path) -> tuple[Status, str]:
    policy = tmp_path / "isolated.toml"
    policy.write_text('name = "iso"\nversion = "1"\n\n[[conditions]]\nid = "isolated"\ndescription = "d"\n'
                      'kind = "isolated_replay_completion"\nevidence = "isolated_replay"\nmin_points = 0.0\n')
    [result] = evaluate_gate(policy, run, BASE, CANDIDATE, {"isolated_replay": evidence}).conditions
    return result.status, result.reason


def test_evidence_about_other_weights_of_the_same_arm_name_is_not_judged(tmp_path: Path) -> None:
    run = served_run(tmp_path, WEIGHTS_A)
    got, reason = isolated_status(tmp_path, run, isolated(tmp_path, WEIGHTS_B))
    assert got is Status.NOT_RUN
    assert reason == ("evidence 'isolated_replay' is about candidate 'mix' served with weights bbbbbbbbbbbb…, the "
                      "judged run's candidate 'strong' with aaaaaaaaaaaa…: it must be about the same weights")
    assert isolated_status(tmp_path, run, isolated(tmp_path, WEIGHTS_A))[0] is Status.PASS


def test_evidence_about_the_base_model_is_not_evidence_about_an_adapter(tmp_path: Path) -> None:
    got, reason = isolated_status(tmp_path, served_run(tmp_path, WEIGHTS_A), isolated(tmp_path, None))
    assert got is Status.NOT_RUN and "served with weights none (the base model)" in reason
