"""The trial's state machine: a pure transition function, so every path is testable without a
gateway and a restarted controller continues from exactly the state it persisted.

    pending ─Start→ preflight ─ok→ step 0 → … → step k ─→ awaiting_gate ─verdict→ promoted | held
                       └─fail→ aborted    (any step / awaiting_gate) ─signal passes 1/α'→ aborted
                                          (any step / awaiting_gate) ─max duration→ expired

* Analysis can only abort: a look (`Tick`) adds each signal's new counts to its e-process and
  aborts as soon as an enforced signal reaches 1/α' (α' = α split over enforced signals). It
  never promotes, and a look never advances past the last step — that leads to `awaiting_gate`.
* A step advances only when its minimum duration has passed, both cohorts have had its
  minimum requests within the step, and every enforced signal has had exposure within the step
  (a look that could move its test: both cohorts for a paired signal) — a step never passes on
  a signal that has seen nothing. Too little data waits; at `max_duration_s` (from the first
  step) the trial expires back to control. There is no "inconclusive" state.
* Promotion is only a `GateVerdict` that passed, while awaiting the gate. A verdict binds to one
  candidate (the trial's), one gate policy (the sha256 the trial was started with) and one
  evidence window (the trial's own export: from the trial's start to after it reached the
  gate); anything else is refused, naming the mismatch. A pass needs every condition passed
  (at least one). A failed verdict holds the candidate (weight 0). A verdict that rests on a disputed
  rule (its `tainted_rule_ids`, 004) is refused, pass or fail: it judged nothing the trial can rely on,
  and the trial waits for one judged again.
* Suspend takes the candidate's weight to 0 without ending the trial; resume restarts the
  current step's timer and counts. The maximum duration keeps running while suspended.
* `aborted`, `expired`, `promoted` and `held` are terminal: every later event is ignored.

The function returns the new state and the actions to carry out (the controller's job).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Literal

from core.names import excerpt
from serve.trials.sequential import Batch, EProcess, one_sample, two_sample
from serve.trials.trial_policy import TrialError, TrialPolicy

Phase = Literal["pending", "preflight", "step", "awaiting_gate", "promoted", "held", "aborted", "expired"]
TERMINAL: frozenset[Phase] = frozenset({"promoted", "held", "aborted", "expired"})
RUNNING: frozenset[Phase] = frozenset({"step", "awaiting_gate"})


@dataclass(frozen=True)
class Counts:
    """One signal's new counts since the last look: bad events and exposure per cohort.

    For `shadow_disagreement` only the candidate side is used (disagreements of comparisons).
    """

    candidate_bad: int = 0
    candidate_exposure: int = 0
    control_bad: int = 0
    control_exposure: int = 0

    def __add__(self, other: Counts) -> Counts:
        return Counts(self.candidate_bad + other.candidate_bad, self.candidate_exposure + other.candidate_exposure,
                      self.control_bad + other.control_bad, self.control_exposure + other.control_exposure)


@dataclass(frozen=True)
class SignalState:
    """A signal's evidence so far: its e-process and its running totals (for status and the gate)."""

    process: EProcess = field(default_factory=EProcess)
    totals: Counts = Counts()


@dataclass(frozen=True)
class TrialState:
    phase: Phase = "pending"
    step: int = 0
    started_at: float | None = None  # the first step's start: the maximum duration counts from here
    step_started_at: float | None = None
    step_requests: tuple[int, int] = (0, 0)  # (candidate, control) requests within the current step
    suspended: bool = False
    signals: Mapping[str, SignalState] = field(default_factory=dict)
    reason: str | None = None  # why the trial ended (or what it waits for)
    gate_at: float | None = None  # when it reached the gate: a verdict's evidence must reach this far
    step_exposed: frozenset[str] = frozenset()  # signals with an informative look within the current step


# --- events -------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Start:
    pass


@dataclass(frozen=True)
class PreflightResult:
    ok: bool
    reason: str = ""


