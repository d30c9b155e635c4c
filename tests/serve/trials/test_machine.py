"""The trial state machine: advance, wait, abort, expire, suspend, the gate, and (property-based)
that analysis alone can never promote and terminal states stay terminal."""

from __future__ import annotations

import re
from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from serve.trials.machine import (
    TERMINAL,
    Abort,
    Counts,
    Event,
    GateVerdict,
    PreflightResult,
    Promote,
    RequestGate,
    Resume,
    RunPreflight,
    SetCanary,
    Start,
    StopCanary,
    Suspend,
    Tick,
    TrialState,
    VerdictWindow,
    initial,
    step,
)
from serve.trials.trial_policy import ShadowSignal, Signals, Step, TrialError, TrialPolicy

GATE = "a" * 64
POLICY = TrialPolicy(
    name="t", route="worker", candidate="c1", alpha=0.01, interval_s=10, max_duration_s=1000,
    gate_policy="gate.toml",  # type: ignore[arg-type]
    steps=[Step(percent=5, min_duration_s=100, min_requests=10), Step(percent=20, min_duration_s=100, min_requests=10)],
    signals=Signals(shadow_disagreement=ShadowSignal(enforced=False, max_rate=0.1)))


def run(events: list[tuple[float, Event]], state: TrialState | None = None) -> tuple[TrialState, list[object]]:
    state = state or initial(POLICY)
    actions: list[object] = []
    for at, event in events:
        state, new = step(POLICY, GATE, state, event, at)
        actions.extend(new)
    return state, actions


def started() -> TrialState:
    state, actions = run([(0, Start()), (0, PreflightResult(True))])
    assert actions == [RunPreflight(), SetCanary(5)]
    assert state.phase == "step" and state.step == 0 and state.started_at == 0
    return state


SEEN = {"server_errors": Counts(0, 5, 0, 5), "tool_anomalies": Counts(0, 5, 0, 5)}
QUIET = Tick((5, 5), SEEN)


def verdict(passed: bool = True, sha: str = GATE, candidate: str = "c1", conditions: tuple[int, int] = (6, 6),
            since: float = 0, until: float = 1000, summary: str = "6/6") -> GateVerdict:
    return GateVerdict(passed, sha, candidate, conditions[0], conditions[1], VerdictWindow("t1", since, until), summary)


def test_a_healthy_trial_steps_through_to_the_gate_and_only_the_gate_promotes() -> None:
    state, actions = run([(50, QUIET), (100, QUIET)], started())
    assert state.phase == "step" and state.step == 1 and actions == [SetCanary(20)]
    state, actions = run([(150, QUIET), (200, QUIET)], state)
    assert state.phase == "awaiting_gate" and actions == [RequestGate()]
    state, actions = run([(250, QUIET)] * 3, state)  # analysis keeps running, never promotes
    assert state.phase == "awaiting_gate" and actions == []
    state, actions = run([(300, verdict())], state)
    assert state.phase == "promoted" and actions == [Promote()]


def test_a_step_waits_for_its_duration_and_for_requests_in_both_cohorts() -> None:
    state, actions = run([(10, Tick((100, 100), SEEN))], started())
    assert state.step == 0 and actions == []  # requests met, duration not
    state, actions = run([(500, Tick((0, 100), SEEN))], run([(0, Start()), (0, PreflightResult(True))])[0])
    assert state.step == 0 and state.step_requests == (0, 100) and actions == []  # candidate cohort short
    state, actions = run([(510, Tick((10, 0)))], state)
    assert state.step == 1 and state.step_requests == (0, 0) and state.step_started_at == 510


def test_an_enforced_signal_aborts_at_once_and_routes_back_to_production() -> None:
    state, actions = run([(20, Tick((50, 50), {"server_errors": Counts(30, 50, 2, 50)}))], started())
    assert state.phase == "aborted" and state.reason is not None and state.reason.startswith("signal server_errors")
    assert actions == [StopCanary(state.reason)]
    assert state.signals["server_errors"].totals == Counts(30, 50, 2, 50)


