"""The trial machine where it decides: the per-signal level α/k where it binds (an e-value between 1/α
and k/α), the abort threshold at exactly 1/α', what counts as exposure, and what Resume resets."""

from __future__ import annotations

import math
import re
from dataclasses import replace

import pytest

from serve.trials.machine import (
    Abort,
    Counts,
    Event,
    GateVerdict,
    PreflightResult,
    Promote,
    RequestGate,
    Resume,
    SetCanary,
    SignalState,
    Start,
    StopCanary,
    Suspend,
    Tick,
    TrialState,
    VerdictWindow,
    evidence_passed,
    initial,
    problems,
    step,
)
from serve.trials.sequential import EProcess, Mixture, bonferroni, two_sample
from serve.trials.trial_policy import ShadowSignal, Signal, Signals, SlowSignal, Step, TrialError, TrialPolicy

GATE = "a" * 64
ALPHA = 0.01
THREE = TrialPolicy(
    name="t", route="worker", candidate="c1", alpha=ALPHA, interval_s=10, max_duration_s=10_000,
    gate_policy="gate.toml",  # type: ignore[arg-type]
    steps=[Step(percent=5, min_duration_s=100, min_requests=10), Step(percent=20, min_duration_s=100, min_requests=10)],
    signals=Signals(slow_requests=SlowSignal(threshold_s=5.0),
                    shadow_disagreement=ShadowSignal(enforced=False, max_rate=0.1)))
ENFORCED = ("server_errors", "tool_anomalies", "slow_requests")


def reference_e(bad: int, total: int) -> float:
    """The default mixture's e-value of one batch at p0 = ½, summed term by term in plain floats."""
    mixture = EProcess().mixture
    return sum(math.exp(w) * (2 * math.exp(r) / (math.exp(r) + 1)) ** bad * (2 / (math.exp(r) + 1)) ** (total - bad)
               for r, w in zip(mixture.log_ratios, mixture.log_weights, strict=True))


def run(policy: TrialPolicy, events: list[tuple[float, Event]], state: TrialState | None = None
        ) -> tuple[TrialState, list[object]]:
    state = state or initial(policy)
    actions: list[object] = []
    for at, event in events:
        state, new = step(policy, GATE, state, event, at)
        actions.extend(new)
    return state, actions


def started(policy: TrialPolicy = THREE) -> TrialState:
    return run(policy, [(0, Start()), (0, PreflightResult(True))])[0]


def quiet(requests: int = 5) -> Tick:
    return Tick((requests, requests), {n: Counts(0, requests, 0, requests) for n in ENFORCED})


def test_three_enforced_signals_each_test_at_alpha_over_three() -> None:
    assert THREE.signals.enforced() == list(ENFORCED)
    assert THREE.alpha_per_signal() == bonferroni(ALPHA, 3) == ALPHA / 3


@pytest.mark.parametrize("bad, aborts", [(14, False), (15, False), (16, True)])
def test_an_e_value_between_one_over_alpha_and_k_over_alpha_does_not_abort(bad: int, aborts: bool) -> None:
    """14 or 15 candidate errors against 0 (equal exposure) give e ≈ 140 and 223: past 1/α = 100, short of
    k/α = 300, so with three enforced signals the trial goes on; 16 (e ≈ 357) aborts."""
    e = reference_e(bad, bad)
    assert (1 / ALPHA < e < 3 / ALPHA) is not aborts and (e >= 3 / ALPHA) is aborts
    tick = Tick((100, 100), {"server_errors": Counts(bad, 100, 0, 100)})
    state, actions = run(THREE, [(10, tick)], started())
    assert state.signals["server_errors"].process.e_value == pytest.approx(e, rel=1e-9)
    if aborts:
        assert state.phase == "aborted" and state.reason is not None and state.reason.startswith("signal server_errors")
        assert isinstance(actions[0], StopCanary)
    else:
        assert state.phase == "step" and actions == []


