"""The gateway's admin API (serve/gateway/endpoints/admin.py) from the command line: one request, its answer read into
the caller's model, every failure one sentence. `worker-serve adapter register|load|list` and `worker-serve
trial ...` both call it, so both read the API's errors alike and neither follows a redirect with the token."""

from __future__ import annotations

from typing import Any, TypeVar

import httpx
from pydantic import BaseModel, ConfigDict, ValidationError

from core.names import excerpt
from serve.errors import ServeError

Answer = TypeVar("Answer", bound=BaseModel)


class AdminAnswer(BaseModel):
    """The fields of an admin answer a command reads; the gateway may add others."""

    model_config = ConfigDict(extra="ignore")


class AdminErrorBody(AdminAnswer):
    message: str
    code: str | None = None


class AdminErrorAnswer(AdminAnswer):
    error: AdminErrorBody


def admin_call(gateway: str, path: str, token: str, method: str, model: type[Answer],
               body: dict[str, Any] | None = None, *,
               timeout: httpx.Timeout | float, what: str, error: type[ServeError] = ServeError,
               hint_401: str = "") -> Answer:
    """`method` on the gateway's `path` with the bearer `token`, its answer as `model`; else `error` with one
    line: the gateway unreachable, its refusal (HTTP status, code and message, `hint_401` added on a 401), or
    an answer that is not `what` (the API's name, as the user knows it)."""
    url = f"{gateway.rstrip('/')}{path}"
    try:
        response = httpx.request(method, url, json=body, headers={"Authorization": f"Bearer {token}"},
                                 timeout=timeout, follow_redirects=False)
    except (httpx.HTTPError, httpx.InvalidURL) as exc:
        raise error(f"the gateway at {gateway} cannot be reached ({url}): {exc}") from exc
    status = response.status_code
    if status >= 300:
        try:
            refusal = AdminErrorAnswer.model_validate_json(response.content).error
        except ValidationError:
            raise error(f"the gateway at {gateway} answered HTTP {status}, not with {what}'s error: "
                        f"{excerpt(response.text, 200)}") from None
        code = f" {refusal.code}" if refusal.code else ""
        hint = f"; {hint_401}" if status == 401 and hint_401 else ""
        raise error(f"the gateway refused (HTTP {status}{code}): {' '.join(refusal.message.split())}{hint}")
    try:
        return model.model_validate_json(response.content)
    except ValidationError:
        raise error(f"the gateway at {gateway} answered HTTP {status} with something that is not {what}'s answer: "
                    f"{excerpt(response.text, 200)}") from None