def test_an_observed_only_signal_is_recorded_but_never_aborts() -> None:
    state, actions = run([(20, Tick((50, 50), {"shadow_disagreement": Counts(50, 50)}))], started())
    assert state.phase == "step" and actions == []
    assert state.signals["shadow_disagreement"].process.log_e > 10


def test_too_little_data_waits_then_expires_back_to_control() -> None:
    state, actions = run([(t, Tick((1, 0))) for t in range(0, 1000, 100)], started())
    assert state.phase == "step" and actions == []
    state, actions = run([(1000, Tick())], state)
    assert state.phase == "expired" and actions == [StopCanary(state.reason or "")]
    assert state.reason == "max duration 1000 s reached in step 1"


def test_awaiting_the_gate_also_expires_and_a_failed_gate_holds() -> None:
    state, _ = run([(100, QUIET), (100, QUIET), (200, QUIET), (200, QUIET)], started())
    assert state.phase == "awaiting_gate"
    expired, actions = run([(1000, Tick())], state)
    assert expired.phase == "expired" and isinstance(actions[0], StopCanary)
    held, actions = run([(300, verdict(False, conditions=(5, 6), summary="canary-no-regression failed"))], state)
    assert held.phase == "held" and actions == [StopCanary("gate failed: canary-no-regression failed")]


def test_a_verdict_must_be_for_the_registered_gate_policy_and_come_while_awaiting_it() -> None:
    state, _ = run([(100, QUIET), (100, QUIET), (200, QUIET), (200, QUIET)], started())
    with pytest.raises(TrialError, match="gate policy"):
        step(POLICY, GATE, state, verdict(sha="b" * 64), 300)
    with pytest.raises(TrialError, match="not awaiting the gate"):
        step(POLICY, GATE, started(), verdict(), 300)
    with pytest.raises(TrialError, match="cannot be started again"):
        step(POLICY, GATE, started(), Start(), 300)


def test_a_failed_preflight_aborts_without_routing_anything() -> None:
    state, actions = run([(0, Start()), (1, PreflightResult(False, "candidate 'c1' is not loaded"))])
    assert state.phase == "aborted" and state.reason == "preflight: candidate 'c1' is not loaded"
    assert actions == [RunPreflight()]


def test_suspend_takes_the_weight_to_zero_and_resume_restarts_the_step() -> None:
    state, actions = run([(50, QUIET), (60, Suspend()), (200, QUIET), (200, QUIET)], started())
    assert state.suspended and state.step == 0 and actions == [StopCanary("suspended")]
    state, actions = run([(300, Resume())], state)
    assert not state.suspended and state.step_started_at == 300 and actions == [SetCanary(5)]
    state, actions = run([(350, Abort("bad smell"))], state)
    assert state.phase == "aborted" and actions == [StopCanary("operator: bad smell")]