def test_with_one_enforced_signal_the_same_evidence_aborts() -> None:
    one = THREE.model_copy(update={"signals": Signals(tool_anomalies=Signal(enforced=False))})
    assert one.signals.enforced() == ["server_errors"] and one.alpha_per_signal() == ALPHA
    state, _ = run(one, [(10, Tick((100, 100), {"server_errors": Counts(14, 100, 0, 100)}))], started(one))
    assert state.phase == "aborted"


def flat(log_e: float) -> SignalState:
    """A signal whose e-process has log e-value exactly `log_e` (one alternative, weight 1)."""
    return SignalState(EProcess(Mixture((0.5,), (0.0,)), (log_e,)))


def test_evidence_passes_at_exactly_one_over_alpha_prime_and_not_one_ulp_below() -> None:
    threshold = -math.log(THREE.alpha_per_signal())
    at = {"server_errors": flat(threshold), "tool_anomalies": flat(0.0), "slow_requests": flat(0.0)}
    assert evidence_passed(THREE, at) == ["server_errors"]
    below = {**at, "server_errors": flat(math.nextafter(threshold, 0))}
    assert evidence_passed(THREE, below) == []
    assert EProcess(Mixture((0.5,), (0.0,)), (-math.log(0.05),)).rejects(0.05)
    assert not EProcess(Mixture((0.5,), (0.0,)), (math.nextafter(-math.log(0.05), 0),)).rejects(0.05)


def test_evidence_names_the_strongest_signal_first_and_ignores_observed_only_ones() -> None:
    signals = {"server_errors": flat(7.0), "tool_anomalies": flat(9.0), "slow_requests": flat(8.0),
               "shadow_disagreement": flat(50.0)}
    assert evidence_passed(THREE, signals) == ["tool_anomalies", "slow_requests", "server_errors"]


def test_a_paired_signal_with_no_control_exposure_is_not_exposed() -> None:
    lopsided = Tick((5, 5), {"server_errors": Counts(0, 5, 0, 0), "tool_anomalies": Counts(0, 0, 0, 5),
                             "slow_requests": Counts(0, 5, 0, 5), "shadow_disagreement": Counts(0, 5, 0, 0)})
    state, _ = run(THREE, [(10, lopsided)], started())
    assert state.step_exposed == frozenset({"slow_requests", "shadow_disagreement"})
    # and nothing moved the e-processes of the one-sided paired signals
    assert state.signals["server_errors"].process.events == 0
    assert state.signals["server_errors"].totals == Counts(0, 5, 0, 0)


def test_a_step_with_a_paired_signal_seen_by_one_cohort_only_waits() -> None:
    lopsided = Tick((20, 20), {"server_errors": Counts(0, 20, 0, 0), "tool_anomalies": Counts(0, 20, 0, 20),
                               "slow_requests": Counts(0, 20, 0, 20)})
    state, actions = run(THREE, [(50, lopsided), (150, lopsided)], started())
    assert state.step == 0 and actions == []
    state, actions = run(THREE, [(160, quiet(1))], state)
    assert state.step == 1 and actions == [SetCanary(20)]


def test_resume_resets_the_steps_request_count_and_exposure() -> None:
    state, _ = run(THREE, [(50, quiet(10)), (60, Suspend())], started())
    assert state.step_requests == (10, 10) and state.step_exposed == frozenset(ENFORCED)
    state, actions = run(THREE, [(70, Resume())], state)
    assert state.step_requests == (0, 0) and state.step_exposed == frozenset() and state.step_started_at == 70
    assert actions == [SetCanary(5)]
    # a full step's time after resuming, with fewer than min_requests since: it waits
    state, actions = run(THREE, [(200, quiet(9))], state)
    assert state.step == 0 and state.step_requests == (9, 9) and actions == []
    state, actions = run(THREE, [(210, quiet(1))], state)
    assert state.step == 1 and actions == [SetCanary(20)]


