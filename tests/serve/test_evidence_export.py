"""Production-candidate gate evidence from the gateway's stores (serve/evidence_export.py): the shadow
verdicts, the canary cohorts and the rollback readiness, each worked out by hand here, then the
export read back by the gate. The live end-to-end run is in test_capture.py."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from core.attestation import ServedIdentity, adapter_fingerprint
from core.capture_store import CapturedDecision, CaptureStore
from core.evidence import CanaryEvidence, PairedOutcomes, RegistryEvidence
from serve.cli import main
from serve.evidence_export import EvidenceError, canary_cohorts, export, registry_evidence, shadow_outcomes
from serve.gateway.capture import now_iso
from serve.gateway.config import load_gateway_config
from serve.gateway.registry import Registry, RequestRow, ShadowRow, inspect_adapter
from tests.support.gateway_harness import fake_adapter, write_config

CANDIDATE = "cand-1"


def decision(id: str, tool: str | None = "lookup", outcome: str | None = "ok", kind: str = "production",
             adapter: str = "worker-base", route: str = "worker") -> CapturedDecision:
    return CapturedDecision(
        id=id, captured_at="2026-11-29T10:00:00.000000Z", mode="descriptor", workspace="ws", session="s",
        route=route, adapter=adapter, kind=kind, request_sha256="0" * 64, message_hashes=[], roles=[],
        tools_offered=["lookup", "search"], tool_choice="auto", parse_outcome="ok" if tool else "no_call",
        chosen_tool=tool, chosen_keys=["id"] if tool else [], call_id=None, calls=1 if tool else 0,
        duration_s=0.1, outcome=outcome)


def shadow_row(request_id: str, agreement: str) -> dict:
    return {"request_id": request_id, "agreement": agreement, "candidate": CANDIDATE}


def test_shadow_items_are_judged_by_the_production_calls_outcome():
    decisions = {d.id: d for d in [
        decision("ok-same"), decision("ok-shape"), decision("ok-other-keys"), decision("ok-other-tool"),
        decision("blocked-other-tool", outcome="blocked"), decision("failed-repeat", outcome="failed"),
        decision("failed-other-keys", outcome="failed"), decision("failed-unparsed", outcome="failed"),
        decision("empty", outcome="empty_result"), decision("no-call", tool=None, outcome=None),
        decision("no-next-turn", outcome=None)]}
    rows = [shadow_row("ok-same", "exact"), shadow_row("ok-shape", "same_shape"),
            shadow_row("ok-other-keys", "same_tool"), shadow_row("ok-other-tool", "different"),
            shadow_row("blocked-other-tool", "different"), shadow_row("failed-repeat", "same_shape"),
            shadow_row("failed-other-keys", "same_tool"), shadow_row("failed-unparsed", "unparsed"),
            shadow_row("empty", "exact"), shadow_row("no-call", "exact"), shadow_row("no-next-turn", "exact"),
            shadow_row("never-captured", "different")]
    evidence = shadow_outcomes(rows, decisions, CANDIDATE)
    judged = {i.id: (i.baseline, i.candidate) for i in evidence.outcomes.items}
    assert judged == {
        "ok-same": (True, True), "ok-shape": (True, True), "ok-other-keys": (True, False),
        "ok-other-tool": (True, False), "blocked-other-tool": (False, True), "failed-repeat": (False, False),
        "failed-other-keys": (False, True), "failed-unparsed": (False, False)}
    assert evidence.left_out == {"not captured": 1, "production made no call": 1, "no verdict yet": 1,
                                 "outcome empty_result (no verdict)": 1}
    assert evidence.agreement == {"exact": 4, "same_shape": 2, "same_tool": 2, "different": 3, "unparsed": 1}
    assert evidence.outcomes.measure == "correct" and evidence.outcomes.candidate == CANDIDATE


def test_canary_cohorts_count_server_errors_and_anomalies_of_their_own_decisions():
    requests = [
        {"route": "worker", "kind": "production", "adapter": "worker-base", "status": 200},
        {"route": "worker", "kind": "production", "adapter": "worker-base", "status": 502},
        {"route": "worker", "kind": "production", "adapter": "worker-base", "status": 400},  # the client's fault
        {"route": "worker", "kind": "canary", "adapter": CANDIDATE, "status": 200},
        {"route": "worker", "kind": "canary", "adapter": CANDIDATE, "status": 504},
        {"route": "worker", "kind": "canary", "adapter": "other-cand", "status": 500},  # another candidate
        {"route": "worker", "kind": "shadow", "adapter": CANDIDATE, "status": 500},  # not a cohort
        {"route": "other", "kind": "production", "adapter": "worker-base", "status": 500},
        {"route": None, "kind": "pinned", "adapter": CANDIDATE, "status": 500},
    ]
    decisions = [
        decision("p1"), decision("p2", outcome="empty_result"), decision("p3", outcome=None),
        decision("c1", kind="canary", adapter=CANDIDATE, outcome="failed"),
        decision("c2", kind="canary", adapter=CANDIDATE, outcome="ok"),
        decision("c3", kind="canary", adapter=CANDIDATE, outcome="pending"),
        decision("x1", kind="canary", adapter="other-cand", outcome="failed"),
        decision("x2", route="other", outcome="failed"),
    ]
    evidence = canary_cohorts(requests, decisions, "worker", CANDIDATE, CANDIDATE)
    assert evidence.control.model_dump() == {"requests": 3, "errors": 1, "anomalies": 1, "outcomes": 2}
    assert evidence.canary.model_dump() == {"requests": 2, "errors": 1, "anomalies": 2, "outcomes": 3}
    assert evidence.adapter == CANDIDATE


def registry_with_candidate(tmp_path) -> Registry:
    root = tmp_path / "adapters"
    registry = Registry(tmp_path / "gw" / "state.sqlite", ["worker"], "worker-base")
    for name in (CANDIDATE, "older"):
        fake_adapter(root, name)
        registry.register(name, inspect_adapter(name, root, "SmolLM2-135M-Instruct", 16))
        registry.set_adapter_state(name, "loaded")
    return registry


def test_rollback_target_is_todays_production_until_the_candidate_is_promoted(tmp_path):
    registry = registry_with_candidate(tmp_path)
    registry.set_production("worker", "older")
    before = registry_evidence(registry.state, "worker", CANDIDATE)
    assert (before.production, before.rollback_target) == (CANDIDATE, "older")
    assert set(before.loaded) == {"worker-base", CANDIDATE, "older"}
    registry.set_production("worker", CANDIDATE)
    registry.set_adapter_state("older", "unloaded")
    after = registry_evidence(registry.state, "worker", CANDIDATE)
    assert (after.production, after.rollback_target) == (CANDIDATE, "older")
    assert "older" not in after.loaded
    registry.close()


def test_export_writes_what_the_gate_reads_and_explains_bad_calls(tmp_path, capsys):
    path = write_config(tmp_path / "gw", ["http://127.0.0.1:9"], tmp_path / "adapters",
                        extra='[capture]\nmode = "descriptor"\nsample_rate = 1.0\n')
    config = load_gateway_config(path)
    with pytest.raises(EvidenceError, match="no gateway state"):
        export(config, "worker", tmp_path / "out")
    registry = registry_with_candidate(tmp_path)
    with pytest.raises(EvidenceError, match="unknown route 'nope'"):
        export(config, "nope", tmp_path / "out")
    with pytest.raises(EvidenceError, match="runs no canary or shadow"):
        export(config, "worker", tmp_path / "out")
    with pytest.raises(EvidenceError, match="give the window's start"):
        export(config, "worker", tmp_path / "out", candidate=CANDIDATE)
    with pytest.raises(EvidenceError, match="not an ISO time"):
        export(config, "worker", tmp_path / "out", candidate=CANDIDATE, since="yesterday")

    registry.set_shadow("worker", CANDIDATE, 1.0)
    registry.record_request(RequestRow(request_id="r1", endpoint="chat", requested="worker", route="worker",
                                       adapter="worker-base", kind="production", sticky_key=None, upstream="engine-0",
                                       status=200, reason=None, duration_s=0.2))
    registry.record_shadow(ShadowRow(request_id="r1", route="worker", endpoint="chat", production="worker-base",
                                     candidate=CANDIDATE, request_sha256="0" * 64, production_answer="{}",
                                     shadow_answer="{}", production_outcome="ok", shadow_outcome="ok",
                                     production_tool="lookup", shadow_tool="search", agreement="different",
                                     error=None, shadow_latency_s=0.3))
    registry.close()
    store = CaptureStore(config.capture.db)
    store.insert(replace(decision("r1", outcome="blocked"), captured_at=now_iso()))
    store.close()

    out = tmp_path / "evidence"
    assert main(["evidence", "--config", str(path), "--out", str(out), "--arm", "candidate"]) == 0
    printed = capsys.readouterr().out
    assert "1 with a verdict (+1/−0)" in printed and "--candidate candidate" in printed
    shadow = PairedOutcomes.model_validate_json((out / "shadow.json").read_text())
    assert shadow.candidate == "candidate" and [(i.id, i.baseline, i.candidate) for i in shadow.items] == [
        ("r1", False, True)]
    canary = CanaryEvidence.model_validate_json((out / "canary.json").read_text())
    assert canary.control.requests == 1 and canary.canary.requests == 0
    # Both files name what served each side by version and weights, for a gate to bind them to the judged run.
    assert shadow.subject == canary.subject and shadow.subject is not None
    assert shadow.subject.baseline == ServedIdentity(model="worker-base", version="worker-base")
    assert shadow.subject.candidate == ServedIdentity(model=CANDIDATE, version=CANDIDATE, fingerprint=adapter_fingerprint(tmp_path / "adapters" / CANDIDATE))
    registry_file = RegistryEvidence.model_validate_json((out / "registry.json").read_text())
    assert registry_file.rollback_target == "worker-base" and "worker-base" in registry_file.loaded
    assert json.loads((out / "registry.json").read_text())["production"] == CANDIDATE
    assert main(["evidence", "--config", str(path), "--out", str(out), "--route", "nope"]) == 2
    assert "unknown route" in capsys.readouterr().err
    existing = tmp_path / "a-file"
    existing.write_text("x")
    assert main(["evidence", "--config", str(path), "--out", str(existing), "--arm", "candidate"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and err.count("\n") == 1 and "cannot write" in err