side = st.integers(0, 60).flatmap(lambda n: st.tuples(st.integers(0, n), st.just(n)))  # (bad, exposure)
counts = st.builds(lambda c, k: Counts(c[0], c[1], k[0], k[1]), side, side)
events = st.one_of(
    st.just(Start()), st.builds(PreflightResult, st.booleans()), st.just(Suspend()), st.just(Resume()),
    st.builds(Abort, st.just("x")),
    st.builds(verdict, st.booleans(), st.sampled_from([GATE, "b" * 64]), st.sampled_from(["c1", "c2"]),
              st.sampled_from([(6, 6), (0, 0), (5, 6)]), st.sampled_from([0.0, 7.0])),
    st.builds(Tick, st.tuples(st.integers(0, 30), st.integers(0, 30)),
              st.dictionaries(st.sampled_from(["server_errors", "tool_anomalies", "shadow_disagreement"]), counts)))


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.floats(0, 200), events), max_size=40))
def test_no_sequence_of_events_promotes_without_a_passing_verdict_or_leaves_a_terminal_state(
        script: list[tuple[float, Event]]) -> None:
    state, now = initial(POLICY), 0.0
    for delta, event in script:
        now += delta
        before = state
        try:
            state, actions = step(POLICY, GATE, state, event, now)
        except TrialError:
            assert isinstance(event, (Start, GateVerdict))
            continue
        if before.phase in TERMINAL:
            assert state == before and actions == []
        if Promote() in actions:
            assert before.phase == "awaiting_gate" and isinstance(event, GateVerdict) and event.passed
            assert (event.candidate, event.policy_sha256, event.conditions_passed) == ("c1", GATE, event.conditions)
            assert event.conditions > 0 and event.window is not None and event.window.since == before.started_at
        if isinstance(event, Tick):
            assert state.phase in {"step", "awaiting_gate", "aborted", "expired"} or state == before
        for action in actions:
            if isinstance(action, SetCanary):
                assert action.percent in (5, 20) and state.phase == "step" and not state.suspended
        if state.phase in {"aborted", "expired", "held"} and before.phase in {"step", "awaiting_gate"}:
            assert any(isinstance(a, StopCanary) for a in actions)


def at_gate() -> TrialState:
    state, _ = run([(100, QUIET), (100, QUIET), (200, QUIET), (200, QUIET)], started())
    assert state.phase == "awaiting_gate" and state.gate_at == 200
    return state


@pytest.mark.parametrize(("bad", "message"), [
    (verdict(candidate="other-adapter"), "it is for candidate 'other-adapter', the trial's candidate is 'c1'"),
    (verdict(sha="b" * 64), "it is for gate policy 'bbbbbbbbbbbb'"),
    (verdict(conditions=(0, 0)), "passes with 0 of 0 conditions passed"),
    (verdict(conditions=(5, 6)), "passes with 5 of 6 conditions passed"),
    (verdict(since=7), "its evidence window starts at 7, the trial started at 0"),
    (verdict(until=150), "before the trial reached the gate at 200"),
    (GateVerdict(True, GATE, "c1", 6, 6, None, "6/6"), "names no evidence window"),
])
def test_a_verdict_binds_to_one_candidate_one_policy_one_window_and_every_condition(bad: GateVerdict,
                                                                                    message: str) -> None:
    state = at_gate()
    with pytest.raises(TrialError, match=re.escape(message)):
        step(POLICY, GATE, state, bad, 300)
    assert step(POLICY, GATE, state, verdict(), 300)[0].phase == "promoted"


@pytest.mark.parametrize("passed", [True, False])
def test_a_verdict_resting_on_a_disputed_rule_is_refused_and_the_trial_keeps_waiting(passed: bool) -> None:
    """Pass or fail, a verdict judged on results that carried a disputed rule decides nothing (004)."""
    state = at_gate()
    with pytest.raises(TrialError, match=re.escape("rests on results that carried disputed rule(s) lc:a, lc:b")):
        step(POLICY, GATE, state, replace(verdict(passed), tainted_rule_ids=("lc:a", "lc:b")), 300)
    assert step(POLICY, GATE, state, verdict(passed), 300)[0].phase == ("promoted" if passed else "held")


def test_a_step_never_advances_while_an_enforced_signal_has_seen_nothing_in_it() -> None:
    only_errors = Tick((50, 50), {"server_errors": Counts(0, 50, 0, 50), "tool_anomalies": Counts(0, 0, 0, 40)})
    state, actions = run([(t, only_errors) for t in (100, 200, 300)], started())
    assert state.step == 0 and actions == []  # tool_anomalies: no candidate exposure yet
    state, actions = run([(400, QUIET)], state)
    assert state.step == 1 and actions == [SetCanary(20)] and state.step_exposed == frozenset()
