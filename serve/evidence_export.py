"""Production-candidate gate evidence (001 S17) from the gateway's own stores.

`worker-serve evidence` reads the registry (routes, loaded adapters, the per-request log, the
shadow comparisons) and the capture store (decisions with the guard's outcome labels) and
writes the three files the production-candidate gate reads, in its formats (core/evidence.py):

* `shadow.json` — paired outcomes, measure "correct", one item per shadowed request whose
  production call got a verdict from the next turn (the same verdicts the suite builder uses,
  replay/corpus/capture_suite.py). Production call succeeded (`ok`): production correct; the shadow
  correct when it chose the same tool and key set (key-set correctness against the verified
  action). Production call rejected (a guard `FAILURES` kind): production wrong; the shadow
  correct when it chose differently — another tool, another key set, or no call — as a
  `known_failure` decision is scored (no repeat of the failed action). Requests whose call
  got no verdict (no next turn yet, not captured, an anomaly that proves nothing) are left
  out and counted.
* `canary.json` — the canary cohort against the control cohort (production requests of the
  same route over the same window): requests and errors (status ≥ 500) from the request log;
  anomalies among the tool results the guard saw for the decisions of each cohort (capture
  store), over the results it saw.
* `registry.json` — whether the candidate can be rolled back at once after promotion: the
  rollback target is today's production (or, once the candidate is production, the route's
  recorded previous version), and the versions the engines have loaded.

The building functions are pure; `export` does the reading and writing.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import UTC
from pathlib import Path
from typing import Any

from core.atomicwrite import write_text_atomic
from core.attestation import ServedIdentity
from core.capture_store import CapturedDecision, parse_instant, read_decisions
from core.evidence import (
    CanaryCohort,
    CanaryEvidence,
    EvidenceSubject,
    OutcomeItem,
    PairedOutcomes,
    RegistryEvidence,
)
from core.guard import ANOMALIES, FAILURES, GuardKind
from core.scoring import CallAgreement
from serve.errors import ServeError
from serve.gateway.config import GatewayConfig
from serve.gateway.registry import Registry, State

SAME_ACTION = frozenset({CallAgreement.EXACT.value, CallAgreement.SAME_SHAPE.value})
READABLE = frozenset(a.value for a in CallAgreement) - {CallAgreement.UNPARSED.value}
SERVER_ERROR = 500


class EvidenceError(ServeError, ValueError):
    """The export cannot say anything: an unknown route, no candidate, no window."""


@dataclass(frozen=True)
class ShadowEvidence:
    outcomes: PairedOutcomes
    agreement: dict[str, int]  # every stored comparison of the window, by agreement level
    left_out: dict[str, int]  # shadowed requests without a verdict, by reason


def shadow_outcomes(rows: Iterable[Mapping[str, Any]], decisions: Mapping[str, CapturedDecision],
                    candidate: str) -> ShadowEvidence:
    """Paired correctness of production vs shadow answers, judged by the production call's outcome."""
    items: list[OutcomeItem] = []
    agreement: Counter[str] = Counter()
    left_out: Counter[str] = Counter()
    for row in rows:
        agreement[row["agreement"]] += 1
        decision = decisions.get(row["request_id"])
        if decision is None:
            left_out["not captured"] += 1
        elif decision.chosen_tool is None:
            left_out["production made no call"] += 1
        elif decision.outcome is None:
            left_out["no verdict yet"] += 1
        elif decision.outcome == GuardKind.OK:
            items.append(OutcomeItem(id=row["request_id"], baseline=True,
                                     candidate=row["agreement"] in SAME_ACTION, category="verified_action",
                                     note=f"production {decision.chosen_tool} succeeded; shadow {row['agreement']}"))
        elif decision.outcome in FAILURES:
            avoided = row["agreement"] in READABLE and row["agreement"] not in SAME_ACTION
            items.append(OutcomeItem(id=row["request_id"], baseline=False, candidate=avoided,
                                     category="known_failure",
                                     note=f"production {decision.chosen_tool} {decision.outcome}; "
                                          f"shadow {row['agreement']}"))
        else:
            left_out[f"outcome {decision.outcome} (no verdict)"] += 1
    return ShadowEvidence(PairedOutcomes(measure="correct", candidate=candidate, items=items),
                          dict(agreement), dict(left_out))


def cohort(requests: Sequence[Mapping[str, Any]], decisions: Iterable[CapturedDecision]) -> CanaryCohort:
    """Requests, server errors, and guard anomalies over the tool results seen, of one cohort."""
    labelled = [d.outcome for d in decisions if d.outcome is not None]
    return CanaryCohort(requests=len(requests), errors=sum(r["status"] >= SERVER_ERROR for r in requests),
                        anomalies=sum(kind in ANOMALIES for kind in labelled), outcomes=len(labelled))


def canary_cohorts(requests: Sequence[Mapping[str, Any]], decisions: Sequence[CapturedDecision], route: str,
                   candidate: str, adapter: str) -> CanaryEvidence:
    """The canary (requests the route sent to `candidate`) against control (its production requests)."""
    def in_cohort(kind: str, version: str | None) -> bool:
        return kind == "production" or (kind == "canary" and version == candidate)

    trial_requests = [r for r in requests if r["route"] == route and in_cohort(r["kind"], r["adapter"])]
    trial_decisions = [d for d in decisions if d.route == route and in_cohort(d.kind, d.adapter)]
    return CanaryEvidence(
        adapter=adapter,
        control=cohort([r for r in trial_requests if r["kind"] == "production"],
                       [d for d in trial_decisions if d.kind == "production"]),
        canary=cohort([r for r in trial_requests if r["kind"] == "canary"],
                      [d for d in trial_decisions if d.kind == "canary"]))


