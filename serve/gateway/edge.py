"""What the gateway refuses at its edge, before anything reaches a store, a log, a metric label or
a response header: bodies that are not valid Unicode text, and header values that should be names.

A body must be UTF-8 (RFC 8259 §8.1) and may not hold a lone surrogate anywhere (`"\\ud800"` is
valid JSON but no text: SQLite, the logs and every UTF-8 encoder refuse it later, far from the
request that brought it). Python's `json.loads` of bytes would accept UTF-16 and surrogates
encoded as UTF-8 bytes, so the body is decoded strictly first. The workspace and session headers
pick cohorts, directories and labels, so they must be names (core/names.py), or the request is
refused whole. `X-Request-Id` is the client's correlation id (`acme/s-1#0`, AWS's
`Root=1-…;Parent=…`), passed on and never a reason to refuse: any visible ASCII (0x21–0x7E) up to
200 characters is kept as sent; anything else is replaced by the gateway's own id, and the response
says so in `X-Worker-Request-Id-Replaced: invalid`. A client that leaves before its answer ends the request
(`unless_client_leaves`: the engine request is cancelled, 499).
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Awaitable, Collection, Iterable, Iterator
from typing import Any, TypeVar

from fastapi import Request
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from core.jsonfile import parse_problem
from core.names import BadNameError, check_name, excerpt
from serve.gateway.errors import GatewayError

REQUEST_ID_HEADER = "X-Request-Id"
REQUEST_ID_REPLACED_HEADER = "X-Worker-Request-Id-Replaced"
REQUEST_ID_MAX_CHARS = 200
_REQUEST_ID = re.compile(rf"[\x21-\x7e]{{1,{REQUEST_ID_MAX_CHARS}}}")
WORKSPACE_HEADER = "X-Workspace-Id"
SESSION_HEADER = "X-Session-Id"
# Only a \u escape can put a surrogate into text decoded strictly from UTF-8: the walk over the
# parsed body runs only when the raw text has one (an escaped non-BMP character, or an attack).
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")


def _is_text(value: str) -> bool:
    if value.isascii():
        return True
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _strings(value: Any, where: str) -> Iterator[tuple[str, str]]:
    """Every string of a parsed JSON value (keys too) with where it is; iterative, as bodies nest deeply."""
    stack = [(value, where)]
    while stack:
        item, at = stack.pop()
        if isinstance(item, str):
            yield item, at
        elif isinstance(item, dict):
            for key, child in item.items():
                yield key, f"a key of {at}"
                stack.append((child, f"{at}.{key}" if _is_text(key) and len(key) <= 40 else f"{at}.{excerpt(key)}"))
        elif isinstance(item, list):
            stack.extend((child, f"{at}[{i}]") for i, child in enumerate(item))


def read_text(raw: bytes) -> str:
    """The body as text: strict UTF-8, else 400 `invalid_unicode` naming the byte."""
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise GatewayError(400, f"the request body is not UTF-8 text (byte {exc.start}: {exc.reason})",
                           "invalid_unicode") from exc


def check_text(text: str, parsed: Any) -> None:
    """400 `invalid_unicode` when a string of the parsed body (`text` as sent) holds a lone surrogate."""
    if not _SURROGATE_ESCAPE.search(text):
        return
    for value, where in _strings(parsed, "body"):
        if not _is_text(value):
            raise GatewayError(400, f"{where} is not valid Unicode text (it holds a lone surrogate escape, "
                                    "e.g. \\ud800)", "invalid_unicode")


def parse_json(raw: bytes) -> Any:
    """A JSON body that is valid Unicode text, else a 400 in OpenAI's shape."""
    text = read_text(raw)
    parsed, problem = parse_problem(text)
    if problem is not None:
        raise GatewayError(400, f"the request body is not readable JSON: {problem}", "invalid_json")
    check_text(text, parsed)
    return parsed


async def valid_text_body(request: Request) -> None:
    """A dependency of every JSON API route: its body is refused before validation when it is not text.

    FastAPI parses JSON bodies leniently (UTF-16, surrogates), so routes with a body model check it
    here; an unparsable body is left to FastAPI's own 422."""
    raw = await request.body()
    if not raw:
        return
    text = read_text(raw)
    if _SURROGATE_ESCAPE.search(text):
        parsed, problem = parse_problem(text)
        if problem is None:
            check_text(text, parsed)


def header_name(request: Request, header: str) -> str | None:
    """A header that must be a name when given (it is echoed, stored or a label), else 400 `invalid_header`;
    an empty one counts as not given."""
    value = request.headers.get(header)
    if not value:
        return None
    try:
        return check_name(value, f"the {header} header")
    except BadNameError as exc:
        raise GatewayError(400, str(exc), "invalid_header") from exc


def is_request_id(value: str) -> bool:
    """Whether a client's `X-Request-Id` is kept as sent: 1–200 characters of visible ASCII."""
    return _REQUEST_ID.fullmatch(value) is not None


def client_request_id(request: Request) -> str | None:
    """The client's `X-Request-Id` when it is kept as sent; None when none was sent (or an empty
    one) or it is replaced by the gateway's own id (`RequestIdNote` then says so)."""
    value = request.headers.get(REQUEST_ID_HEADER)
    return value if value and is_request_id(value) else None


class RequestIdNote:
    """Adds `X-Worker-Request-Id-Replaced: invalid` to the response of an OpenAI request whose
    `X-Request-Id` was replaced by the gateway's own id (the proxy echoes that one)."""

    def __init__(self, app: ASGIApp, paths: Collection[str]) -> None:
        self.app = app
        self.paths = frozenset(paths)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"] not in self.paths or not _replaced(scope["headers"]):
            await self.app(scope, receive, send)
            return

        async def noted(message: Message) -> None:
            if message["type"] == "http.response.start":
                message = {**message, "headers": [*message.get("headers", []),
                                                  (REQUEST_ID_REPLACED_HEADER.lower().encode(), b"invalid")]}
            await send(message)

        await self.app(scope, receive, noted)


def _replaced(headers: Iterable[tuple[bytes, bytes]]) -> bool:
    name = REQUEST_ID_HEADER.lower().encode()
    for key, value in headers:  # the first one, as `request.headers.get` reads it (as latin-1)
        if key == name:
            return bool(value) and not is_request_id(value.decode("latin-1"))
    return False


T = TypeVar("T")


async def unless_client_leaves(request: Request, work: Awaitable[T]) -> T:
    """`work`'s result, unless the client disconnects first: then `work` is cancelled, which
    closes the engine connection (vLLM aborts the generation), and the request ends as 499. `work` runs in
    the request's own task (one watcher task per call, no second task and no `asyncio.wait`)."""
    current = asyncio.current_task()
    assert current is not None
    left = False

    async def watch() -> None:
        nonlocal left
        await _disconnected(request)
        left = True
        current.cancel()

    watcher = asyncio.ensure_future(watch())
    try:
        return await work
    except asyncio.CancelledError:
        if not left:
            raise
        current.uncancel()
        raise GatewayError(499, "the client closed the connection before the answer", "client_disconnected") from None
    finally:
        watcher.cancel()


async def _disconnected(request: Request) -> None:
    while (await request.receive())["type"] != "http.disconnect":
        continue
