"""Contamination checked where it is judged (issue 60 item 3, case 5): a candidate trained on a curated set built
by the real `worker-replay curate build` from the recorded corpus, judged on a frozen suite of the same sessions.
The gate follows the run's served identity to the adapter, its training record, the set's manifest and provenance
(every digest checked), leaves the decisions the set reaches out of its comparison, says so, and records them in
the verdict; an arm with no training record is "no lineage: not checked"; a changed link is one `error:` line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from core.attestation import adapter_fingerprint
from core.capture_store import parse_instant
from core.curated import MANIFEST_JSON, PROVENANCE_JSONL, TRAIN_JSONL, TRAIN_RECORD
from core.records import ResultRecord
from replay.analysis.gates import Status, evaluate_gate, format_verdict, read_verdict
from replay.analysis.gates.verdict_files import read_statement
from replay.analysis.training_lineage import ChainError, check_run
from replay.cli import main
from replay.curation.build import SUITES_ENV
from replay.run.directory import RUN_JSON, SERVED
from replay.suite import load_suite
from serve.engine.train import MARKER, curated_examples
from tests.replay.curation.test_eval_boundary import POLICY, register_suite
from tests.support.curation import (
    LOOKUP,
    copy_session_as,
    copy_workspace,
    keys_file,
    plant_retry_value,
    policy_file,
    session_path,
)
from tests.support.e13 import positive_record
from tests.support.fault_upstream import BASE, FaultUpstream
from tests.support.runs import LENIENT_POLICY, write_sealed

GAIN_POLICY = """name = "gain"
version = "1"
[[conditions]]
id = "paired-gain"
kind = "paired_gain"
scope = "all_positive"
min_points = 5
description = "the candidate gains 5 points on the held-out positives"
"""
SESSION_DECISIONS = [f"{LOOKUP}.main.{i}" for i in range(3)]
"""The recorded lookup session's three decisions: the frozen suite's."""


@pytest.fixture
def suite(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The recorded workspace's decisions as a frozen suite, registered (curation's eval boundary would refuse
    them: the sets here are built with `--no-eval-boundary`, as a user who did not register it would)."""
    monkeypatch.setenv(SUITES_ENV, str(tmp_path / "registry"))
    return register_suite(tmp_path / "registry")


def curated_set(tmp_path: Path, corpus: Path) -> Path:
    out = tmp_path / "set"
    assert main(["curate", "build", str(corpus), "--policy", str(policy_file(tmp_path, POLICY)), "--keys",
                 str(keys_file(tmp_path, ["ws-r", "ws-x"])), "--out", str(out), "--no-eval-boundary"]) == 0
    return out


def adapter(tmp_path: Path, curated: Path | None) -> Path:
    """An adapter directory as `adapter train --data SET` leaves it (its record from the trainer's own
    `curated_examples`); without a set, as `make-random` leaves one: no training record."""
    out = tmp_path / "adapter"
    out.mkdir()
    (out / "adapter_config.json").write_text('{"r": 4}')
    (out / "adapter_model.safetensors").write_bytes(b"weights")
    if curated is not None:
        _, data = curated_examples(curated)
        (out / MARKER).write_text(json.dumps({"base": "model", "data": data, "report": {}}))
    return out


def judged_run(tmp_path: Path, suite: Path, weights: Path | None, others: int = 20) -> Path:
    """A sealed run of `suite` (the candidate right where the base is wrong on its decisions), plus `others`
    decisions of elsewhere (base 10 right, candidate 16), with what served each arm as `run` records it."""
    records: list[ResultRecord] = []
    for i, decision_id in enumerate(SESSION_DECISIONS):
        records += [positive_record("base", "verified_action", decision_id, i, False, False),
                    positive_record("cand", "verified_action", decision_id, i, True, True)]
    for i in range(others):
        records += [positive_record("base", "verified_action", f"x-{i}", i, i < 10, i < 10),
                    positive_record("cand", "verified_action", f"x-{i}", i, i < 16, i < 16)]
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    served = {"base": {"model": "base"}, "cand": {"model": "cand"} if weights is None else {
        "model": "cand", "version": "cand", "fingerprint": adapter_fingerprint(weights), "root": str(weights)}}
    (run_dir / RUN_JSON).write_text(json.dumps({"suite": {"path": str(suite), "sha256": load_suite(suite).sha256},
                                                SERVED: served}))
    return write_sealed(run_dir, records)


def policy(tmp_path: Path, text: str = GAIN_POLICY) -> Path:
    path = tmp_path / "gate.toml"
    path.write_text(text)
    return path


