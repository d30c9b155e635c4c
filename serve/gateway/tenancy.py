"""Who a model API request is, and whether it may run now: the client key, the workspace it is
for, its fair share (serve/gateway/fairshare.py) and an engine slot.

`Tenancy.caller` reads the key (`Authorization: Bearer KEY` or `x-api-key: KEY`) and decides the
workspace every later step uses (capture, canary stickiness, trials, shadow, metric labels):

* with a keys file: no key or an unknown one → 401; a key sent in the URL → 401 (URLs are kept by
  proxies and access logs: the error says to make a new key); a workspace-bound key with another
  `X-Workspace-Id` → 403, never re-labelled; a service key names a workspace it may (else 403) or
  none;
* without one (a loopback-only gateway): the `X-Workspace-Id` header, as sent.

`Tenancy.admit` then charges the caller's share and waits for an engine slot; over a limit it
raises 429 with `Retry-After`. The `Admission` it returns is released exactly once when the
request has ended (for a stream, when the relay closes), which settles the token estimate.
"""

from __future__ import annotations

import asyncio
import hmac
import logging
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from core.tomlfile import ConfigError
from serve.gateway.config import GatewayConfig
from serve.gateway.errors import GatewayError
from serve.gateway.fairshare import (
    AdmissionTicket,
    Clock,
    FairShare,
    ShareLimits,
    SlotQueue,
    Throttled,
    estimate_tokens,
)
from serve.gateway.keys import KEY_MAX_CHARS, KeysFile
from serve.gateway.metrics import GatewayMetrics

log = logging.getLogger(__name__)
QUERY_KEY_NAMES = frozenset({"key", "api_key", "api-key", "apikey", "x-api-key", "token", "access_token",
                             "auth", "authorization", "bearer"})
"""Query parameters that carry a key by their name (any parameter whose value is a key is refused too)."""
HOW = "send the key as `Authorization: Bearer KEY` or `x-api-key: KEY`"


@dataclass(frozen=True)
class Caller:
    """Who a request is: its workspace (what every store and label uses), its share and limits."""

    workspace: str | None
    share: str
    limits: ShareLimits
    key: str | None = None
    """The key entry's name (never the key); None without a keys file."""


def _refused(status: int, message: str, code: str) -> GatewayError:
    headers = {"WWW-Authenticate": 'Bearer realm="worker-tier"'} if status == 401 else None
    return GatewayError(status, message, code, headers=headers)


def presented_key(headers: Mapping[str, str]) -> str | None:
    """The key a request sends, or None; two different keys are refused (which one was meant?)."""
    bearer = None
    authorization = headers.get("authorization")
    if authorization:
        scheme, _, value = authorization.strip().partition(" ")
        bearer = value.strip() if scheme.lower() == "bearer" else None
    api_key = headers.get("x-api-key") or None
    if bearer and api_key and not hmac.compare_digest(bearer.encode("latin-1", "replace"),
                                                      api_key.encode("latin-1", "replace")):
        raise _refused(401, f"the request sends two different keys (Authorization and x-api-key); {HOW}, once",
                       "two_keys")
    return bearer or api_key


