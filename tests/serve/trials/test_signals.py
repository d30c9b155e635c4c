"""Cohorts and signal counts from the stores' rows: hash-matched control, anomalies per observed
tool result, slow requests over the threshold, shadow disagreement among readable comparisons."""

from __future__ import annotations

import itertools
from typing import Any

from core.capture_store import CapturedDecision
from serve.gateway.routing import canary_bucket
from serve.trials.machine import Counts, SignalState, TrialState
from serve.trials.signals import StepCounts, canary_evidence, side, step_counts
from serve.trials.trial_policy import ShadowSignal, Signals, SlowSignal, TrialPolicy

POLICY = TrialPolicy.model_validate({
    "name": "t", "route": "worker", "candidate": "cand", "alpha": 0.01, "interval_s": 60, "max_duration_s": 1000,
    "gate_policy": "g.toml", "steps": [{"percent": 10, "min_duration_s": 0, "min_requests": 0}]})
POLICY = POLICY.model_copy(update={"signals": Signals(slow_requests=SlowSignal(threshold_s=2.0),
                                                      shadow_disagreement=ShadowSignal(max_rate=0.2))})


def key_in(low: float, high: float, skip: int = 0) -> str:
    found = (f"w{i}" for i in itertools.count() if low <= canary_bucket("worker", "cand", f"w{i}") < high)
    return next(itertools.islice(found, skip, None))


def request(kind: str, key: str | None, status: int = 200, duration: float = 0.5, route: str = "worker") -> dict[str, Any]:
    adapter = "cand" if kind == "canary" else "prod"
    return {"route": route, "kind": kind, "adapter": adapter, "sticky_key": key, "status": status,
            "duration_s": duration}


def decision(kind: str, workspace: str, outcome: str | None) -> CapturedDecision:
    return CapturedDecision(
        id=f"d-{workspace}-{outcome}", captured_at="2026-01-01T00:00:00Z", mode="descriptor", workspace=workspace,
        session="s", route="worker", adapter="cand" if kind == "canary" else "prod", kind=kind, request_sha256="x",
        message_hashes=[], roles=[], tools_offered=[], tool_choice="auto", parse_outcome="tool_call",
        chosen_tool="t", chosen_keys=[], call_id=None, calls=1, duration_s=0.1, outcome=outcome)


def test_the_control_cohort_is_the_next_equal_slice_of_the_same_hash() -> None:
    assert side("worker", "cand", 10, "canary", "cand", key_in(0, 10)) == "candidate"
    assert side("worker", "cand", 10, "production", "prod", key_in(10, 20)) == "control"
    assert side("worker", "cand", 10, "production", "prod", key_in(20, 100)) is None
    assert side("worker", "cand", 10, "production", "prod", None) is None  # no sticky key: in neither
    assert side("worker", "cand", 10, "canary", "other", key_in(0, 10)) is None


def test_step_counts_per_signal() -> None:
    cand, ctrl, outside = key_in(0, 10), key_in(10, 20), key_in(40, 100)
    requests = [request("canary", cand, 502), request("canary", cand, duration=3.0), request("canary", cand),
                request("production", ctrl, 504, duration=9.0), request("production", ctrl),
                request("production", outside, 500), request("canary", cand, 500, route="other")]
    decisions = [decision("canary", cand, "failed"), decision("canary", cand, "ok"),
                 decision("canary", cand, None), decision("production", ctrl, "ok"),
                 decision("production", outside, "failed")]
    shadows = [{"candidate": "cand", "agreement": a} for a in ("exact", "different", "same_tool", "unparsed")]
    shadows.append({"candidate": "older", "agreement": "different"})
    counts = step_counts(POLICY, 10, requests, decisions, shadows)
    assert counts.requests == (3, 2)
    assert counts.signals["server_errors"] == Counts(1, 3, 1, 2)
    assert counts.signals["slow_requests"] == Counts(1, 3, 1, 2)
    assert counts.signals["shadow_disagreement"] == Counts(2, 3)
    assert counts.signals["tool_anomalies"] == Counts(1, 2, 0, 1)  # per labelled tool result only


def test_a_later_reading_yields_only_what_is_new_and_holds_one_sided_news_back() -> None:
    earlier = StepCounts((3, 2), {"server_errors": Counts(1, 3, 0, 2), "tool_anomalies": Counts(0, 1, 0, 1)})
    later = StepCounts((5, 6), {"server_errors": Counts(2, 5, 1, 6), "tool_anomalies": Counts(2, 3, 0, 1),
                                "slow_requests": Counts(1, 5, 0, 6)})
    requests, news, remembered = later.since(earlier)
    assert requests == (2, 4)
    assert news == {"server_errors": Counts(1, 2, 1, 4), "slow_requests": Counts(1, 5, 0, 6)}
    # the candidate's two new anomalies came without new control results: they wait for them
    assert remembered.signals["tool_anomalies"] == Counts(0, 1, 0, 1)
    assert remembered.signals["server_errors"] == later.signals["server_errors"]
    requests, news, _ = later.since(None)
    assert requests == (5, 6) and news == dict(later.signals)


def test_the_trial_writes_the_gate_canary_evidence_from_its_own_cohorts() -> None:
    state = TrialState(phase="step", started_at=100.0, step_started_at=100.0,
                       signals={"server_errors": SignalState(totals=Counts(1, 300, 2, 310)),
                                "tool_anomalies": SignalState(totals=Counts(3, 40, 4, 45))})
    evidence = canary_evidence(state, "cand", "t1", 250.0)
    assert evidence.window is not None and evidence.window.model_dump() == {"trial": "t1", "since": 100.0,
                                                                            "until": 250.0}
    assert evidence.canary.model_dump() == {"requests": 300, "errors": 1, "anomalies": 3, "outcomes": 40}
    assert evidence.control.model_dump() == {"requests": 310, "errors": 2, "anomalies": 4, "outcomes": 45}
