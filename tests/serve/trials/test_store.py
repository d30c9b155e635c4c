"""A stored trial state is either usable with its policy or unreadable (its candidate then goes to
weight 0): for every way it can be wrong, not only unparseable JSON. Property-based over
corrupted states, and through recovery on a real registry."""

from __future__ import annotations

import contextlib
import copy
import json
import sqlite3
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from serve.gateway.registry import AdapterFiles, Registry
from serve.trials.controller import Controller, describe_state
from serve.trials.machine import Abort, Counts, Resume, Suspend, Tick, TrialState, initial, step
from serve.trials.store import StoredTrial, TrialStateUnreadableError, TrialStore, decode, encode
from serve.trials.trial_policy import Step, TrialError, TrialPolicy

POLICY = TrialPolicy(name="t", route="worker", candidate="cand", alpha=0.01, interval_s=60, max_duration_s=10_000,
                     gate_policy=Path("gate.toml"),
                     steps=[Step(percent=10, min_duration_s=100, min_requests=20),
                            Step(percent=30, min_duration_s=100, min_requests=20)])
GATE = "9" * 64
RUNNING = TrialState(phase="step", step=1, started_at=1000.0, step_started_at=1100.0, step_requests=(3, 4),
                     signals=initial(POLICY).signals)


def stored(state_json: str, phase: str) -> StoredTrial:
    return StoredTrial("t1", "worker", "cand", POLICY, "trial.toml", "8" * 64, GATE, "{}", "now", state_json, phase)


def test_a_valid_state_round_trips() -> None:
    assert decode(encode(RUNNING), POLICY) == RUNNING


@pytest.mark.parametrize(("change", "message"), [
    ({"step": 7}, "step 7 is not one of the policy's 2 steps"),
    ({"started_at": None}, "needs started_at and step_started_at"),
    ({"step_started_at": 10.0}, "its step started before the trial did"),
    ({"phase": "pending"}, "a pending trial has no step"),
    ({"phase": "held", "suspended": True}, "a held trial cannot be suspended"),
    ({"step_requests": [-1, 0]}, "negative request counts"),
    ({"signals": {}}, "are not the policy's"),
    ({"step_exposed": ["slow_requests"]}, "exposure recorded for a signal"),
    ({"format": 2}, "format"),
    ({"started_at": "soon"}, "started_at"),
])
def test_every_way_a_state_can_be_wrong_is_unreadable(change: dict[str, Any], message: str) -> None:
    data = json.loads(encode(RUNNING)) | change
    with pytest.raises(TrialStateUnreadableError, match=message):
        decode(json.dumps(data), POLICY)


def test_counts_that_cannot_be_and_an_infinite_e_process_are_unreadable() -> None:
    data = json.loads(encode(RUNNING))
    data["signals"]["server_errors"]["totals"]["candidate_bad"] = 5  # more bad than exposure (0)
    with pytest.raises(TrialStateUnreadableError, match="more bad than seen"):
        decode(json.dumps(data), POLICY)
    data = json.loads(encode(RUNNING))
    data["signals"]["server_errors"]["log_terms"][0] = float("inf")
    with pytest.raises(TrialStateUnreadableError):
        decode(json.dumps(data), POLICY)


def test_a_row_whose_phase_column_disagrees_with_its_state_is_unreadable() -> None:
    with pytest.raises(TrialStateUnreadableError, match="its row says 'aborted'"):
        stored(encode(RUNNING), "aborted").state()


_values = st.one_of(st.none(), st.booleans(), st.integers(-3, 10), st.integers(-10**20, 10**20),
                    st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=4),
                    st.sampled_from(["step", "awaiting_gate", "pending", "aborted", "promoted"]),
                    st.lists(st.integers(-2, 5), max_size=3), st.just({}))
_paths = st.sampled_from([
    ("format",), ("phase",), ("step",), ("started_at",), ("step_started_at",), ("step_requests",), ("suspended",),
    ("signals",), ("reason",), ("gate_at",), ("step_exposed",), ("signals", "server_errors"),
    ("signals", "server_errors", "events"), ("signals", "server_errors", "log_terms"),
    ("signals", "tool_anomalies", "totals", "control_bad"), ("signals", "tool_anomalies", "totals"),
])
_corruptions = st.lists(st.tuples(_paths, st.one_of(_values, st.just("<delete>"))), min_size=1, max_size=4)
_bases = st.sampled_from([RUNNING, TrialState(phase="awaiting_gate", step=1, started_at=0.0, step_started_at=5.0,
                                              signals=initial(POLICY).signals, gate_at=9.0),
                          initial(POLICY), TrialState(phase="step", started_at=0.0, step_started_at=0.0,
                                                      suspended=True, signals=initial(POLICY).signals)])


def corrupt(state: TrialState, changes: list[tuple[tuple[str, ...], Any]]) -> str:
    data = json.loads(encode(state))
    for path, value in changes:
        node = data
        for key in path[:-1]:
            if not isinstance(node, dict) or key not in node:
                break
            node = node[key]
        else:
            if isinstance(node, dict):
                if value == "<delete>":
                    node.pop(path[-1], None)
                else:
                    node[path[-1]] = copy.deepcopy(value)  # one drawn `{}` set at two paths would nest in itself
    return json.dumps(data)


@settings(max_examples=400, deadline=None)
@given(_bases, _corruptions)
def test_a_corrupted_state_is_unreadable_or_fully_usable(base: TrialState,
                                                         changes: list[tuple[tuple[str, ...], Any]]) -> None:
    text = corrupt(base, changes)
    try:
        state = decode(text, POLICY)
    except TrialStateUnreadableError:
        return
    describe_state(stored(text, state.phase), state)
    tick = Tick((30, 30), {"server_errors": Counts(1, 30, 0, 30), "tool_anomalies": Counts(0, 30, 0, 30)})
    for event in (tick, Suspend(), Resume(), Abort("x")):
        for now in (0.0, 1e5):
            with contextlib.suppress(TrialError):  # a refusal is fine; any other exception is not
                step(POLICY, GATE, state, event, now)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_bases, _corruptions)
def test_recovery_never_fails_on_a_corrupted_state_and_an_unusable_one_gets_weight_zero(
        base: TrialState, changes: list[tuple[tuple[str, ...], Any]]) -> None:
    with tempfile.TemporaryDirectory() as directory:
        path = Path(directory) / "state.sqlite"
        registry, store = Registry(path, ["worker"], "worker-base"), TrialStore(path)
        for name in ("prod", "cand"):
            registry.register(name, AdapterFiles(Path(directory) / name, 8, "base", name))
            registry.set_adapter_state(name, "loaded")
        registry.set_production("worker", "prod")
        registry.set_canary("worker", "cand", 30, "workspace")
        store.create("t1", POLICY, "trial.toml", "8" * 64, GATE, initial(POLICY), "2026-01-01T00:00:00.000Z")
        text = corrupt(base, changes)
        db = sqlite3.connect(path)
        db.execute("UPDATE trials SET state = ?, phase = ?", (text, "step"))
        db.commit()
        db.close()
        controller = Controller(store, registry, None, lambda: 2000.0)
        try:
            usable = decode(text, POLICY).phase == "step"
        except TrialStateUnreadableError:
            usable = False
        controller.recover()
        canary = registry.state.routes["worker"].canary
        if not usable:
            assert canary is None and store.running() == []
        assert registry.state.routes["worker"].production == "prod"
        registry.close()
        store.close()
