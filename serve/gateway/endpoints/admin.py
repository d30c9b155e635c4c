"""Admin API of the gateway, under `/admin/`.

Every call needs `Authorization: Bearer <token>`; the token is read from the environment
variable named by `admin.token_env` (default `WORKER_GATEWAY_ADMIN_TOKEN`), else from
`admin.token` in the gateway config. Without a configured token the admin API refuses every
call. Changes are serialised (one at a time, also against the re-apply of the registry to
the engines) and all-or-nothing: a change that fails leaves the registry, the routes and the
engines as they were. Each change bumps `revision` and is written to the admin log.

| Method and path | Body | Does |
|---|---|---|
| `POST /admin/adapters` | `{"name", "path"}` | register an adapter version (201). `path` must lie inside `adapters.root` (relative paths are read there), and so must every file in it, symlinks resolved (checked again at load); `adapter_config.json` must be a LoRA for `base.model` with rank ≤ `adapters.max_rank`. The name must be new: names are never reused, not even after an unload. |
| `POST /admin/adapters/{name}/load` | – | load it on every healthy engine (engines that are down get it when they come back). Refused if its files changed since registration. |
| `POST /admin/adapters/{name}/unload` | – | unload it; refused (409) while it is production, the rollback target, a canary or a shadow. |
| `GET /admin/adapters` | – | all versions with their state (`registered`, `loaded`, `unloaded`). |
| `POST /admin/routes/{route}/production` | `{"version"}` | make a loaded version (or the base model's served name) production; the old production becomes the rollback target. A canary or shadow of that version ends. |
| `POST /admin/routes/{route}/rollback` | – | swap production and the rollback target (no load: it is still loaded); takes effect on the next request. A canary or shadow of the version that becomes production ends. |
| `POST /admin/routes/{route}/canary` | `{"candidate", "percent", "sticky_by"}` | send `percent` (0 < p ≤ 100) of sticky keys to the candidate; `sticky_by` is `workspace` (header `X-Workspace-Id`, default) or `session` (`X-Session-Id`). Re-posting the same candidate changes the percent; another candidate needs a stop first. |
| `DELETE /admin/routes/{route}/canary` | – | stop the canary. |
| `POST /admin/routes/{route}/shadow` | `{"candidate", "sample_rate"}` | copy a sample (0–1) of the route's production requests to the candidate in the background and compare. |
| `DELETE /admin/routes/{route}/shadow` | – | stop the shadow. |
| `GET /admin/state` | – | revision, routes (production, rollback target, canary, shadow), adapters, upstream health, shadow queue and agreement counts. |
| `GET /admin/resolve?model=&workspace=&session=` | – | dry run: which version and replica a request would get. |
| `GET /admin/requests?limit=` | – | the latest routed requests (route, version, kind, sticky key, status, latency). |
| `GET /admin/shadow?route=&limit=` | – | stored shadow comparisons with both answers. |
| `GET /admin/log?limit=` | – | the admin log. |

While a progressive trial runs on a route (serve/trials/admin_routes.py), that route's production,
rollback and canary changes are refused (409 `trial_running`, naming the trial), and so is
unloading its candidate: the trial owns them until it ends (abort it first).

Errors (OpenAI shape): 401 no or wrong token, 404 unknown route or version, 409 a conflict
(name reuse, not loaded, still in use, a running trial, no rollback target, engine refused the name), 422 a
bad body (the message names the field), 502 an engine failed the load/unload, 503 no engine
is healthy.
"""

from __future__ import annotations

import asyncio
import hmac
from dataclasses import asdict
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Depends, Query, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field

from core.names import Name
from serve.gateway.base_lineage import base_lineage
from serve.gateway.endpoints.dependencies import GatewayDep, gateway_of
from serve.gateway.errors import GatewayError, unavailable
from serve.gateway.registry import Adapter, AdapterError, NameTakenError, Route, inspect_adapter
from serve.gateway.service import FilesChangedError, Gateway
from serve.gateway.upstreams import Upstream, UpstreamCallError


async def require_token(request: Request) -> None:
    gw = gateway_of(request)
    expected = gw.admin_token
    challenge = {"WWW-Authenticate": "Bearer"}
    if not expected:
        raise GatewayError(401, f"the admin API is disabled: set ${gw.config.admin.token_env} or admin.token",
                           "admin_disabled", headers=challenge)
    scheme, _, given = request.headers.get("authorization", "").partition(" ")
    if scheme.lower() != "bearer" or not hmac.compare_digest(given.strip().encode(), expected.encode()):
        raise GatewayError(401, "missing or wrong admin token (Authorization: Bearer <token>)", "invalid_token",
                           headers=challenge)


router = APIRouter(prefix="/admin", dependencies=[Depends(require_token)])


class Body(BaseModel):
    model_config = ConfigDict(extra="forbid")


