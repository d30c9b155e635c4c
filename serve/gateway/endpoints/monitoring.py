"""What operators and tools read about the gateway itself: `/health` (for a load balancer), `/metrics`
(Prometheus text: serve/gateway/metrics.py and serve/gateway/gpu.py) and `/version` (the engines' versions,
which a replay run records)."""

from __future__ import annotations

from fastapi import APIRouter, Response
from fastapi.responses import JSONResponse, PlainTextResponse
from prometheus_client import CONTENT_TYPE_LATEST
from pydantic import BaseModel

from serve.gateway.endpoints.dependencies import GatewayDep


class Health(BaseModel):
    status: str
    upstreams: dict[str, bool]


router = APIRouter()


@router.get("/version")
async def version(gw: GatewayDep) -> dict[str, object]:
    """The engines' versions, as vLLM's `/version` says one (a replay run records it)."""
    engines = {u.name: u.version for u in gw.pool.upstreams}
    known = sorted({v for u in gw.pool.upstreams if u.healthy and (v := u.version) is not None})
    return {"version": ", ".join(known) or None, "engines": engines}


@router.get("/health", responses={200: {"model": Health}, 503: {"model": Health}})
async def health(gw: GatewayDep) -> Response:
    upstreams = {u.name: u.healthy for u in gw.pool.upstreams}
    if any(upstreams.values()):
        return JSONResponse({"status": "ok", "upstreams": upstreams})
    return JSONResponse({"status": "unavailable", "upstreams": upstreams}, 503,
                        headers={"Retry-After": str(gw.retry_after_s)})


@router.get("/metrics", response_class=PlainTextResponse)
async def metrics(gw: GatewayDep) -> Response:
    await gw.scrape_engines()
    return Response(gw.metrics.render(), media_type=CONTENT_TYPE_LATEST)
