"""Errors in OpenAI's shape, so the official client raises its usual exception with our message.

Every failure the gateway itself produces is a `GatewayError`: an HTTP status, a message a
user can act on, a stable `code` (also the `reason` label of the error metrics) and, for
"try again later" failures, a `Retry-After` header. It subclasses Starlette's HTTPException
so FastAPI's body parsing lets it through unchanged.
"""

from __future__ import annotations

from typing import Any

from fastapi.responses import JSONResponse
from pydantic import BaseModel
from starlette.exceptions import HTTPException

ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    405: "invalid_request_error",
    409: "conflict_error",
    413: "invalid_request_error",
    422: "invalid_request_error",
    429: "rate_limit_error",
    499: "client_closed_request",
    500: "internal_server_error",
    502: "upstream_error",
    503: "service_unavailable",
    504: "upstream_timeout",
}
MESSAGE_MAX = 2000


class ErrorObject(BaseModel):
    message: str
    type: str
    code: str


class ErrorResponse(BaseModel):
    """Every error the gateway answers (its OpenAPI schema declares it for every 4xx and 5xx)."""

    error: ErrorObject


def error_type(status: int) -> str:
    return ERROR_TYPES.get(status, "invalid_request_error" if status < 500 else "internal_server_error")


def bounded_message(message: str) -> str:
    """A message cut to MESSAGE_MAX characters: a backstop for any that quotes what a client or an engine sent."""
    return message if len(message) <= MESSAGE_MAX else f"{message[:MESSAGE_MAX]}… (cut)"


def error_body(message: str, code: str, status: int, type_: str | None = None) -> dict[str, Any]:
    """The OpenAI error object; the message is bounded, and escaped where it is not valid Unicode (an
    engine's may not be) so the error can always be sent."""
    text = bounded_message(message).encode("utf-8", "backslashreplace").decode("utf-8")
    return {"error": {"message": text, "type": type_ or error_type(status), "code": code}}


class GatewayError(HTTPException):
    def __init__(self, status: int, message: str, code: str, retry_after_s: int | None = None,
                 headers: dict[str, str] | None = None):
        merged = dict(headers or {})
        if retry_after_s is not None:
            merged["Retry-After"] = str(retry_after_s)
        super().__init__(status_code=status, detail=message, headers=merged or None)
        self.message = message
        self.code = code

    def response(self) -> JSONResponse:
        return JSONResponse(error_body(self.message, self.code, self.status_code), self.status_code,
                            headers=self.headers)


def unavailable(message: str, retry_after_s: int) -> GatewayError:
    """503 with a retry hint: the engine is down, restarting, or not ready for this adapter."""
    return GatewayError(503, message, "engine_unavailable", retry_after_s=retry_after_s)