class RegisterBody(Body):
    name: Name
    path: str = Field(min_length=1, max_length=4096)


class ProductionBody(Body):
    version: Name


class CanaryBody(Body):
    candidate: Name
    percent: float = Field(gt=0, le=100)
    sticky_by: Literal["workspace", "session"] = "workspace"


class ShadowBody(Body):
    candidate: Name
    sample_rate: float = Field(ge=0, le=1)


def _adapter_out(gw: Gateway, adapter: Adapter) -> dict[str, Any]:
    return {"revision": gw.registry.state.revision, "adapter": asdict(adapter)}


def _route_out(gw: Gateway, route: Route) -> dict[str, Any]:
    gw.sync_gauges()
    return {"revision": gw.registry.state.revision, "route": asdict(route)}


def _adapter(gw: Gateway, name: str) -> Adapter:
    adapter = gw.registry.state.adapters.get(name)
    if adapter is None:
        raise GatewayError(404, f"no adapter version {name!r} is registered", "adapter_not_found")
    return adapter


def _route(gw: Gateway, name: str) -> Route:
    route = gw.registry.state.routes.get(name)
    if route is None:
        raise GatewayError(404, f"no route {name!r}; routes: {', '.join(gw.registry.state.routes)}",
                           "route_not_found")
    return route


def _servable(gw: Gateway, version: str) -> str:
    """A version a route may send traffic to: the base model or a loaded adapter."""
    if version == gw.registry.state.base:
        return version
    adapter = _adapter(gw, version)
    if adapter.state != "loaded":
        raise GatewayError(409, f"adapter version {version!r} is {adapter.state}; load it first", "not_loaded")
    return version


def _conflict(message: str, code: str = "conflict") -> GatewayError:
    return GatewayError(409, message, code)


def _not_during_trial(gw: Gateway, route: str | None = None, adapter: str | None = None) -> None:
    """Refuse a change that would contradict a running trial on `route` (or of candidate `adapter`)."""
    for trial, on, candidate in gw.running_trials():
        if on == route or candidate == adapter:
            raise _conflict(f"trial {trial!r} runs on route {on!r} with candidate {candidate!r}; it owns the route's "
                            "production and canary until it ends (abort it first)", "trial_running")


@router.post("/adapters", status_code=201)
async def register(body: RegisterBody, gw: GatewayDep) -> dict[str, Any]:
    async with gw.lock:
        state = gw.registry.state
        if body.name in state.routes or body.name == state.base:
            raise _conflict(f"{body.name!r} is a route or the base model; pick another version name", "name_taken")
        if body.name in state.adapters:
            raise _conflict(f"adapter name {body.name!r} was registered before; names are never reused",
                            "name_taken")
        settings = gw.config
        try:
            files = await asyncio.to_thread(inspect_adapter, body.path, settings.adapters.root,
                                            settings.base.model, settings.adapters.max_rank)
        except AdapterError as exc:
            raise GatewayError(422, str(exc), "invalid_adapter") from exc
        try:
            return _adapter_out(gw, gw.registry.register(body.name, files))
        except NameTakenError as exc:
            raise _conflict(str(exc), "name_taken") from exc


@router.get("/adapters")
async def adapters(gw: GatewayDep) -> dict[str, Any]:
    state = gw.registry.state
    return {"revision": state.revision, "adapters": [asdict(a) for a in state.adapters.values()],
            "base_model": await base_lineage(gw.pool, state.base)}


@router.post("/adapters/{name}/load")
async def load(name: Name, gw: GatewayDep) -> dict[str, Any]:
    async with gw.lock:
        adapter = _adapter(gw, name)
        if adapter.state == "loaded":
            return _adapter_out(gw, adapter)
        healthy = gw.pool.healthy()
        if not healthy:
            raise unavailable("no engine is healthy; nothing was loaded", gw.retry_after_s)
        try:
            await gw.verify_files(adapter)
        except FilesChangedError as exc:
            raise _conflict(str(exc), "files_changed") from exc
        loaded: list[Upstream] = []
        try:
            for upstream in healthy:
                if await gw.load_on(upstream, adapter):
                    loaded.append(upstream)
        except UpstreamCallError as exc:
            await _undo_loads(gw, loaded, name)
            status = 409 if exc.status == 409 else 502
            raise GatewayError(status, f"loading {name!r} failed, nothing changed: {exc}", "engine_load_failed") \
                from exc
        return _adapter_out(gw, gw.registry.set_adapter_state(name, "loaded"))


async def _undo_loads(gw: Gateway, upstreams: list[Upstream], name: str) -> None:
    for upstream in upstreams:
        try:
            await gw.pool.unload_adapter(upstream, name, gw.config.gateway.request_timeout_s)
        except UpstreamCallError:
            continue  # the next health tick unloads it: the registry says it is not loaded