@dataclass(frozen=True)
class Tick:
    """One look: requests per cohort and each signal's counts since the previous look."""

    requests: tuple[int, int] = (0, 0)
    signals: Mapping[str, Counts] = field(default_factory=dict)


@dataclass(frozen=True)
class Suspend:
    pass


@dataclass(frozen=True)
class Resume:
    pass


@dataclass(frozen=True)
class Abort:
    reason: str


@dataclass(frozen=True)
class VerdictWindow:
    """The evidence window a verdict was judged on: the trial's export, `since` its start, `until` export time."""

    trial: str
    since: float
    until: float


@dataclass(frozen=True)
class GateVerdict:
    passed: bool
    policy_sha256: str
    candidate: str
    conditions_passed: int
    conditions: int
    window: VerdictWindow | None
    summary: str = ""
    tainted_rule_ids: tuple[str, ...] = ()
    """The disputed rules the judged results carried (the verdict file's `tainted_rule_ids`)."""
    weights: str | None = None
    """The candidate's adapter weights (fingerprint) the verdict was judged on; None: its run did not record them."""


Event = Start | PreflightResult | Tick | Suspend | Resume | Abort | GateVerdict


# --- actions ------------------------------------------------------------------------------------

@dataclass(frozen=True)
class RunPreflight:
    pass


@dataclass(frozen=True)
class SetCanary:
    percent: float


@dataclass(frozen=True)
class StopCanary:
    """Every cohort back to production (production was never unloaded)."""

    reason: str


@dataclass(frozen=True)
class RequestGate:
    pass


@dataclass(frozen=True)
class Promote:
    pass


Action = RunPreflight | SetCanary | StopCanary | RequestGate | Promote


def batch(name: str, policy: TrialPolicy, counts: Counts) -> Batch | None:
    """A look's counts as the sequential test's batch for this signal."""
    if name == "shadow_disagreement":
        shadow = policy.signals.shadow_disagreement
        assert shadow is not None
        return one_sample(counts.candidate_bad, counts.candidate_exposure, shadow.max_rate)
    margin = getattr(policy.signals, name).margin
    return two_sample(counts.candidate_bad, counts.control_bad, counts.candidate_exposure, counts.control_exposure,
                      margin)


def evidence_passed(policy: TrialPolicy, signals: Mapping[str, SignalState]) -> list[str]:
    """Enforced signals whose e-value has reached 1/α', strongest first."""
    threshold = -math.log(policy.alpha_per_signal())
    passed = [(s.process.log_e, n) for n in policy.signals.enforced() if (s := signals.get(n)) is not None
              and s.process.log_e >= threshold]
    return [n for _, n in sorted(passed, reverse=True)]


def initial(policy: TrialPolicy) -> TrialState:
    return TrialState(signals={name: SignalState() for name in policy.signals.active()})


def _end(state: TrialState, phase: Phase, reason: str) -> tuple[TrialState, list[Action]]:
    actions: list[Action] = [StopCanary(reason)] if state.phase in RUNNING else []
    return replace(state, phase=phase, reason=reason, suspended=False), actions


def _look(policy: TrialPolicy, state: TrialState, tick: Tick) -> TrialState:
    signals = dict(state.signals)
    for name, counts in tick.signals.items():
        if name not in signals:
            continue
        current = signals[name]
        signals[name] = SignalState(current.process.update(batch(name, policy, counts)), current.totals + counts)
    requests = (state.step_requests[0] + tick.requests[0], state.step_requests[1] + tick.requests[1])
    exposed = state.step_exposed | _exposed(list(signals), tick.signals)
    return replace(state, signals=signals, step_requests=requests, step_exposed=exposed)