@pytest.mark.parametrize("requests, duration, advances", [
    ((10, 10), 100, True), ((9, 10), 100, False), ((10, 9), 100, False), ((10, 10), math.nextafter(100, 0), False),
])
def test_a_step_advances_at_exactly_its_minimum_duration_and_requests(requests: tuple[int, int], duration: float,
                                                                      advances: bool) -> None:
    tick = Tick(requests, {n: Counts(0, 5, 0, 5) for n in ENFORCED})
    state, actions = run(THREE, [(duration, tick)], started())
    assert (state.step == 1) is advances and (actions == [SetCanary(20)]) is advances


def test_the_last_step_leads_to_the_gate_and_max_duration_expires_at_exactly_its_value() -> None:
    state, actions = run(THREE, [(100, quiet(10)), (200, quiet(10))], started())
    assert state.phase == "awaiting_gate" and state.gate_at == 200 and actions[-1] == RequestGate()
    state, _ = run(THREE, [(math.nextafter(10_000, 0), quiet())], state)
    assert state.phase == "awaiting_gate"
    state, actions = run(THREE, [(10_000, quiet())], state)
    assert state.phase == "expired" and state.reason == "max duration 10000 s reached awaiting the gate"
    assert actions == [StopCanary(state.reason)]


def test_every_state_the_machine_reaches_is_usable() -> None:
    state = initial(THREE)
    assert problems(THREE, state) == []
    for at, event in [(0, Start()), (0, PreflightResult(True)), (50, quiet(10)), (60, Suspend()), (70, Resume()),
                      (200, quiet(10)), (300, quiet(10))]:
        state, _ = step(THREE, GATE, state, event, at)
        assert problems(THREE, state) == [], (event, state)


def running() -> TrialState:
    return run(THREE, [(10, quiet(3))], started())[0]


@pytest.mark.parametrize("change, message", [
    ({"started_at": math.inf}, "started_at is inf, not a finite time"),
    ({"step_started_at": math.nan}, "step_started_at is nan, not a finite time"),
    ({"gate_at": -math.inf}, "gate_at is -inf, not a finite time"),
    ({"step": 2}, "step 2 is not one of the policy's 2 steps"),
    ({"step": -1}, "step -1 is not one of the policy's 2 steps"),
    ({"step_started_at": None}, "a trial in step needs started_at and step_started_at"),
    ({"started_at": None}, "a trial in step needs started_at and step_started_at"),
    ({"started_at": 5.0, "step_started_at": math.nextafter(5.0, 0)}, "its step started before the trial did"),
    ({"phase": "awaiting_gate", "step": 0}, "a trial awaiting the gate must be in the last step"),
    ({"step_requests": (-1, 0)}, "negative request counts"),
    ({"step_requests": (0, -1)}, "negative request counts"),
    ({"step_exposed": frozenset({"nonsense"})}, "exposure recorded for a signal the policy does not have"),
])
def test_a_running_state_that_cannot_be_is_refused(change: dict[str, object], message: str) -> None:
    state = replace(running(), **change)  # type: ignore[arg-type]
    assert message in problems(THREE, state)


def test_a_step_that_starts_with_the_trial_is_fine() -> None:
    assert problems(THREE, replace(running(), started_at=5.0, step_started_at=5.0)) == []
    assert problems(THREE, replace(running(), phase="awaiting_gate", step=1, gate_at=20.0)) == []


@pytest.mark.parametrize("phase", ["pending", "preflight"])
@pytest.mark.parametrize("change", [{"step": 1}, {"started_at": 0.0}, {"step_started_at": 0.0}, {"suspended": True}])
def test_a_trial_not_started_has_no_step_time_or_suspension(phase: str, change: dict[str, object]) -> None:
    state = replace(initial(THREE), phase=phase, **change)  # type: ignore[arg-type]
    assert f"a {phase} trial has no step, start time or suspension yet" in problems(THREE, state)
    assert problems(THREE, replace(initial(THREE), phase=phase)) == []  # type: ignore[arg-type]