def test_a_candidate_trained_on_the_suites_sessions_has_those_decisions_left_out(tmp_path: Path, suite: Path) -> None:
    corpus = tmp_path / "corpus"
    copy_workspace(corpus, "ws-r")  # the suite's session in another workspace, its retry looking up INV-8: the set
    plant_retry_value(session_path(corpus, "ws-r", LOOKUP), LOOKUP, 1, {"id": "INV-8"})  # draws two of its states
    run_dir = judged_run(tmp_path, suite, adapter(tmp_path, curated_set(tmp_path, corpus)))
    verdict = evaluate_gate(policy(tmp_path), run_dir, "base", "cand")
    check = verdict.contamination
    assert check is not None and check.checked and check.decisions == 3
    assert [c.decision for c in check.contaminated] == SESSION_DECISIONS
    assert check.rule_counts == {"session": 3, "request": 1, "near_duplicate": 3}
    [gain] = verdict.conditions
    # judged on the 20 clean decisions alone: 10 → 16 of 20, not 10 → 19 of 23
    assert gain.status is Status.PASS and (gain.evidence["n"], gain.evidence["wins"]) == (20, 6)
    text = format_verdict(verdict)
    assert (f"contamination: arm 'cand' (trained on the curated set {tmp_path / 'set'}): 3 of 3 suite decisions its "
            "training data reaches (session 3, request 1, near-duplicate 3): " + ", ".join(SESSION_DECISIONS)
            + "; left out of the comparison") in text


def test_a_suite_wholly_in_the_training_data_leaves_nothing_to_judge(tmp_path: Path, suite: Path,
                                                                     capsys: pytest.CaptureFixture[str]) -> None:
    corpus = tmp_path / "corpus"
    copy_workspace(corpus, "ws-r")
    run_dir = judged_run(tmp_path, suite, adapter(tmp_path, curated_set(tmp_path, corpus)), others=0)
    capsys.readouterr()
    assert main(["gate", str(run_dir), "--policy", str(policy(tmp_path)), "--baseline", "base", "--candidate", "cand",
                 "--ledger", str(tmp_path / "ledger.sqlite")]) == 1
    out = capsys.readouterr().out
    assert "[not run] paired-gain" in out
    assert "(3 decision(s) the candidate's training data reaches were left out of the comparison)" in out
    # the verdict's predicate records what was left out, for anyone who checks it later
    [path] = run_dir.glob("gate-*.json")
    recorded = read_statement(path)[1].verdict.contamination
    assert recorded is not None and [c.decision for c in recorded.contaminated] == SESSION_DECISIONS
    assert recorded.manifest_sha256 is not None and recorded.ngram == 8 and recorded.threshold == 0.5
    assert read_verdict(path).passed is False
    # every file of the chain is an input of the verdict: `verify` names the one changed after it
    assert main(["verify", str(path)]) == 0
    capsys.readouterr()
    train = tmp_path / "set" / TRAIN_JSONL
    train.write_text(train.read_text() + "\n")
    assert main(["verify", str(path)]) == 1
    assert f"  CHANGED lineage:train.jsonl  {train}" in capsys.readouterr().out


def test_a_copy_in_another_session_is_found_by_its_request_and_its_ngrams(tmp_path: Path, suite: Path) -> None:
    corpus = tmp_path / "corpus"
    copy_session_as(corpus, "ws-x", "0c0ffee0-0000-4000-8000-000000000001")  # the same records, another session
    run_dir = judged_run(tmp_path, suite, adapter(tmp_path, curated_set(tmp_path, corpus)))
    [_, check] = check_run(run_dir, ["base", "cand"])
    # the set holds one row of the copy: its third call repeats INV-7 after `paid` (a redundant repeat, refused)
    assert check.rule_counts == {"session": 0, "request": 1, "near_duplicate": 3}
    assert [c.decision for c in check.contaminated] == SESSION_DECISIONS


def test_arms_with_no_training_record_are_not_checked_and_say_so(tmp_path: Path, suite: Path) -> None:
    run_dir = judged_run(tmp_path, suite, adapter(tmp_path, None))
    base, cand = check_run(run_dir, ["base", "cand"])
    assert base.line() == "contamination: arm 'base': no lineage (the base model, or weights the endpoint does not " \
                          "name): not checked"
    assert cand.line() == (f"contamination: arm 'cand': no lineage ({tmp_path / 'adapter'} holds no {TRAIN_RECORD}: "
                           "not trained here, e.g. a random adapter): not checked")
    verdict = evaluate_gate(policy(tmp_path, LENIENT_POLICY), run_dir, "base", "cand")
    assert verdict.conditions[0].evidence["n"] == 23  # nothing left out
    assert "no lineage" in format_verdict(verdict)


