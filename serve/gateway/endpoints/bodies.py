"""The OpenAPI shape of what the gateway itself reads from an API body (`model`, `stream`, and the fields that
capture, the guard and the token clamp read); every other field is the engine's, so the shapes stay open.
And the forwarded APIs' routes, declared from a table of those shapes (`declare_forwarded`)."""

from __future__ import annotations

from collections.abc import Callable, Coroutine, Mapping
from typing import Any

from fastapi import APIRouter, Request, Response

from core.names import NAME_PATTERN
from serve.gateway.apis import APIS
from serve.gateway.apis.base import Api, ApiName
from serve.gateway.endpoints.dependencies import GatewayDep
from serve.gateway.proxy import handle

MODEL: dict[str, Any] = {"type": "string", "pattern": NAME_PATTERN,
                         "description": "a route, an adapter version or the base model"}
STREAM: dict[str, Any] = {"type": ["boolean", "null"]}


def openapi_body(schema: dict[str, Any]) -> dict[str, Any]:
    """A route's `openapi_extra`: the body is read raw (and forwarded), so FastAPI would not document it."""
    return {"requestBody": {"required": True, "content": {"application/json": {"schema": schema}}}}


def declare_forwarded(router: APIRouter, bodies: Mapping[ApiName, dict[str, Any]],
                      responses: dict[int | str, dict[str, Any]]) -> None:
    """A POST route for each forwarded API named in `bodies`, documented with its body's shape: what OpenAPI (and
    the schemathesis fuzz test) reads, and what answers the path's other methods (405). In the app a POST to these
    paths never reaches the route: serve/app.py's `HotRoutes` hands it to the forwarder first, with the same call
    as the route's endpoint, which serves the router used without it."""
    for name, body in bodies.items():
        router.add_api_route(APIS[name].path, _forwarder(APIS[name]), methods=["POST"], name=name,
                             openapi_extra=openapi_body(body), responses=responses)


def _forwarder(api: Api) -> Callable[[Request, Any], Coroutine[Any, Any, Response]]:
    async def forward(request: Request, gw: GatewayDep) -> Response:
        return await handle(gw, request, api)
    return forward