def test_an_ended_trial_keeps_its_times_but_cannot_be_suspended() -> None:
    ended = replace(running(), phase="aborted")
    assert problems(THREE, ended) == []
    assert problems(THREE, replace(ended, started_at=None)) == ["a trial in aborted needs started_at and step_started_at"]
    assert "a held trial cannot be suspended" in problems(THREE, replace(ended, phase="held", suspended=True))
    assert problems(THREE, replace(initial(THREE), phase="aborted")) == []


def test_signals_must_be_the_policys_with_counts_that_can_be() -> None:
    state = running()
    fewer = {k: v for k, v in state.signals.items() if k != "slow_requests"}
    assert any(p.startswith("its signals") for p in problems(THREE, replace(state, signals=fewer)))
    for totals in (Counts(-1, 0, 0, 0), Counts(0, 0, 0, -1), Counts(2, 1, 0, 0), Counts(0, 0, 3, 2)):
        broken = {**state.signals, "server_errors": SignalState(totals=totals)}
        assert problems(THREE, replace(state, signals=broken)) == [
            "signal 'server_errors': counts that cannot be (negative, or more bad than seen)"]
    edge = {**state.signals, "server_errors": SignalState(totals=Counts(2, 2, 0, 0))}
    assert problems(THREE, replace(state, signals=edge)) == []
    mixture = EProcess().mixture
    for process in (EProcess(mixture, tuple([math.inf] * 64)), EProcess(mixture, tuple([0.0] * 63 + [math.nan])),
                    EProcess(mixture, events=-1)):
        bad = {**state.signals, "server_errors": SignalState(process)}
        assert problems(THREE, replace(state, signals=bad)) == ["signal 'server_errors': an e-process that is not finite"]


# ── transitions at their edges ───────────────────────────────────────────────

def at_gate_from(start: float) -> TrialState:
    state = run(THREE, [(start, Start()), (start, PreflightResult(True))])[0]
    state, actions = run(THREE, [(start + 100, quiet(10)), (start + 200, quiet(10))], state)
    assert state.phase == "awaiting_gate" and actions[-1] == RequestGate()
    assert state.reason == "awaiting the production-candidate gate" and state.gate_at == start + 200
    return state


def gate_verdict(passed: bool = True, until: float = 10_000.0, conditions: tuple[int, int] = (3, 3),
                 since: float = 1000.0) -> GateVerdict:
    return GateVerdict(passed, GATE, "c1", conditions[0], conditions[1], VerdictWindow("t", since, until), "3/3")


def test_durations_count_from_a_start_that_is_not_zero() -> None:
    """Started at t = 1000: a step's minimum duration and the maximum duration count from there."""
    state = run(THREE, [(1000, Start()), (1000, PreflightResult(True))])[0]
    state, actions = run(THREE, [(1099, quiet(10))], state)
    assert state.step == 0 and actions == []
    state, actions = run(THREE, [(1100, quiet(1))], state)
    assert state.step == 1
    state, _ = run(THREE, [(math.nextafter(11_000, 0), quiet())], state)
    assert state.phase == "step"
    state, _ = run(THREE, [(11_000, quiet())], state)
    assert state.phase == "expired" and state.reason == "max duration 10000 s reached in step 2"