class Tenancy:
    """The keys in force, the fair share and the engine slots of one gateway."""

    def __init__(self, config: GatewayConfig, metrics: GatewayMetrics, clock: Clock = time.monotonic) -> None:
        settings = config.fair_share
        self.settings = settings
        self.defaults = settings.limits()
        self.metrics = metrics
        path = config.auth.keys_file
        self.keys = KeysFile(path, self.defaults) if path is not None else None
        self.share = FairShare(clock, settings.retry_after_s)
        self.slots = SlotQueue(settings.engine_slots) if settings.engine_slots is not None else None
        self._waiters: dict[int, asyncio.Future[None]] = {}
        if self.keys is not None:
            metrics.keys_loaded.set(len(self.keys.ring))

    # --- who ------------------------------------------------------------------------------

    def caller(self, headers: Mapping[str, str], query: Iterable[tuple[str, str]], workspace: str | None) -> Caller:
        """The caller of a request with these headers, query parameters and `X-Workspace-Id` (already a name)."""
        if self.keys is None:
            return Caller(workspace, f"ws:{workspace or ''}", self.defaults)
        try:
            return self._authenticate(headers, query, workspace)
        except GatewayError as exc:
            self.metrics.auth_refused.labels(exc.code).inc()
            raise

    def _authenticate(self, headers: Mapping[str, str], query: Iterable[tuple[str, str]],
                      workspace: str | None) -> Caller:
        assert self.keys is not None
        ring = self.keys.ring  # one file's keys for the whole request
        for name, value in query:
            if name.lower() in QUERY_KEY_NAMES or (len(value) <= KEY_MAX_CHARS and ring.find(value)):
                raise _refused(401, "a key was sent in the URL, which proxies and access logs keep: if it is a "
                                    f"real key, make a new one and remove this one; {HOW}", "key_in_query")
        presented = presented_key(headers)
        if presented is None:
            raise _refused(401, f"this gateway needs a client key: {HOW}", "missing_key")
        key = ring.find(presented)
        if key is None:
            raise _refused(401, "the client key is not known (wrong, or removed from the keys file)", "unknown_key")
        if key.workspace is not None:
            if workspace is not None and workspace != key.workspace:
                raise _refused(403, f"this key is workspace {key.workspace!r}'s; it cannot send requests for "
                                    f"{workspace!r} (leave X-Workspace-Id out, or send {key.workspace!r})",
                               "workspace_mismatch")
            return Caller(key.workspace, key.share, key.limits, key.name)
        if workspace is not None and not key.may_name(workspace):
            raise _refused(403, f"service key {key.name!r} may not name workspace {workspace!r}",
                           "workspace_not_allowed")
        return Caller(workspace, key.share, key.limits, key.name)

    # --- how much -------------------------------------------------------------------------

    async def admit(self, caller: Caller, body: Mapping[str, Any], body_bytes: int) -> Admission:
        """Charge the caller's share and hold an engine slot (waiting for one, in fair order), or 429."""
        label = self.metrics.bounded("workspace", caller.workspace or "")
        tokens = estimate_tokens(body, body_bytes, self.settings.default_max_tokens)
        decision = self.share.admit(caller.share, caller.limits, tokens)
        if isinstance(decision, Throttled):
            raise self._throttled(caller, label, decision)
        admission = Admission(self, decision, label)
        self.metrics.in_flight.labels(label).inc()
        try:
            admission.slot = await self._slot(caller)
        except BaseException:
            admission.release(0)  # it never ran: its tokens are given back
            raise
        return admission

    def _throttled(self, caller: Caller, label: str, decision: Throttled) -> GatewayError:
        self.metrics.throttled.labels(label, decision.reason).inc()
        what = {"in_flight": "requests in flight", "requests": "requests per second", "tokens": "tokens per minute",
                "engine_busy": "the wait for an engine slot"}[decision.reason]
        whose = f"key {caller.key!r}" if caller.share.startswith("key:") else f"workspace {caller.workspace or ''!r}"
        return GatewayError(429, f"over the fair share of {whose} ({what}); retry in {decision.retry_after_s} s",
                            f"throttled_{decision.reason}", retry_after_s=decision.retry_after_s)

    async def _slot(self, caller: Caller) -> int | None:
        if self.slots is None:
            return None
        ticket, granted = self.slots.request(caller.share, caller.limits.weight)
        if granted:
            return ticket
        waiter = asyncio.get_running_loop().create_future()
        self._waiters[ticket] = waiter
        self.metrics.slots_waiting.set(self.slots.waiting)
        try:
            await asyncio.wait_for(waiter, self.settings.slot_wait_s)
        except BaseException as exc:  # timed out, or the client left: the ticket is given up either way
            self._waiters.pop(ticket, None)
            self._wake(self.slots.cancel(ticket))
            if isinstance(exc, TimeoutError):
                label = self.metrics.bounded("workspace", caller.workspace or "")
                raise self._throttled(caller, label, Throttled("engine_busy", self.settings.retry_after_s)) from None
            raise
        return ticket

    def _wake(self, granted: list[int]) -> None:
        for ticket in granted:
            waiter = self._waiters.pop(ticket, None)
            if waiter is not None and not waiter.done():
                waiter.set_result(None)
        if self.slots is not None:
            self.metrics.slots_waiting.set(self.slots.waiting)

    def free(self, slot: int) -> None:
        assert self.slots is not None
        self._wake(self.slots.release(slot))

    # --- the keys file --------------------------------------------------------------------

    async def reload(self) -> bool:
        """Read the keys file again if it changed (in a worker thread); a bad file keeps the keys in force."""
        if self.keys is None or not self.keys.changed():
            return False
        try:
            ring = await asyncio.to_thread(self.keys.read)
        except ConfigError as exc:
            log.error("keys file not reloaded, the %d keys in force are kept: %s", len(self.keys.ring), exc)
            self.metrics.keys_reloads.labels("refused").inc()
            return False
        self.keys.ring = ring
        self.metrics.keys_reloads.labels("loaded").inc()
        self.metrics.keys_loaded.set(len(ring))
        log.info("keys file reloaded: %d keys", len(ring))
        return True


class Admission:
    """A request's place in its share and its engine slot; `release` gives both back, once."""

    def __init__(self, tenancy: Tenancy, ticket: AdmissionTicket, label: str) -> None:
        self.tenancy, self.ticket, self.label = tenancy, ticket, label
        self.slot: int | None = None
        self.released = False

    def release(self, used_tokens: int | None = None) -> None:
        """The request ended; `used_tokens` (from its answer's usage, when known) settles its estimate."""
        if self.released:
            return
        self.released = True
        self.tenancy.share.release(self.ticket, used_tokens)
        self.tenancy.metrics.in_flight.labels(self.label).dec()
        if self.slot is not None:
            self.tenancy.free(self.slot)


class QueryFreeAccessLog(logging.Filter):
    """uvicorn's access log without query strings: a key sent in a URL must not be written to a log."""

    def filter(self, record: logging.LogRecord) -> bool:
        args = record.args
        if isinstance(args, tuple) and len(args) >= 3 and isinstance(args[2], str) and "?" in args[2]:
            record.args = (*args[:2], args[2].split("?", 1)[0] + "?…", *args[3:])
        return True


ACCESS_LOG_FILTER = QueryFreeAccessLog()
