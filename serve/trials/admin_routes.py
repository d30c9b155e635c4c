"""Admin API for progressive trials, under `/admin/trials` (same bearer token as `/admin/`).

| Method and path | Body | Does |
|---|---|---|
| `POST /admin/trials` | `{"id", "policy"}` | start a trial from a policy file on the gateway host (201): preflight, then the first step. `id` is new (never reused). A preflight that fails (candidate not registered or not loaded, another canary, ...) is a 409 and creates nothing. |
| `GET /admin/trials` | – | every trial with its phase. |
| `GET /admin/trials/{id}?journal=` | – | phase, step, weight, evidence per signal, the policy's sha256, and the last `journal` transitions (default 20). |
| `GET /admin/trials/{id}/evidence` | – | the trial's cohorts in the gate's canary evidence format (`--evidence canary=`), with its `window` (the trial, its start, now). |
| `POST /admin/trials/{id}/suspend` | – | candidate weight 0; the trial (and its maximum duration) keeps running. |
| `POST /admin/trials/{id}/resume` | – | the current step again, its timer restarted. |
| `POST /admin/trials/{id}/abort` | `{"reason"}` | end it; every cohort back to production. |
| `POST /admin/trials/{id}/gate` | `{"passed", "policy_sha256", "candidate", "conditions_passed", "conditions", "window", "summary", "tainted_rule_ids", "weights"}` | the production-candidate gate's verdict, while awaiting it. It must be for the trial's candidate, the gate policy the trial was started with and the trial's evidence window (the `window` of its `evidence` export, taken after it reached the gate); a pass needs every condition passed. Anything else is a 409 naming the mismatch, and so is a verdict resting on a disputed rule (`tainted_rule_ids` not empty) or on other adapter weights than the candidate's registered fingerprint (`weights`). |

Errors: 404 unknown trial, 409 a change the trial's state refuses (or a preflight that fails, or a
stored state that cannot be used), 422 a bad
policy or body. The policy file is read off the event loop, once, and must be a regular file.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Query, Request
from pydantic import Field, StringConstraints

from core.names import Name
from serve.gateway.endpoints.admin import Body, require_token
from serve.gateway.errors import GatewayError
from serve.trials.controller import PreflightFailedError, describe_state
from serve.trials.machine import Abort, Event, GateVerdict, Resume, Suspend, VerdictWindow
from serve.trials.signals import canary_evidence
from serve.trials.store import TrialStateUnreadableError
from serve.trials.supervisor import TrialService
from serve.trials.trial_policy import TrialError, TrialPolicy, load_trial_policy


def _trials(request: Request) -> TrialService:
    service: TrialService = request.app.state.trials
    return service


router = APIRouter(prefix="/admin/trials", dependencies=[Depends(require_token)])
TrialsDep = Annotated[TrialService, Depends(_trials)]


class StartBody(Body):
    id: Name
    policy: str = Field(min_length=1)


class AbortBody(Body):
    reason: str = Field(min_length=1, max_length=500)


class WindowBody(Body):
    trial: Name
    since: float = Field(allow_inf_nan=False)
    until: float = Field(allow_inf_nan=False)


class GateBody(Body):
    passed: bool
    policy_sha256: Annotated[str, StringConstraints(pattern=r"^[0-9a-f]{64}$")]
    candidate: Name
    conditions_passed: int = Field(ge=0, le=10_000)
    conditions: int = Field(ge=0, le=10_000)
    window: WindowBody | None
    summary: str = Field(default="", max_length=2000)
    tainted_rule_ids: list[Annotated[str, StringConstraints(min_length=1, max_length=200)]] = Field(
        default_factory=list, max_length=1000)
    weights: Annotated[str, StringConstraints(pattern=r"^[0-9a-f]{64}$")] | None = None
    """The fingerprint of the candidate's adapter weights the verdict names (its `weights:` subject)."""