@pytest.mark.parametrize("link", ["weights", TRAIN_JSONL, PROVENANCE_JSONL, MANIFEST_JSON, "policy"])
def test_a_changed_link_of_the_chain_is_one_error_line_naming_the_file(
        tmp_path: Path, suite: Path, link: str, capsys: pytest.CaptureFixture[str]) -> None:
    corpus = tmp_path / "corpus"
    copy_workspace(corpus, "ws-r")
    curated = curated_set(tmp_path, corpus)
    weights = adapter(tmp_path, curated)
    run_dir = judged_run(tmp_path, suite, weights)
    changed = {"weights": weights / "adapter_model.safetensors", "policy": tmp_path / "policy.toml"}.get(
        link, curated / link)
    changed.write_bytes(changed.read_bytes() + b"\n")
    with pytest.raises(ChainError):
        check_run(run_dir, ["cand"])
    capsys.readouterr()
    assert main(["gate", str(run_dir), "--policy", str(policy(tmp_path)), "--baseline", "base", "--candidate", "cand",
                 "--ledger", str(tmp_path / "ledger.sqlite")]) == 2
    err = capsys.readouterr().err
    named = weights if link == "weights" else changed
    assert err.startswith(f"error: {named}")
    assert link == "weights" or f"(the training lineage that {weights / MARKER} names)" in err
    assert err.count("\n") == 1 and not list(run_dir.glob("gate-*.json"))


def test_run_and_report_show_each_arms_contamination(tmp_path: Path, suite: Path,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    """`worker-replay run` against an engine that serves the candidate as vLLM lists a LoRA (its directory as
    `root`; the engine itself a named fault injector answering every request), then `report`."""
    corpus = tmp_path / "corpus"
    copy_workspace(corpus, "ws-r")
    weights = adapter(tmp_path, curated_set(tmp_path, corpus))
    run_dir, config = tmp_path / "run", tmp_path / "run.toml"
    with FaultUpstream() as upstream:
        upstream.adapters["cand"] = str(weights)
        config.write_text(f'[endpoint]\nbase_url = "{upstream.url}/v1"\ntimeout_s = 10\n[runner]\nretries = 0\n'
                          f'[[arms]]\nname = "base"\nmodel = "{BASE}"\nmemory = "withheld"\n'
                          '[[arms]]\nname = "cand"\nmodel = "cand"\nmemory = "withheld"\n')
        capsys.readouterr()
        assert main(["run", "--suite", str(suite), "--config", str(config), "--out", str(run_dir),
                     "--ledger", str(tmp_path / "ledger.sqlite")]) == 0
    out = capsys.readouterr().out.splitlines()
    line = (f"contamination: arm 'cand' (trained on the curated set {tmp_path / 'set'}): 3 of 3 suite decisions its "
            "training data reaches (session 3, request 1, near-duplicate 3): " + ", ".join(SESSION_DECISIONS))
    assert out[-2:] == ["contamination: arm 'base': no lineage (the base model, or weights the endpoint does not "
                        "name): not checked", line]
    assert main(["report", str(run_dir), "--ledger", str(tmp_path / "ledger.sqlite")]) == 0
    markdown = (run_dir / "report.md").read_text()
    assert "## Training contamination" in markdown and f"- {line}" in markdown
    html = (run_dir / "report.html").read_text()
    assert 'data-arm="cand" data-checked="true" data-contaminated="3"' in html
    assert 'data-arm="base" data-checked="false" data-contaminated="0"' in html


FRESH_POLICY = """name = "fresh"
version = "1"
[[conditions]]
id = "fresh"
kind = "fresh_chronological"
scope = "verified_action"
captured_after = "2026-01-01T00:00:00Z"
description = "the candidate gains on decisions captured after its training data"
"""


def test_the_curated_manifest_says_when_its_newest_source_decision_was_captured(tmp_path: Path) -> None:
    corpus = tmp_path / "corpus"
    copy_workspace(corpus, "ws-r")
    curated = curated_set(tmp_path, corpus)
    manifest = json.loads((curated / MANIFEST_JSON).read_text())
    times = [json.loads(line)["captured_at"] for line in (curated / PROVENANCE_JSONL).read_text().splitlines()]
    assert times and all(times)
    assert parse_instant(manifest["data_until"]) == max(parse_instant(t) for t in times)


@pytest.mark.parametrize("trained", [True, False])
def test_a_fresh_suite_must_start_after_the_candidates_training_data_ends(tmp_path: Path, suite: Path,
                                                                         trained: bool) -> None:
    """The candidate trained on the suite's own session: its decisions were captured while its training data was,
    so they are not fresh for it (not run, saying when its data ends); with no lineage, the same run is judged."""
    corpus = tmp_path / "corpus"
    copy_workspace(corpus, "ws-r")
    weights = adapter(tmp_path, curated_set(tmp_path, corpus) if trained else None)
    run_dir = judged_run(tmp_path, suite, weights, others=0)
    verdict = evaluate_gate(policy(tmp_path, FRESH_POLICY), run_dir, "base", "cand",
                            {"fresh": run_dir, "fresh_suite": suite})
    [fresh] = verdict.conditions
    if trained:
        until = json.loads((tmp_path / "set" / MANIFEST_JSON).read_text())["data_until"]
        assert fresh.status is Status.NOT_RUN, fresh.reason
        assert f"before the candidate's training data ends ({until}, the newest decision of its curated set " \
               f"{tmp_path / 'set'})" in fresh.reason
    else:
        assert fresh.status is Status.PASS, fresh.reason
