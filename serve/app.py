"""The gateway's FastAPI app: OpenAI-compatible endpoints, health, metrics and the admin API.

The composition root of `worker-serve gateway`: it wires the running gateway (`serve.gateway`) and
its trials (`serve.trials`, which read the gateway) into one app, so it sits above both packages. Each
endpoint family is one router module of `serve/gateway/endpoints/` (listed there), included here; this module
adds what spans them all: the body limit and the errors in each API's shape.

| Path | Does |
|---|---|
| `POST /v1/chat/completions`, `POST /v1/completions` | forward to an engine replica (SSE streams are relayed as they come). `"model"` names a route (default `gateway.default_route`), one of `gateway.model_aliases`, the base model's served name, or a loaded adapter version (pinned). Response headers `X-Worker-Route`, `X-Worker-Adapter`, `X-Worker-Kind` (production, canary, pinned) and `X-Request-Id` show the routing decision. Send `X-Workspace-Id` / `X-Session-Id` (names) for sticky canaries and replica affinity. |
| `POST /v1/messages`, `POST /v1/messages/count_tokens` | the Anthropic Messages API (the Claude Agent SDK's), forwarded to the engine's own endpoints the same way (`?beta=true` accepted; `anthropic-version` / `anthropic-beta` passed on); errors in Anthropic's shape. The session may also come as `X-Claude-Code-Session-Id` or inside `metadata.user_id`. A `max_tokens` above what the engine can give is clamped, said in `X-Worker-Max-Tokens`. |
| `POST /v1/responses` | the OpenAI Responses API (the OpenAI Agents SDK's), stateless: `previous_response_id` is refused (400). |
| (all forwarded requests) | a client's `X-Request-Id` (any visible ASCII, 0x21–0x7E, up to 200 characters) is stored and echoed as sent; any other is replaced by the gateway's own id, and the response header `X-Worker-Request-Id-Replaced: invalid` says so (never a refusal). |
| `GET /v1/models` | routes (with production, rollback target, canary, shadow), the base model and the loaded adapter versions; with a keys file, only for a caller with a key (401 otherwise). |
| `GET /health` | 200 while at least one engine is healthy, else 503 with `Retry-After`. |
| `GET /metrics` | Prometheus text (see serve/gateway/metrics.py and serve/gateway/gpu.py). |
| `/admin/...` | see serve/gateway/endpoints/admin.py; `/admin/trials/...`: serve/trials/admin_routes.py. |
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import Depends, FastAPI, Request, Response
from fastapi.exceptions import RequestValidationError
from starlette.exceptions import HTTPException
from starlette.requests import Request as StarletteRequest
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from core.names import excerpt, is_name
from serve.gateway import proxy
from serve.gateway.apis import APIS, api_for_path
from serve.gateway.config import GatewayConfig
from serve.gateway.edge import RequestIdNote, valid_text_body
from serve.gateway.endpoints import admin, anthropic, monitoring, openai
from serve.gateway.errors import ErrorResponse, GatewayError
from serve.gateway.service import Gateway
from serve.gateway.tenancy import ACCESS_LOG_FILTER
from serve.trials import admin_routes as trials_admin
from serve.trials.supervisor import TrialService

LINGER_BYTES = 64 * 2**20
"""How much of a refused body past the limit is read and thrown away before its 413 is sent, as nginx's
lingering close does: a server that answers and closes while the client is still sending makes the client's
kernel see a reset, and the client loses the answer. Reading costs the gateway bandwidth only (each chunk is
dropped as it comes), like any request that fits; a body more than this over the limit is no API request,
and its connection is closed at once (the client may then see the reset)."""


class HotRoutes:
    """A POST to a forwarded API's path goes straight to the forwarder (serve/gateway/proxy.py's `handle`, which
    answers every failure itself in the API's shape), without FastAPI's routing, dependency and endpoint layers:
    the same call its endpoint makes, at a fraction of the cost per request. Anything else (another method, the
    admin and monitoring paths) goes through the app's routes as before; the forwarded routes stay declared for
    them (serve/gateway/endpoints/bodies.py's `declare_forwarded`)."""

    def __init__(self, app: ASGIApp, gateway: Gateway) -> None:
        self.app = app
        self.gateway = gateway
        self.apis = {api.path: api for api in APIS.values()}  # every forwarded API

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        api = self.apis.get(scope["path"]) if scope["type"] == "http" and scope["method"] == "POST" else None
        if api is None:
            await self.app(scope, receive, send)
            return
        response = await proxy.handle(self.gateway, StarletteRequest(scope, receive), api)
        await response(scope, receive, send)


class BodyLimit:
    """413 for a body over the limit, before anything is parsed or forwarded: from Content-Length, or as soon
    as a chunked body passes it. The rest of the body is read and dropped first (up to `LINGER_BYTES` past the
    limit), so the client reads the 413 in its API's shape instead of a reset connection."""

    def __init__(self, app: ASGIApp, limit: int, gateway: Gateway) -> None:
        self.app = app
        self.limit = limit
        self.gateway = gateway

    def _error(self, drained: bool) -> GatewayError:
        return GatewayError(413, f"the request body is larger than {self.limit} bytes", "body_too_large",
                            headers=None if drained else {"Connection": "close"})

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = dict(scope["headers"])
        length = headers.get(b"content-length")
        if length is not None and length.isdigit() and int(length) > self.limit:
            api = api_for_path(scope["path"])
            self.gateway.metrics.observe("", "", "", 413, 0.0, "body_too_large", api=api.name)
            # A client that waits for `100 Continue` has sent no body: it is told at once, and nothing is read.
            sending = headers.get(b"expect", b"").lower() != b"100-continue"
            drained = sending and int(length) <= self.limit + LINGER_BYTES and await _discard(receive, int(length))
            await proxy.error_response(api, self._error(drained))(scope, receive, send)
            return
        received = 0

        async def limited() -> Message:
            nonlocal received
            message = await receive()
            received += len(message.get("body", b""))
            if received > self.limit:
                drained = not message.get("more_body", False) or await _discard(
                    receive, self.limit + LINGER_BYTES - received)
                raise self._error(drained)
            return message

        await self.app(scope, limited, send)


async def _discard(receive: Receive, budget: int) -> bool:
    """Read and drop the rest of a request body, at most about `budget` bytes; whether it ended (or the client
    went away) within them."""
    while budget >= 0:
        message = await receive()
        if message["type"] != "http.request" or not message.get("more_body", False):
            return True
        budget -= len(message.get("body", b""))
    return False


def _validation_message(exc: RequestValidationError) -> str:
    """Where and why, never the value: a location may be a key the client chose, so it is excerpted."""
    parts = []
    for err in exc.errors()[:5]:
        loc = ".".join(p if is_name(p) else excerpt(p, 20) for p in map(str, err["loc"]) if p != "body")
        parts.append(f"{loc or 'body'}: {err['msg'][:300]}")
    return "; ".join(parts)


def _add_error_handlers(app: FastAPI) -> None:
    """Errors the app itself raises take the shape of the API whose path was asked for (OpenAI's elsewhere)."""

    @app.exception_handler(GatewayError)
    async def gateway_error(request: Request, exc: GatewayError) -> Response:
        return proxy.error_response(api_for_path(request.url.path), exc)

    @app.exception_handler(HTTPException)
    async def http_error(request: Request, exc: HTTPException) -> Response:
        code = {404: "not_found", 405: "method_not_allowed"}.get(exc.status_code, "http_error")
        error = GatewayError(exc.status_code, str(exc.detail), code, headers=dict(exc.headers or {}))
        return proxy.error_response(api_for_path(request.url.path), error)

    @app.exception_handler(RequestValidationError)
    async def invalid_body(request: Request, exc: RequestValidationError) -> Response:
        error = GatewayError(422, _validation_message(exc), "invalid_body")
        return proxy.error_response(api_for_path(request.url.path), error)

    @app.exception_handler(Exception)
    async def internal_error(request: Request, exc: Exception) -> Response:
        error = GatewayError(500, f"internal gateway error: {type(exc).__name__}", "internal_error")
        return proxy.error_response(api_for_path(request.url.path), error)


def create_app(config: GatewayConfig) -> FastAPI:
    """The FastAPI app of one gateway; its lifespan starts and stops the gateway's background work. Handlers
    reach the gateway and the trials through `app.state` (serve/gateway/endpoints/dependencies.py). Everything
    that can refuse the start (a bad keys file, a store that cannot be opened or written, a full disk) happens
    here, before the server runs: the command then ends in one `error:` line."""
    gateway = Gateway(config, proxy.send_shadow)
    trials = TrialService(gateway)
    trials.recover()  # before the server listens: running trials' routing is put back first

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        logging.getLogger("uvicorn.access").addFilter(ACCESS_LOG_FILTER)  # after uvicorn set its logging up
        await gateway.start()
        trials.run_in_background()
        try:
            yield
        finally:
            await trials.stop()
            await gateway.stop()

    app = FastAPI(title="worker-tier gateway", lifespan=lifespan, docs_url=None, redoc_url=None, openapi_url=None,
                  responses={"4XX": {"model": ErrorResponse, "description": "Refused (OpenAI-shaped error)"},
                             "5XX": {"model": ErrorResponse, "description": "Failed (OpenAI-shaped error)"}})
    app.state.gateway = gateway
    app.state.trials = trials
    app.add_middleware(HotRoutes, gateway=gateway)  # innermost: inside the body limit and the request id's note
    app.add_middleware(BodyLimit, limit=config.gateway.max_body_bytes, gateway=gateway)
    app.add_middleware(RequestIdNote, paths=[api.path for api in APIS.values()])
    _add_error_handlers(app)
    for router in (openai.router, anthropic.router, monitoring.router):
        app.include_router(router)
    # The forwarder reads the API families' bodies itself; the admin APIs' body models are checked first.
    for router in (admin.router, trials_admin.router):
        app.include_router(router, dependencies=[Depends(valid_text_body)])
    return app
