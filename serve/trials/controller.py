"""Drives trials: feeds events to the state machine, persists every transition, and carries out
its actions on the registry (the canary's weight, production).

Order matters for a gateway killed at any point:

* every transition is written (state + journal line, one transaction) *before* its actions
  are carried out: a crash after an abort's write still comes back aborted, and `recover`
  finishes routing every cohort to production;
* promotion is the one exception — production is switched first, then `promoted` written — so
  a crash between the two leaves `awaiting_gate` with the candidate already production, which
  `recover` records as the promotion that happened. A restart never promotes by itself;
* `recover` (at start-up) puts the routing back to what each running trial's state says (the
  same step, its weight, its timer and evidence as stored) and, for a trial whose state cannot
  be used (`store.decode`) or whose route is no longer configured, takes the candidate's weight
  to 0. It finishes routing back an ended trial only for a canary the trial itself left: one an
  operator started after the trial ended is the operator's later decision, and stays.

A start that cannot happen (the preflight fails, no enforced signal can be observed) creates
nothing: the name stays free and no abort is counted. A signal this gateway cannot observe
(`tool_anomalies` without capture) is left out of the trial, so it takes no share of α; the
journal's `Created` line says which.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path

from pydantic import Field, NonNegativeInt, ValidationError

from core.names import excerpt
from core.records import Strict
from serve.gateway.registry import Registry, now
from serve.trials.machine import (
    TERMINAL,
    Action,
    Counts,
    Event,
    GateVerdict,
    PreflightResult,
    Promote,
    RequestGate,
    RunPreflight,
    SetCanary,
    Start,
    StopCanary,
    Tick,
    TrialState,
    initial,
    step,
)
from serve.trials.signals import StepCounts, StepWindow, read_step
from serve.trials.store import (
    CountsRecord,
    StoredTrial,
    TrialStateUnreadableError,
    TrialStore,
    evidence,
)
from serve.trials.trial_policy import LoadedPolicy, SignalName, TrialError, TrialPolicy


class SeenRecord(Strict):
    """What the controller had counted of one step at its last look."""

    step: int
    step_started_at: float = Field(allow_inf_nan=False)
    requests: tuple[NonNegativeInt, NonNegativeInt]
    signals: dict[str, CountsRecord]


def _seen(stored: StoredTrial, state: TrialState) -> StepCounts | None:
    try:
        record = SeenRecord.model_validate_json(stored.seen)
    except ValidationError:
        return None  # nothing counted yet (or a format it cannot use): count the step afresh
    if record.step != state.step or record.step_started_at != state.step_started_at:
        return None
    return StepCounts(record.requests, {n: Counts(**c.model_dump()) for n, c in record.signals.items()})


def _seen_json(state: TrialState, counts: StepCounts) -> str:
    assert state.step_started_at is not None
    return SeenRecord(step=state.step, step_started_at=state.step_started_at, requests=counts.requests,
                      signals={n: CountsRecord(**vars(c)) for n, c in counts.signals.items()}).model_dump_json()


class PreflightFailedError(TrialError):
    """A start refused before anything was created: the candidate or the route is not ready."""


@dataclass
class Controller:
    store: TrialStore
    registry: Registry
    capture_db: Path | None = None
    clock: Callable[[], float] = field(default=time.time)

    def unobservable(self, policy: TrialPolicy) -> dict[SignalName, str]:
        """Signals of the policy this gateway cannot gather evidence for, and why."""
        if policy.signals.tool_anomalies is not None and self.capture_db is None:
            return {"tool_anomalies": "capture is off (or samples nothing): no tool results are observed"}
        return {}

    def start(self, trial_id: str, loaded: LoadedPolicy) -> TrialState:
        """Create the trial, run its preflight and, if it passes, put the candidate on the first step.

        Refused (`TrialError`, nothing created) when the preflight fails now or no enforced signal
        can be observed."""
        left_out = self.unobservable(loaded.policy)
        policy = loaded.policy.model_copy(update={"signals": loaded.policy.signals.without(list(left_out))})
        if not policy.signals.enforced():
            raise TrialError("no enforced signal can gather evidence on this gateway, so the trial could never "
                             f"abort ({'; '.join(f'{k}: {v}' for k, v in left_out.items())})")
        check = self.preflight(policy.route, policy.candidate)
        if not check.ok:
            raise PreflightFailedError(f"preflight: {check.reason}; no trial was started")
        self.store.create(trial_id, policy, str(loaded.path), loaded.sha256, loaded.gate_policy_sha256,
                          initial(policy), now(), {"left_out": dict(left_out)} if left_out else {})
        return self.handle(trial_id, Start())

    def handle(self, trial_id: str, event: Event, seen: str | None = None) -> TrialState:
        stored = self.store.get(trial_id)
        before = stored.state()
        if before.phase in TERMINAL:
            return before  # nothing changes, and nothing is written: its end time stays when it ended
        if isinstance(event, GateVerdict) and event.window is not None and event.window.trial != trial_id:
            raise TrialError(f"the verdict does not bind to this trial: its evidence is trial "
                             f"{excerpt(event.window.trial)}'s, not {trial_id!r}'s")
        if isinstance(event, GateVerdict) and event.weights is not None:
            registered = self.registry.state.adapters.get(stored.candidate)
            if registered is None or registered.fingerprint != event.weights:
                have = "is not registered" if registered is None else f"has weights {registered.fingerprint[:12]}…"
                raise TrialError(f"the verdict does not bind to this trial: it judged weights {event.weights[:12]}…, "
                                 f"the trial's candidate {stored.candidate!r} {have}")
        after, actions = step(stored.policy, stored.gate_policy_sha256, before, event, self.clock())
        if Promote() in actions:
            self._apply(stored, after, Promote())
            self.store.record(trial_id, now(), event, before, after, actions, seen)
            return after
        self.store.record(trial_id, now(), event, before, after, actions, seen)
        for action in actions:
            if isinstance(action, RunPreflight):
                return self.handle(trial_id, self.preflight(stored.route, stored.candidate))
            self._apply(stored, after, action)
        return after

    def preflight(self, route_name: str, candidate: str) -> PreflightResult:
        """The candidate is loaded, production can take traffic back, and no other canary runs."""
        state = self.registry.state
        route = state.routes.get(route_name)
        if route is None:
            return PreflightResult(False, f"the gateway has no route {route_name!r}")
        adapter = state.adapters.get(candidate)
        if adapter is None:
            return PreflightResult(False, f"candidate {candidate!r} is not a registered adapter")
        if adapter.state != "loaded":
            return PreflightResult(False, f"candidate {candidate!r} is not a loaded adapter")
        if route.production == candidate:
            return PreflightResult(False, f"candidate {candidate!r} is production already")
        if route.production != state.base and route.production not in {a.name for a in state.loaded()}:
            return PreflightResult(False, f"production {route.production!r} is not loaded")
        if route.canary is not None and route.canary.candidate != candidate:
            return PreflightResult(False, f"route {route_name!r} runs a canary of {route.canary.candidate!r}")
        return PreflightResult(True)

    def _apply(self, stored: StoredTrial, state: TrialState, action: Action) -> None:
        route = stored.route
        if isinstance(action, SetCanary):
            self.registry.set_canary(route, stored.candidate, action.percent, stored.policy.sticky_by)
        elif isinstance(action, StopCanary):
            self._stop_canary_of(route, stored.candidate)
        elif isinstance(action, Promote):
            self.registry.set_production(route, stored.candidate)
        elif isinstance(action, RequestGate):
            pass  # the journal line is the request; the operator runs the gate on the trial's evidence

    def window(self, trial_id: str) -> StepWindow | None:
        """What the trial's next look reads, or None when it is not in a step."""
        stored = self.store.get(trial_id)
        state = stored.state()
        if state.phase not in ("step", "awaiting_gate") or state.step_started_at is None:
            return None
        return StepWindow(stored.policy, stored.policy.steps[state.step].percent, state.step_started_at)

    def look(self, trial_id: str, counts: StepCounts | None = None) -> TrialState:
        """One interval's look: what is new in the current step since the last look, as a `Tick`.
        `counts` are the step's counts read (off the event loop) for `window(trial_id)`; without them
        they are read here."""
        stored = self.store.get(trial_id)
        state = stored.state()
        window = self.window(trial_id)
        if window is None:
            return state
        if counts is None:
            counts = read_step(self.registry, self.capture_db, window)
        requests, signals, remembered = counts.since(_seen(stored, state))
        return self.handle(trial_id, Tick(requests, signals), _seen_json(state, remembered))

    def recover(self) -> list[str]:
        """At start-up: routing back to what every trial's stored state says. Never promotes.

        A running trial gets its step's weight back (or continues its preflight); a trial that
        ended by abort, expiry or a failed gate but may not have routed back yet (killed between
        the write and the routing) has its candidate's canary stopped; a trial whose state cannot
        be read ends, with its candidate at weight 0.
        """
        notes = []
        for trial_id, route, candidate in self.store.running():
            try:
                stored = self.store.get(trial_id)
                notes.append(self._reconcile(stored, stored.state()))
            except TrialStateUnreadableError as exc:
                self._stop_canary_of(route, candidate)
                self.store.mark_unreadable(trial_id, now(), str(exc))
                notes.append(f"trial {trial_id!r}: state unreadable, candidate {candidate!r} set to weight 0")
        for trial_id, route, candidate, phase, ended_at in self.store.latest():
            if phase in ("aborted", "expired", "held") and self._stop_canary_of(route, candidate, ended_at):
                notes.append(f"trial {trial_id!r}: {phase}; its candidate's canary stopped")
        return notes

    def _stop_canary_of(self, route: str, candidate: str, started_by: str | None = None) -> bool:
        """Stop the route's canary of `candidate` (only one started at or before `started_by`, when given)."""
        state = self.registry.state.routes.get(route)
        if state is None or state.canary is None or state.canary.candidate != candidate:
            return False
        if started_by is not None and state.canary.started_at > started_by:
            return False  # started after the trial ended: an operator's own canary
        self.registry.stop_canary(route)
        return True

    def _reconcile(self, stored: StoredTrial, state: TrialState) -> str:
        route = self.registry.state.routes.get(stored.route)
        if route is None:
            raise TrialStateUnreadableError(f"trial {stored.id!r}: the gateway no longer has route {stored.route!r}")
        canary = route.canary if route.canary is not None and route.canary.candidate == stored.candidate else None
        if state.phase == "awaiting_gate" and route.production == stored.candidate:
            after = replace(state, phase="promoted", reason="promoted before the gateway stopped (found on recovery)")
            self.store.record(stored.id, now(), {"type": "Recovered", "production": stored.candidate}, state, after, [])
            return f"trial {stored.id!r}: the candidate was production already; recorded as promoted"
        if state.phase in ("step", "awaiting_gate") and not state.suspended:
            percent = stored.policy.steps[state.step].percent
            if canary is None or canary.percent != percent:
                self.registry.set_canary(stored.route, stored.candidate, percent, stored.policy.sticky_by)
            self.store.note(stored.id, now(), {"type": "Recovered", "percent": percent}, state)
            return f"trial {stored.id!r}: resumed {state.phase} {state.step + 1} at {percent:g}%"
        if canary is not None:
            self.registry.stop_canary(stored.route)
        self.store.note(stored.id, now(), {"type": "Recovered", "percent": 0}, state)
        if state.phase == "pending":  # killed between creating the trial and starting it
            self.handle(stored.id, Start())
        elif state.phase == "preflight":
            self.handle(stored.id, self.preflight(stored.route, stored.candidate))
        return f"trial {stored.id!r}: resumed {state.phase}{' (suspended)' if state.suspended else ''}"


def describe_state(stored: StoredTrial, state: TrialState) -> dict[str, object]:
    """A trial's status (the admin API's and the CLI's): phase, step, weight, evidence per signal."""
    percent = stored.policy.steps[state.step].percent if state.phase in ("step", "awaiting_gate") else 0.0
    return {"id": stored.id, "route": stored.route, "candidate": stored.candidate, "phase": state.phase,
            "step": state.step + 1, "steps": len(stored.policy.steps),
            "percent": 0.0 if state.suspended else percent, "suspended": state.suspended,
            "started_at": state.started_at, "step_started_at": state.step_started_at,
            "step_requests": list(state.step_requests), "reason": state.reason,
            "policy_sha256": stored.policy_sha256, "gate_policy_sha256": stored.gate_policy_sha256,
            "alpha_per_signal": stored.policy.alpha_per_signal(),
            "enforced": stored.policy.signals.enforced(), "evidence": evidence(state)}
