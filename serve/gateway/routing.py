"""Which model version answers a request, and which replica serves it. Pure: no I/O.

* `"model"` names a route (→ its production version, or the canary candidate for a sticky
  cohort), the base model's served name, or a loaded adapter version (pinned).
* Canary cohorts are drawn by a deterministic hash of route, candidate and the sticky key
  (`X-Workspace-Id` or `X-Session-Id`), so a workspace stays in or out of the canary across
  requests, replicas and gateway restarts, and raising the percentage only adds workspaces.
  A request without the sticky header goes to production.
* Replicas: rendezvous hashing on the workspace (else session) keeps one workspace on one
  replica so its prefix cache stays warm; when that replica is unhealthy only its keys move.
  Requests without either header go to the least busy replica.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

from serve.errors import ServeError
from serve.gateway.registry import State

Kind = Literal["production", "canary", "shadow", "pinned"]


class ModelNotFoundError(ServeError, LookupError):
    """A `model` that is no route, not the base model and no registered adapter version."""

    code = "model_not_found"


class ModelNotLoadedError(ServeError, LookupError):
    """A registered adapter version that is not loaded on the engines."""

    code = "model_not_loaded"


@dataclass(frozen=True)
class Resolution:
    requested: str
    route: str  # "" for a pinned request
    target: str  # the model name sent to the engine
    kind: Kind
    replica_key: str | None  # workspace, else session: keeps the prefix cache warm
    cohort_key: str | None = None  # the canary's sticky key, when a canary is running


def canary_bucket(route: str, candidate: str, key: str) -> float:
    """A stable point in [0, 100) for this key; the key is in the canary when it is below the percent."""
    digest = hashlib.sha256(f"{route}\0{candidate}\0{key}".encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64 * 100


def resolve(state: State, model: str, workspace: str | None, session: str | None) -> Resolution:
    """Where a request naming `model` goes: a route's production or canary version (sticky by workspace or session),
    the base model, or a loaded adapter version pinned by name."""
    replica_key = workspace or session
    route = state.routes.get(model)
    if route is not None:
        canary = route.canary
        if canary is not None:
            key = workspace if canary.sticky_by == "workspace" else session
            if key and canary_bucket(route.name, canary.candidate, key) < canary.percent:
                return Resolution(model, route.name, canary.candidate, "canary", replica_key, key)
            return Resolution(model, route.name, route.production, "production", replica_key, key)
        return Resolution(model, route.name, route.production, "production", replica_key)
    if model == state.base:
        return Resolution(model, "", model, "pinned", replica_key)
    adapter = state.adapters.get(model)
    if adapter is None:
        known = ", ".join([*state.routes, state.base, *(a.name for a in state.loaded())])
        raise ModelNotFoundError(f"the model {model!r} does not exist; known: {known}")
    if adapter.state != "loaded":
        raise ModelNotLoadedError(f"the adapter version {model!r} is {adapter.state}, not loaded")
    return Resolution(model, "", model, "pinned", replica_key)


def replica_order(names: Sequence[str], key: str | None, busy: Mapping[str, int], turn: int = 0) -> list[str]:
    """Replicas to try, best first: by rendezvous hash of `key`, else least busy (ties rotate by `turn`)."""
    if key:
        return sorted(names, key=lambda n: hashlib.sha256(f"{n}\0{key}".encode()).digest(), reverse=True)
    count = len(names)
    return [n for _, _, n in sorted((busy.get(n, 0), (i - turn) % count, n) for i, n in enumerate(names))]