def _error(exc: TrialError) -> GatewayError:
    if isinstance(exc, TrialStateUnreadableError):  # its candidate is (or, at the next look, goes) to weight 0
        return GatewayError(409, f"{exc}; the trial is over, its candidate at weight 0 (see its journal)",
                            "trial_state_unreadable")
    if str(exc).startswith("no trial named"):
        return GatewayError(404, str(exc), "trial_not_found")
    if isinstance(exc, PreflightFailedError):
        return GatewayError(409, str(exc), "trial_preflight_failed")
    return GatewayError(409, str(exc), "trial_conflict")


def _status(service: TrialService, trial_id: str, journal: int = 20) -> dict[str, Any]:
    try:
        stored = service.store.get(trial_id)
        status = describe_state(stored, stored.state())
    except TrialError as exc:
        raise _error(exc) from exc
    return {**status, "journal": service.store.journal(trial_id)[-journal:] if journal else []}


@router.post("", status_code=201)
async def start(body: StartBody, service: TrialsDep) -> dict[str, Any]:
    try:
        loaded = await asyncio.to_thread(load_trial_policy, Path(body.policy))
        _against_gateway(loaded.policy, service.gw.config.gateway.request_timeout_s)
    except TrialError as exc:
        raise GatewayError(422, str(exc), "invalid_trial_policy") from exc
    if loaded.policy.route not in service.gw.registry.state.routes:
        raise GatewayError(404, f"the gateway has no route {loaded.policy.route!r}", "route_not_found")
    try:
        await service.start_trial(body.id, loaded)
    except TrialError as exc:
        raise _error(exc) from exc
    return _status(service, body.id)


def _against_gateway(policy: TrialPolicy, request_timeout_s: float) -> None:
    """A policy that this gateway's own limits would defeat: an enforced slow threshold no request can pass."""
    slow = policy.signals.slow_requests
    if slow is not None and slow.enforced and slow.threshold_s >= request_timeout_s:
        raise TrialError(f"signals.slow_requests.threshold_s = {slow.threshold_s:g} s is not below the gateway's "
                         f"request_timeout_s ({request_timeout_s:g} s): no request could ever count as slow")


@router.get("")
async def trials(service: TrialsDep) -> dict[str, Any]:
    return {"trials": service.store.trials()}


@router.get("/{trial_id}")
async def status(trial_id: str, service: TrialsDep, journal: Annotated[int, Query(ge=0, le=1000)] = 20
                 ) -> dict[str, Any]:
    return _status(service, trial_id, journal)


@router.get("/{trial_id}/evidence")
async def evidence(trial_id: str, service: TrialsDep) -> dict[str, Any]:
    try:
        stored = service.store.get(trial_id)
        found = canary_evidence(stored.state(), stored.candidate, trial_id, service.controller.clock())
        return found.model_dump(mode="json")
    except TrialError as exc:
        raise _error(exc) from exc


async def _event(service: TrialService, trial_id: str, event: Event) -> dict[str, Any]:
    try:
        await service.handle(trial_id, event)
    except TrialError as exc:
        raise _error(exc) from exc
    return _status(service, trial_id)


@router.post("/{trial_id}/suspend")
async def suspend(trial_id: str, service: TrialsDep) -> dict[str, Any]:
    return await _event(service, trial_id, Suspend())


@router.post("/{trial_id}/resume")
async def resume(trial_id: str, service: TrialsDep) -> dict[str, Any]:
    return await _event(service, trial_id, Resume())


@router.post("/{trial_id}/abort")
async def abort(trial_id: str, body: AbortBody, service: TrialsDep) -> dict[str, Any]:
    return await _event(service, trial_id, Abort(body.reason))


@router.post("/{trial_id}/gate")
async def gate(trial_id: str, body: GateBody, service: TrialsDep) -> dict[str, Any]:
    window = VerdictWindow(body.window.trial, body.window.since, body.window.until) if body.window else None
    return await _event(service, trial_id, GateVerdict(body.passed, body.policy_sha256, body.candidate,
                                                       body.conditions_passed, body.conditions, window, body.summary,
                                                       tuple(body.tainted_rule_ids), body.weights))
