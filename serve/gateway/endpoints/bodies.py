"""The OpenAPI shape of what the gateway itself reads from an API body (`model`, `stream`, and the fields that
capture, the guard and the token clamp read); every other field is the engine's, so the shapes stay open."""

from __future__ import annotations

from typing import Any

from core.names import NAME_PATTERN

MODEL: dict[str, Any] = {"type": "string", "pattern": NAME_PATTERN,
                         "description": "a route, an adapter version or the base model"}
STREAM: dict[str, Any] = {"type": ["boolean", "null"]}


def openapi_body(schema: dict[str, Any]) -> dict[str, Any]:
    """A route's `openapi_extra`: the body is read raw (and forwarded), so FastAPI would not document it."""
    return {"requestBody": {"required": True, "content": {"application/json": {"schema": schema}}}}