def step(policy: TrialPolicy, policy_gate_sha256: str, state: TrialState, event: Event,
         now: float) -> tuple[TrialState, list[Action]]:
    """The next state and the actions to take, for one event at time `now` (seconds)."""
    if state.phase in TERMINAL:
        return state, []
    match event:
        case Start():
            if state.phase != "pending":
                raise TrialError(f"the trial is {state.phase}, it cannot be started again")
            return replace(state, phase="preflight"), [RunPreflight()]
        case PreflightResult(ok=ok, reason=reason):
            if state.phase != "preflight":
                return state, []
            if not ok:
                return replace(state, phase="aborted", reason=f"preflight: {reason}"), []
            first = policy.steps[0]
            return (replace(state, phase="step", step=0, started_at=now, step_started_at=now, step_requests=(0, 0),
                            step_exposed=frozenset()), [SetCanary(first.percent)])
        case Abort(reason=reason):
            return _end(state, "aborted", f"operator: {reason}")
        case Suspend():
            if state.phase not in RUNNING or state.suspended:
                return state, []
            return replace(state, suspended=True), [StopCanary("suspended")]
        case Resume():
            if state.phase not in RUNNING or not state.suspended:
                return state, []
            return (replace(state, suspended=False, step_started_at=now, step_requests=(0, 0),
                            step_exposed=frozenset()), [SetCanary(policy.steps[state.step].percent)])
        case GateVerdict(passed=passed, summary=summary):
            if state.phase != "awaiting_gate":
                raise TrialError(f"the trial is {state.phase}, not awaiting the gate")
            mismatch = verdict_mismatch(policy, policy_gate_sha256, state, event)
            if mismatch:
                raise TrialError(f"the verdict does not bind to this trial: {mismatch}")
            if event.tainted_rule_ids:
                rules, more = event.tainted_rule_ids[:5], len(event.tainted_rule_ids) - 5
                raise TrialError(f"the verdict rests on results that carried disputed rule(s) "
                                 f"{', '.join(rules)}{f' and {more} more' if more > 0 else ''}: judge again once they "
                                 "are restored after review (`worker-replay undispute`) or on arms re-run without them")
            if passed:
                return replace(state, phase="promoted", reason=f"gate passed: {summary}"), [Promote()]
            return _end(state, "held", f"gate failed: {summary}")
        case Tick():
            if state.phase not in RUNNING:
                return state, []
            return _tick(policy, state, event, now)
    raise AssertionError(f"unknown event {event!r}")


def verdict_mismatch(policy: TrialPolicy, policy_gate_sha256: str, state: TrialState,
                     verdict: GateVerdict) -> str | None:
    """Why a verdict is not this trial's (candidate, gate policy, evidence window, conditions), if it is not."""
    if verdict.candidate != policy.candidate:
        return f"it is for candidate {excerpt(verdict.candidate)}, the trial's candidate is {policy.candidate!r}"
    if verdict.policy_sha256 != policy_gate_sha256:
        return (f"it is for gate policy {excerpt(verdict.policy_sha256[:12])}…, the trial was started with "
                f"{policy_gate_sha256[:12]}…")
    window = verdict.window
    if window is None:
        return "its canary evidence names no evidence window (use the trial's own `trial evidence` export)"
    if window.since != state.started_at:
        return f"its evidence window starts at {window.since!r}, the trial started at {state.started_at!r}"
    if state.gate_at is not None and window.until < state.gate_at:
        return (f"its evidence ends at {window.until!r}, before the trial reached the gate at {state.gate_at!r} "
                "(export the evidence again)")
    if not 0 <= verdict.conditions_passed <= verdict.conditions:
        return f"{verdict.conditions_passed} of {verdict.conditions} conditions passed is not a count"
    if verdict.passed and (verdict.conditions == 0 or verdict.conditions_passed != verdict.conditions):
        return (f"it passes with {verdict.conditions_passed} of {verdict.conditions} conditions passed; "
                "a pass needs every condition (at least one) passed")
    return None


