"""The running gateway, for a handler: the app holds it (`app.state.gateway`, set by `create_app`), so the
routers need no module-level state and two apps in one process never share one."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request

from serve.gateway.service import Gateway


def gateway_of(request: Request) -> Gateway:
    gateway: Gateway = request.app.state.gateway
    return gateway


async def gateway_dependency(request: Request) -> Gateway:
    """`gateway_of` as a dependency: async, so FastAPI calls it on the event loop (a plain `def` dependency runs
    in its thread pool: a thread hop on every request)."""
    return gateway_of(request)


GatewayDep = Annotated[Gateway, Depends(gateway_dependency)]