def trial_subject(state: State, route: str, candidate: str) -> EvidenceSubject:
    """What served the two sides of a route's trial: its production version and the candidate version, each with
    its adapter fingerprint (None: the base model), so a gate binds the evidence to the judged run's weights."""
    def identity(version: str) -> ServedIdentity:
        adapter = state.adapters.get(version)
        return ServedIdentity(model=version, version=version, fingerprint=adapter and adapter.fingerprint)

    return EvidenceSubject(baseline=identity(state.routes[route].production), candidate=identity(candidate))


def registry_evidence(state: State, route: str, candidate: str) -> RegistryEvidence:
    """After promoting `candidate`, what production would be, what rollback would restore, what is loaded."""
    current = state.routes[route]
    target = current.previous if current.production == candidate else current.production
    return RegistryEvidence(production=candidate, rollback_target=target,
                            loaded=[state.base, *(a.name for a in state.loaded())])


@dataclass(frozen=True)
class Export:
    directory: Path
    route: str
    candidate: str
    since: str
    shadow: ShadowEvidence
    canary: CanaryEvidence
    registry: RegistryEvidence

    def files(self) -> dict[str, Path]:
        return {key: self.directory / f"{key}.json" for key in ("shadow", "canary", "registry")}

    def summary(self) -> str:
        s, c, r = self.shadow, self.canary, self.registry
        wins = sum(i.candidate and not i.baseline for i in s.outcomes.items)
        losses = sum(i.baseline and not i.candidate for i in s.outcomes.items)
        lines = [
            f"evidence for {self.candidate!r} on route {self.route!r} since {self.since} → {self.directory}",
            f"  shadow:   {sum(s.agreement.values())} comparisons {_counts(s.agreement)}; "
            f"{len(s.outcomes.items)} with a verdict (+{wins}/−{losses}); left out: {_counts(s.left_out)}",
            f"  canary:   {c.canary.requests} requests, {c.canary.errors} errors, "
            f"{c.canary.anomalies}/{c.canary.outcomes} anomalous tool results; control: {c.control.requests} "
            f"requests, {c.control.errors} errors, {c.control.anomalies}/{c.control.outcomes}",
            f"  registry: rollback target {r.rollback_target!r} "
            f"{'is' if r.rollback_target in r.loaded else 'is NOT'} loaded",
        ]
        return "\n".join(lines)


def _counts(counter: Mapping[str, int]) -> str:
    return "(" + (", ".join(f"{k} {v}" for k, v in sorted(counter.items())) or "none") + ")"


def _stamp(value: str) -> str:
    """An ISO time in the registry's own format, so stored times compare as text."""
    try:
        parsed = parse_instant(value)
    except ValueError as exc:
        raise EvidenceError(f"--since {value!r} is not an ISO time (e.g. 2026-11-29T10:00:00Z)") from exc
    return parsed.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def export(config: GatewayConfig, route: str, out: Path, candidate: str | None = None, since: str | None = None,
           arm: str | None = None) -> Export:
    """Write shadow.json, canary.json and registry.json for `candidate` on `route` into `out`.

    Without `candidate`/`since`, the route's running canary (else its shadow) names the
    candidate and its start opens the window. `arm` is the candidate's name in the replay run
    the gate is evaluated on, when it is not the adapter version's own name.
    """
    if route not in config.gateway.routes:
        raise EvidenceError(f"unknown route {route!r}; the gateway has {', '.join(config.gateway.routes)}")
    if not config.gateway.state_db.is_file():
        raise EvidenceError(f"no gateway state at {config.gateway.state_db}")
    registry = Registry(config.gateway.state_db, config.gateway.routes, config.base.served_model_name)
    try:
        state = registry.state
        trial = state.routes[route].canary or state.routes[route].shadow
        candidate = candidate or (trial.candidate if trial else None)
        if candidate is None:
            raise EvidenceError(f"route {route!r} runs no canary or shadow: name the candidate (--candidate)")
        since = since or (trial.started_at if trial and trial.candidate == candidate else None)
        if since is None:
            raise EvidenceError(f"{candidate!r} is not on trial on route {route!r}: give the window's start (--since)")
        since = _stamp(since)
        requests = registry.requests_since(route, since)
        shadows = [r for r in registry.shadow_results_since(route, since) if r["candidate"] == candidate]
    finally:
        registry.close()
    db = config.capture.db
    decisions = read_decisions(db, since, route) if db.exists() else []
    subject = trial_subject(state, route, candidate)
    shadow = shadow_outcomes(shadows, {d.id: d for d in decisions}, arm or candidate)
    result = Export(
        directory=out, route=route, candidate=candidate, since=since,
        shadow=replace(shadow, outcomes=shadow.outcomes.model_copy(update={"subject": subject})),
        canary=canary_cohorts(requests, decisions, route, candidate, arm or candidate).model_copy(
            update={"subject": subject}),
        registry=registry_evidence(state, route, candidate))
    try:
        out.mkdir(parents=True, exist_ok=True)
        for key, model in (("shadow", result.shadow.outcomes), ("canary", result.canary),
                           ("registry", result.registry)):
            write_text_atomic(result.files()[key], json.dumps(model.model_dump(mode="json"), indent=2) + "\n")
    except OSError as exc:
        raise EvidenceError(f"cannot write the evidence into {out}: {exc.strerror or exc}") from exc
    return result
