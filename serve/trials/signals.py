"""A trial's signals, counted from the gateway's own stores (the request log, the shadow
comparisons, the capture store): the candidate cohort against an equal-size, hash-matched
control cohort.

With the canary at `percent`, the candidate cohort is every sticky key whose canary bucket
(serve/gateway/routing.py) is below `percent`; the control cohort is the keys in
[percent, 2·percent), served by production. Both are slices of the same hash, so they see the
same traffic mix, and they are the same size. Per signal, for the current step (everything
at or after the step's start):

* `server_errors`: requests with status ≥ 500 (timeouts are 504), per request;
* `tool_anomalies`: guard anomalies among the tool results the guard saw for each cohort's
  decisions, per observed result (late labels count when they arrive);
* `slow_requests`: requests whose logged duration exceeds the threshold, per request (the
  request log records the whole request's duration, not the first token's);
* `shadow_disagreement`: shadow comparisons where the candidate chose another tool or key set,
  among comparisons with a readable answer on both sides (no control: tested against a rate).

Errors and anomalies are counted by serve/evidence_export.py's `cohort`, as the gate's canary
evidence is; `step_counts` is pure, `read_window` does the reading (in SQL, through the logs' and
the capture store's time indexes, so a look costs its window, not the stores' whole history).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

from core.capture_store import CapturedDecision, read_decisions
from core.evidence import CanaryCohort, CanaryEvidence, EvidenceWindow
from core.sqlitedb import StoreError, connect_readonly
from serve.evidence_export import READABLE, SAME_ACTION, cohort
from serve.gateway.registry import Registry, requests_in, shadow_results_in
from serve.gateway.routing import canary_bucket
from serve.trials.machine import Counts, TrialState
from serve.trials.trial_policy import TrialPolicy

Side = Literal["candidate", "control"]


@dataclass(frozen=True)
class StepCounts:
    """Cumulative counts of the current step: requests per cohort (candidate, control) and per signal."""

    requests: tuple[int, int]
    signals: Mapping[str, Counts]

    def since(self, earlier: StepCounts | None) -> tuple[tuple[int, int], dict[str, Counts], StepCounts]:
        """A look's news since an earlier reading of the same step: new requests per cohort, each
        signal's new counts, and the reading to remember for the next look.

        A signal's news is held back (and the remembered reading stays where it was for that
        signal) until both cohorts have new exposure — a batch with one side empty says nothing
        about the ratio and would be thrown away, so its events wait for the other side instead.
        """
        zero = Counts()
        before = earlier.signals if earlier is not None else {}
        requests = self.requests if earlier is None else (self.requests[0] - earlier.requests[0],
                                                           self.requests[1] - earlier.requests[1])
        news: dict[str, Counts] = {}
        remembered: dict[str, Counts] = {}
        for name, now in self.signals.items():
            new = _minus(now, before.get(name, zero))
            if informative(name, new):
                news[name], remembered[name] = new, now
            else:
                remembered[name] = before.get(name, zero)
        return requests, news, StepCounts(self.requests, remembered)


def informative(name: str, counts: Counts) -> bool:
    """Whether new counts can move the test: exposure on both sides (the candidate's alone for shadow)."""
    if name == "shadow_disagreement":
        return counts.candidate_exposure > 0
    return counts.candidate_exposure > 0 and counts.control_exposure > 0


def _minus(a: Counts, b: Counts) -> Counts:
    # Request-log pruning can only shrink a cumulative count: never report negative news, nor more
    # bad events than exposure on a side (bad events are always a subset of that side's exposure).
    cand = max(a.candidate_exposure - b.candidate_exposure, 0)
    ctrl = max(a.control_exposure - b.control_exposure, 0)
    return Counts(min(max(a.candidate_bad - b.candidate_bad, 0), cand), cand,
                  min(max(a.control_bad - b.control_bad, 0), ctrl), ctrl)


def side(route: str, candidate: str, percent: float, kind: str | None, adapter: str | None,
         key: str | None) -> Side | None:
    """Which cohort a request (or decision) of `route` belongs to, if either."""
    if kind == "canary" and adapter == candidate:
        return "candidate"
    if kind == "production" and key and percent <= canary_bucket(route, candidate, key) < 2 * percent:
        return "control"
    return None


def _pair(candidate: CanaryCohort, control: CanaryCohort, what: Literal["errors", "anomalies"]) -> Counts:
    if what == "errors":
        return Counts(candidate.errors, candidate.requests, control.errors, control.requests)
    return Counts(candidate.anomalies, candidate.outcomes or 0, control.anomalies, control.outcomes or 0)


def step_counts(policy: TrialPolicy, percent: float, requests: Iterable[Mapping[str, Any]],
                decisions: Iterable[CapturedDecision], shadows: Iterable[Mapping[str, Any]]) -> StepCounts:
    """Count every active signal of the trial over the given rows (already limited to the step)."""
    route, candidate = policy.route, policy.candidate
    rows: dict[Side, list[Mapping[str, Any]]] = {"candidate": [], "control": []}
    for row in requests:
        if row["route"] == route and (s := side(route, candidate, percent, row["kind"], row["adapter"],
                                                 row["sticky_key"])):
            rows[s].append(row)
    labelled: dict[Side, list[CapturedDecision]] = {"candidate": [], "control": []}
    for d in decisions:
        key = d.workspace if policy.sticky_by == "workspace" else d.session
        if d.route == route and (s := side(route, candidate, percent, d.kind, d.adapter, key)):
            labelled[s].append(d)
    cand, ctrl = (cohort(rows[s], labelled[s]) for s in ("candidate", "control"))
    signals: dict[str, Counts] = {}
    config = policy.signals
    if config.server_errors is not None:
        signals["server_errors"] = _pair(cand, ctrl, "errors")
    if config.tool_anomalies is not None:
        signals["tool_anomalies"] = _pair(cand, ctrl, "anomalies")
    if config.slow_requests is not None:
        limit = config.slow_requests.threshold_s
        signals["slow_requests"] = Counts(sum(r["duration_s"] > limit for r in rows["candidate"]), cand.requests,
                                          sum(r["duration_s"] > limit for r in rows["control"]), ctrl.requests)
    if config.shadow_disagreement is not None:
        readable = [r for r in shadows if r["candidate"] == candidate and r["agreement"] in READABLE]
        signals["shadow_disagreement"] = Counts(sum(r["agreement"] not in SAME_ACTION for r in readable),
                                                len(readable))
    return StepCounts((cand.requests, ctrl.requests), signals)


def stamp(epoch_s: float) -> str:
    """An epoch time in the registry's own ISO format, so stored times compare as text."""
    return datetime.fromtimestamp(epoch_s, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


@dataclass(frozen=True)
class StepWindow:
    """What a look reads: the trial's policy, the step's canary percent and the step's start."""

    policy: TrialPolicy
    percent: float
    step_started_at: float


def read_window(state_db: Path, capture_db: Path | None, window: StepWindow) -> StepCounts:
    """The step's counts from the state store's logs and the capture store (when capture is on), each
    read through its (route, time) index on a read-only connection of its own: the cost is the rows in
    the step's window, never everything ever logged or captured, and it is safe in a thread while the
    gateway serves (flush the registry's buffered rows first)."""
    since, route = stamp(window.step_started_at), window.policy.route
    db = connect_readonly(state_db)
    try:
        requests, shadows = requests_in(db, route, since), shadow_results_in(db, route, since)
    except sqlite3.Error as exc:
        raise StoreError(f"{state_db}: cannot read the request log: {exc}") from exc
    finally:
        db.close()
    decisions = read_decisions(capture_db, since, route) if capture_db is not None and capture_db.exists() else []
    return step_counts(window.policy, window.percent, requests, decisions, shadows)


def read_step(registry: Registry, capture_db: Path | None, window: StepWindow) -> StepCounts:
    """`read_window` of the registry's store, its buffered rows written first."""
    registry.flush_quietly()
    return read_window(registry.path, capture_db, window)


def canary_evidence(state: TrialState, candidate: str, trial_id: str, at: float) -> CanaryEvidence:
    """The trial's own cohorts over all its looks, in the gate's canary evidence format, with its
    window (the trial's start to `at`) so a verdict judged on it binds to this trial."""
    zero = Counts()
    errors = state.signals["server_errors"].totals if "server_errors" in state.signals else zero
    anomalies = state.signals["tool_anomalies"].totals if "tool_anomalies" in state.signals else zero
    return CanaryEvidence(
        adapter=candidate,
        control=CanaryCohort(requests=errors.control_exposure, errors=errors.control_bad,
                             anomalies=anomalies.control_bad, outcomes=anomalies.control_exposure),
        canary=CanaryCohort(requests=errors.candidate_exposure, errors=errors.candidate_bad,
                            anomalies=anomalies.candidate_bad, outcomes=anomalies.candidate_exposure),
        window=EvidenceWindow(trial=trial_id, since=state.started_at, until=at) if state.started_at is not None
        else None)
