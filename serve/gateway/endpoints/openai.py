"""The OpenAI API family: chat completions, completions, the Responses API and the model list.

The three generation endpoints forward the raw body through the shared forwarder (serve/gateway/proxy.py), declared
from one table (`declare_forwarded`); their OpenAPI bodies document only what the gateway itself reads. The table
of what each does is in serve/app.py.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request

from serve.gateway.base_lineage import base_lineage
from serve.gateway.endpoints.bodies import MODEL, STREAM, declare_forwarded
from serve.gateway.endpoints.dependencies import GatewayDep

CHAT_BODY: dict[str, Any] = {
    "type": "object", "required": ["messages"],
    "properties": {
        "model": MODEL, "stream": STREAM, "max_tokens": {"type": "integer", "minimum": 1},
        "messages": {"type": "array", "items": {
            "type": "object", "required": ["role"],
            "properties": {"role": {"enum": ["system", "user", "assistant", "tool"]},
                           "content": {"type": ["string", "null"]}, "tool_call_id": {"type": "string"}}}},
        "tools": {"type": "array", "items": {
            "type": "object", "required": ["type", "function"],
            "properties": {"type": {"const": "function"}, "function": {
                "type": "object", "required": ["name"],
                "properties": {"name": {"type": "string"}, "parameters": {"type": "object"}}}}}}}}
COMPLETION_BODY: dict[str, Any] = {
    "type": "object", "required": ["prompt"],
    "properties": {"model": MODEL, "stream": STREAM, "prompt": {"type": "string"},
                   "max_tokens": {"type": "integer", "minimum": 1}}}
RESPONSES_BODY: dict[str, Any] = {
    "type": "object", "required": ["input"],
    "properties": {"model": MODEL, "stream": STREAM, "instructions": {"type": "string"},
                   "input": {"anyOf": [{"type": "string"}, {"type": "array", "items": {"type": "object"}}]},
                   "max_output_tokens": {"type": "integer", "minimum": 1},
                   "tools": {"type": "array", "items": {"type": "object", "required": ["type"]}}}}
ANSWER: dict[int | str, dict[str, Any]] = {200: {"description": "The engine's answer, or its SSE stream", "content": {
    "application/json": {"schema": {"type": "object"}},
    "text/event-stream": {"schema": {"type": "object", "required": ["data"], "properties": {"data": {
        "type": "string", "description": "a JSON chunk, an OpenAI-shaped error, or [DONE]"}}}}}}}

router = APIRouter()


declare_forwarded(router, {"chat": CHAT_BODY, "completions": COMPLETION_BODY, "responses": RESPONSES_BODY},
                  ANSWER)


@router.get("/v1/models")
async def models(request: Request, gw: GatewayDep) -> dict[str, object]:
    # Like vLLM's own --api-key and OpenAI's and Anthropic's model lists: with keys, a caller needs one.
    gw.tenancy.caller(request.headers, request.query_params.multi_items(), None)
    state = gw.registry.state
    data: list[dict[str, object]] = []
    under = await base_lineage(gw.pool, state.base)  # the weights under every entry: a base, or an adapter's
    for route in state.routes.values():
        production = state.adapters.get(route.production)
        data.append({"id": route.name, "object": "model", "created": 0, "owned_by": "worker-tier",
                     "kind": "route", "production": route.production,
                     "production_fingerprint": production and production.fingerprint,
                     "production_root": production and production.path, "previous": route.previous,
                     "canary": route.canary and {"candidate": route.canary.candidate,
                                                 "percent": route.canary.percent,
                                                 "sticky_by": route.canary.sticky_by},
                     "shadow": route.shadow and {"candidate": route.shadow.candidate,
                                                 "sample_rate": route.shadow.sample_rate}, **under})
    data.append({"id": state.base, "object": "model", "created": 0, "owned_by": "worker-tier", "kind": "base",
                 **under})
    for adapter in state.loaded():
        data.append({"id": adapter.name, "object": "model", "created": 0, "owned_by": "worker-tier",
                     "kind": "adapter", "parent": state.base, "registered_at": adapter.registered_at,
                     "fingerprint": adapter.fingerprint, "root": adapter.path, **under})
    return {"object": "list", "data": data}