def test_a_verdict_window_must_reach_the_gate_and_a_pass_names_its_summary() -> None:
    state = at_gate_from(1000)
    with pytest.raises(TrialError, match=re.escape("before the trial reached the gate at 1200 (export the evidence again)")):
        step(THREE, GATE, state, gate_verdict(until=math.nextafter(1200, 0)), 1300)
    with pytest.raises(TrialError, match=re.escape("a pass needs every condition (at least one) passed") + "$"):
        step(THREE, GATE, state, gate_verdict(conditions=(2, 3)), 1300)
    with pytest.raises(TrialError, match=re.escape(f"gate policy {GATE[:12]!r}…, the trial was started with {'b' * 12}…")):
        step(THREE, "b" * 64, state, gate_verdict(), 1300)
    with pytest.raises(TrialError, match=re.escape(
            "its canary evidence names no evidence window (use the trial's own `trial evidence` export)") + "$"):
        step(THREE, GATE, state, GateVerdict(True, GATE, "c1", 3, 3, None), 1300)
    promoted, actions = step(THREE, GATE, state, gate_verdict(until=1200), 1300)  # evidence exactly to the gate
    assert promoted.phase == "promoted" and promoted.reason == "gate passed: 3/3" and actions == [Promote()]
    held, actions = step(THREE, GATE, state, gate_verdict(passed=False, conditions=(2, 3)), 1300)
    assert held.phase == "held" and held.reason == "gate failed: 3/3" and actions == [StopCanary("gate failed: 3/3")]


def test_suspend_and_resume_only_where_they_mean_something() -> None:
    pending = initial(THREE)
    assert step(THREE, GATE, pending, Suspend(), 0) == (pending, [])
    assert step(THREE, GATE, pending, Resume(), 0) == (pending, [])
    running = run(THREE, [(10, quiet(4))], started())[0]
    assert step(THREE, GATE, running, Resume(), 20) == (running, [])  # not suspended: counts stay
    suspended, actions = step(THREE, GATE, running, Suspend(), 20)
    assert suspended.suspended is True and actions == [StopCanary("suspended")]
    assert step(THREE, GATE, suspended, Suspend(), 30) == (suspended, [])
    resumed, _ = step(THREE, GATE, suspended, Resume(), 40)
    assert resumed.suspended is False


def test_ending_a_suspended_trial_clears_the_suspension_and_ending_one_not_running_stops_nothing() -> None:
    suspended = run(THREE, [(10, Suspend())], started())[0]
    ended, actions = step(THREE, GATE, suspended, Abort("enough"), 20)
    assert ended.phase == "aborted" and ended.suspended is False and actions == [StopCanary("operator: enough")]
    never, actions = step(THREE, GATE, initial(THREE), Abort("no"), 0)
    assert never.phase == "aborted" and never.reason == "operator: no" and actions == []


def test_a_look_counts_each_cohort_and_skips_signals_the_policy_lacks() -> None:
    tick = Tick((3, 7), {"bogus": Counts(1, 1, 1, 1), "server_errors": Counts(1, 4, 0, 6)})
    state = run(THREE, [(10, tick), (20, tick)], started())[0]
    assert state.step_requests == (6, 14)
    assert state.signals["server_errors"].totals == Counts(2, 8, 0, 12) and "bogus" not in state.signals


def test_a_signals_margin_reaches_its_test() -> None:
    margin = THREE.model_copy(update={"signals": Signals(server_errors=Signal(margin=0.5))})
    state = run(margin, [(10, Tick((5, 5), {"server_errors": Counts(6, 50, 1, 50)}))], started(margin))[0]
    expected = EProcess().update(two_sample(6, 1, 50, 50, margin=0.5))
    assert state.signals["server_errors"].process == expected
    assert expected != EProcess().update(two_sample(6, 1, 50, 50))


def test_state_checks_at_their_edges() -> None:
    state = running()
    assert "a trial in step needs started_at and step_started_at" in problems(
        THREE, replace(state, started_at=None, step_started_at=None))
    everything = Tick((5, 5), {n: Counts(0, 5, 0, 5) for n in (*ENFORCED, "shadow_disagreement")})
    exposed = run(THREE, [(10, everything)], started())[0]
    assert exposed.step_exposed == frozenset(THREE.signals.active()) and problems(THREE, exposed) == []