@router.post("/adapters/{name}/unload")
async def unload(name: Name, gw: GatewayDep) -> dict[str, Any]:
    async with gw.lock:
        adapter = _adapter(gw, name)
        if adapter.state != "loaded":
            return _adapter_out(gw, adapter)
        _not_during_trial(gw, adapter=name)
        uses = gw.registry.state.references(name)
        if uses:
            raise _conflict(f"{name!r} is in use ({'; '.join(uses)}); change that first", "in_use")
        for upstream in gw.pool.healthy():
            try:
                await gw.pool.unload_adapter(upstream, name, gw.config.gateway.request_timeout_s)
            except UpstreamCallError as exc:
                # Registry unchanged: the next health tick loads it again where it was unloaded.
                raise GatewayError(502, f"unloading {name!r} failed, it stays loaded: {exc}",
                                   "engine_unload_failed") from exc
        return _adapter_out(gw, gw.registry.set_adapter_state(name, "unloaded"))


@router.post("/routes/{route}/production")
async def set_production(route: Name, body: ProductionBody, gw: GatewayDep) -> dict[str, Any]:
    async with gw.lock:
        _route(gw, route)
        _not_during_trial(gw, route)
        return _route_out(gw, gw.registry.set_production(route, _servable(gw, body.version)))


@router.post("/routes/{route}/rollback")
async def rollback(route: Name, gw: GatewayDep) -> dict[str, Any]:
    async with gw.lock:
        current = _route(gw, route)
        _not_during_trial(gw, route)
        if current.previous is None:
            raise _conflict(f"route {route!r} has no previous production version to roll back to", "no_previous")
        _servable(gw, current.previous)
        return _route_out(gw, gw.registry.rollback(route))


def _check_candidate(gw: Gateway, route: Route, candidate: str, running: str | None, what: str) -> None:
    _servable(gw, candidate)
    if candidate == route.production:
        raise _conflict(f"{candidate!r} is already production of route {route.name!r}", "is_production")
    if running is not None and running != candidate:
        raise _conflict(f"route {route.name!r} already has a {what} of {running!r}; stop it first", f"{what}_running")


@router.post("/routes/{route}/canary")
async def start_canary(route: Name, body: CanaryBody, gw: GatewayDep) -> dict[str, Any]:
    async with gw.lock:
        current = _route(gw, route)
        _not_during_trial(gw, route)
        _check_candidate(gw, current, body.candidate, current.canary.candidate if current.canary else None, "canary")
        return _route_out(gw, gw.registry.set_canary(route, body.candidate, body.percent, body.sticky_by))


@router.delete("/routes/{route}/canary")
async def stop_canary(route: Name, gw: GatewayDep) -> dict[str, Any]:
    async with gw.lock:
        current = _route(gw, route)
        _not_during_trial(gw, route)
        return _route_out(gw, gw.registry.stop_canary(route) if current.canary else current)


@router.post("/routes/{route}/shadow")
async def start_shadow(route: Name, body: ShadowBody, gw: GatewayDep) -> dict[str, Any]:
    async with gw.lock:
        current = _route(gw, route)
        _check_candidate(gw, current, body.candidate, current.shadow.candidate if current.shadow else None, "shadow")
        return _route_out(gw, gw.registry.set_shadow(route, body.candidate, body.sample_rate))


@router.delete("/routes/{route}/shadow")
async def stop_shadow(route: Name, gw: GatewayDep) -> dict[str, Any]:
    async with gw.lock:
        current = _route(gw, route)
        return _route_out(gw, gw.registry.stop_shadow(route) if current.shadow else current)


@router.get("/state")
async def state(gw: GatewayDep) -> JSONResponse:
    return JSONResponse({**gw.public(), "base_model": await base_lineage(gw.pool, gw.registry.state.base)})


@router.get("/resolve")
async def resolve(gw: GatewayDep, model: Name | None = None, workspace: Name | None = None,
                  session: Name | None = None) -> dict[str, Any]:
    res = gw.resolve(model or gw.config.gateway.default_route, workspace, session)
    order = gw.pool.order(res.replica_key)
    return {"route": res.route, "adapter": res.target, "kind": res.kind, "cohort_key": res.cohort_key,
            "upstream": order[0].name if order else None}


@router.get("/requests")
async def requests(gw: GatewayDep, limit: Annotated[int, Query(ge=1, le=10_000)] = 100) -> dict[str, Any]:
    return {"requests": gw.registry.requests(limit)}


@router.get("/shadow")
async def shadow_results(gw: GatewayDep, route: Name | None = None,
                         limit: Annotated[int, Query(ge=1, le=10_000)] = 100) -> dict[str, Any]:
    return {"results": gw.registry.shadow_results(route, limit)}


@router.get("/log")
async def admin_log(gw: GatewayDep, limit: Annotated[int, Query(ge=1, le=10_000)] = 100) -> dict[str, Any]:
    return {"log": gw.registry.admin_log(limit)}