def _exposed(names: Sequence[str], signals: Mapping[str, Counts]) -> frozenset[str]:
    """Signals whose counts in a look could move their test (exposure on the sides they compare)."""
    return frozenset(n for n in names if (c := signals.get(n)) is not None and c.candidate_exposure > 0
                     and (n == "shadow_disagreement" or c.control_exposure > 0))


def _tick(policy: TrialPolicy, state: TrialState, tick: Tick, now: float) -> tuple[TrialState, list[Action]]:
    state = _look(policy, state, tick)
    passed = evidence_passed(policy, state.signals)
    if passed:
        name = passed[0]
        return _end(state, "aborted", f"signal {name}: e = {state.signals[name].process.e_value:.4g} ≥ "
                                      f"1/{policy.alpha_per_signal():.4g}")
    assert state.started_at is not None and state.step_started_at is not None
    if now - state.started_at >= policy.max_duration_s:
        where = "awaiting the gate" if state.phase == "awaiting_gate" else f"in step {state.step + 1}"
        return _end(state, "expired", f"max duration {policy.max_duration_s:g} s reached {where}")
    if state.phase != "step" or state.suspended:
        return state, []
    current = policy.steps[state.step]
    if now - state.step_started_at < current.min_duration_s or min(state.step_requests) < current.min_requests:
        return state, []
    if not set(policy.signals.enforced()) <= state.step_exposed:
        return state, []  # an enforced signal has seen nothing in this step: it has not been tested
    if state.step + 1 == len(policy.steps):
        return (replace(state, phase="awaiting_gate", gate_at=now, reason="awaiting the production-candidate gate"),
                [RequestGate()])
    following = state.step + 1
    return (replace(state, step=following, step_started_at=now, step_requests=(0, 0), step_exposed=frozenset()),
            [SetCanary(policy.steps[following].percent)])


def problems(policy: TrialPolicy, state: TrialState) -> list[str]:
    """Every way a (stored) state cannot be used with its policy; empty when it can.

    The controller runs a trial only from a state this accepts: anything else is unreadable and
    its candidate goes to weight 0.
    """
    found = []
    times = {"started_at": state.started_at, "step_started_at": state.step_started_at, "gate_at": state.gate_at}
    found += [f"{k} is {v!r}, not a finite time" for k, v in times.items() if v is not None and not math.isfinite(v)]
    if not 0 <= state.step < len(policy.steps):
        found.append(f"step {state.step} is not one of the policy's {len(policy.steps)} steps")
    if state.phase in ("pending", "preflight"):
        if state.step != 0 or state.started_at is not None or state.step_started_at is not None or state.suspended:
            found.append(f"a {state.phase} trial has no step, start time or suspension yet")
    elif state.phase in RUNNING or state.started_at is not None or state.step_started_at is not None:
        if state.started_at is None or state.step_started_at is None:
            found.append(f"a trial in {state.phase} needs started_at and step_started_at")
        elif state.step_started_at < state.started_at:
            found.append("its step started before the trial did")
    if state.phase == "awaiting_gate" and state.step != len(policy.steps) - 1:
        found.append("a trial awaiting the gate must be in the last step")
    if state.suspended and state.phase not in RUNNING:
        found.append(f"a {state.phase} trial cannot be suspended")
    if min(state.step_requests) < 0:
        found.append("negative request counts")
    active = policy.signals.active()
    if set(state.signals) != set(active):
        found.append(f"its signals {sorted(state.signals)} are not the policy's {sorted(active)}")
    if not state.step_exposed <= set(active):
        found.append("exposure recorded for a signal the policy does not have")
    for name, signal in state.signals.items():
        totals = signal.totals
        if (min(vars(totals).values()) < 0 or totals.candidate_bad > totals.candidate_exposure
                or totals.control_bad > totals.control_exposure):
            found.append(f"signal {excerpt(name)}: counts that cannot be (negative, or more bad than seen)")
        if not all(math.isfinite(t) for t in signal.process.log_terms) or signal.process.events < 0:
            found.append(f"signal {excerpt(name)}: an e-process that is not finite")
    return found
