"""The vLLM replicas behind the gateway: one aiohttp pool, health probes, adapter load/unload.

A replica is healthy when `/health` and `/v1/models` answer. A refused connection (during a
request or a probe) marks it unhealthy at once, so the next request skips it without waiting
for the next probe; a probe that times out or gets an error answer takes a healthy replica out
only after `unhealthy_threshold` of them in a row, since a CPU engine busy on a long prefill can
be slow to answer `/health` and still serve. The probe loop (run by the app) brings it back.
"""

from __future__ import annotations

import itertools
import logging
from collections.abc import Sequence
from dataclasses import dataclass, field

import aiohttp

from core.jsonfile import parse_problem
from serve.errors import ServeError
from serve.gateway.config import UpstreamConfig
from serve.gateway.registry import now
from serve.gateway.routing import replica_order

log = logging.getLogger(__name__)


class UpstreamCallError(ServeError, RuntimeError):
    """An engine refused or failed an admin call (load/unload); the message has the engine's reason."""

    def __init__(self, upstream: str, message: str, status: int | None = None):
        super().__init__(f"upstream {upstream}: {message}")
        self.status = status


@dataclass
class Upstream:
    name: str
    url: str
    healthy: bool = False
    busy: int = 0  # requests in flight through this gateway
    last_error: str | None = None
    checked_at: str | None = None
    models: dict[str, str | None] = field(default_factory=dict)  # served id -> root (adapter path)
    version: str | None = None  # the engine's own `/version`, when it answers one
    max_model_len: int | None = None  # the engine's context window (vLLM's /v1/models says it)
    failed_probes: int = 0  # in a row, since it last passed one

    def public(self) -> dict[str, object]:
        return {"name": self.name, "url": self.url, "healthy": self.healthy, "busy": self.busy,
                "last_error": self.last_error, "checked_at": self.checked_at, "models": sorted(self.models)}


# Nothing listening (or no answer to the connect itself): the engine is down, not slow. The request
# path and the probes both take a replica out at once on these.
REFUSED = (aiohttp.ClientConnectorError, aiohttp.ConnectionTimeoutError)


@dataclass(frozen=True)
class ProbeFailure:
    reason: str
    refused: bool  # nothing listening: the engine is down, not slow


def _error_message(status: int, text: str) -> str:
    body, _ = parse_problem(text)
    error = body.get("error") if isinstance(body, dict) else None
    message = (error.get("message") if isinstance(error, dict) else None) or (
        body.get("message") if isinstance(body, dict) else None) or text
    return f"HTTP {status}: {str(message).strip()[:500]}"


class UpstreamPool:
    def __init__(self, configs: Sequence[UpstreamConfig], connect_timeout_s: float, probe_timeout_s: float,
                 unhealthy_threshold: int):
        self.upstreams = [Upstream(c.name, c.url.rstrip("/")) for c in configs]
        self.connect_timeout_s = connect_timeout_s
        self.probe_timeout_s = probe_timeout_s
        self.unhealthy_threshold = unhealthy_threshold
        self._turn = itertools.count()
        self._session: aiohttp.ClientSession | None = None

    @property
    def session(self) -> aiohttp.ClientSession:
        assert self._session is not None, "the pool is not open"
        return self._session

    async def open(self) -> None:
        # The engines set no cookies, and one jar shared by every client's requests must hold none: no jar to
        # filter on each request.
        self._session = aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=1024), auto_decompress=False,
                                              cookie_jar=aiohttp.DummyCookieJar())

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()

    def healthy(self) -> list[Upstream]:
        """The replicas whose last probe succeeded."""
        return [u for u in self.upstreams if u.healthy]

    def order(self, key: str | None) -> list[Upstream]:
        """Healthy replicas in the order to try them for this workspace/session key."""
        healthy = {u.name: u for u in self.healthy()}
        busy = {u.name: u.busy for u in healthy.values()}
        return [healthy[n] for n in replica_order(list(healthy), key, busy, next(self._turn))]

    def mark(self, upstream: Upstream, healthy: bool, error: str | None = None) -> None:
        """Record a probe's or a request's verdict on a replica, logging only the changes."""
        if upstream.healthy and not healthy:
            log.warning("upstream %s is unhealthy: %s", upstream.name, error)
        elif healthy and not upstream.healthy:
            log.info("upstream %s is healthy", upstream.name)
        upstream.healthy = healthy
        upstream.last_error = error
        if healthy:
            upstream.failed_probes = 0

    def probe_failed(self, upstream: Upstream, failure: ProbeFailure) -> None:
        """Count a failed probe; it takes the replica out when nothing listens or the count reaches the threshold."""
        upstream.failed_probes += 1
        if failure.refused or upstream.failed_probes >= self.unhealthy_threshold:
            self.mark(upstream, False, failure.reason)
        else:
            upstream.last_error = (f"{failure.reason} ({upstream.failed_probes} of {self.unhealthy_threshold} "
                                   "failed probes in a row)")

    def _timeout(self, total: float) -> aiohttp.ClientTimeout:
        return aiohttp.ClientTimeout(total=total, connect=min(self.connect_timeout_s, total))

    async def probe(self, upstream: Upstream) -> ProbeFailure | None:
        """Refresh `upstream.models`; returns None when healthy, else what was wrong."""
        upstream.checked_at = now()
        try:
            async with self.session.get(f"{upstream.url}/health", timeout=self._timeout(self.probe_timeout_s)) as resp:
                if resp.status != 200:
                    return ProbeFailure(f"/health answered HTTP {resp.status}", refused=False)
            async with self.session.get(f"{upstream.url}/v1/models",
                                        timeout=self._timeout(self.probe_timeout_s)) as resp:
                if resp.status != 200:
                    return ProbeFailure(f"/v1/models answered HTTP {resp.status}", refused=False)
                body = await resp.json(content_type=None)
            upstream.models = {m["id"]: m.get("root") for m in body["data"]}
            windows = [w for m in body["data"] if isinstance(w := m.get("max_model_len"), int) and w > 0]
            upstream.max_model_len = min(windows, default=None)
        except (TimeoutError, aiohttp.ClientError, ValueError, KeyError, TypeError) as exc:
            refused = isinstance(exc, REFUSED)
            return ProbeFailure(f"{type(exc).__name__}: {exc}".rstrip(": "), refused)
        upstream.version = await self._version(upstream)
        return None

    async def _version(self, upstream: Upstream) -> str | None:
        """The engine's `/version` (vLLM answers `{"version": ...}`); None when it says none.
        Not part of health: an engine without it still serves."""
        try:
            async with self.session.get(f"{upstream.url}/version",
                                        timeout=self._timeout(self.probe_timeout_s)) as resp:
                answer = await resp.json(content_type=None) if resp.status == 200 else None
        except (aiohttp.ClientError, TimeoutError, ValueError):
            return None
        version = answer.get("version") if isinstance(answer, dict) else None
        return version if isinstance(version, str) else None

    async def load_adapter(self, upstream: Upstream, name: str, path: str, timeout_s: float) -> bool:
        """Load `name` from `path`; False when the engine already serves that name from that path.

        The same name from another path is refused: loading it would serve other weights under
        a name the engine (and its prefix cache) already knows.
        """
        failure = await self.probe(upstream)
        if failure is not None:
            raise UpstreamCallError(upstream.name, failure.reason)
        if name in upstream.models:
            if upstream.models[name] == path:
                return False
            raise UpstreamCallError(upstream.name, f"already serves {name!r} from {upstream.models[name]!r}", 409)
        await self._post(upstream, "/v1/load_lora_adapter", {"lora_name": name, "lora_path": path}, timeout_s)
        upstream.models[name] = path
        return True

    async def unload_adapter(self, upstream: Upstream, name: str, timeout_s: float) -> None:
        """Unload an adapter from one engine; one the engine does not have counts as unloaded."""
        try:
            await self._post(upstream, "/v1/unload_lora_adapter", {"lora_name": name}, timeout_s)
        except UpstreamCallError as exc:
            if exc.status != 404:  # already gone is what we wanted
                raise
        upstream.models.pop(name, None)

    async def _post(self, upstream: Upstream, path: str, body: dict[str, str], timeout_s: float) -> None:
        try:
            async with self.session.post(f"{upstream.url}{path}", json=body, timeout=self._timeout(timeout_s)) as resp:
                text = await resp.text()
                if resp.status != 200:
                    raise UpstreamCallError(upstream.name, _error_message(resp.status, text), resp.status)
        except (TimeoutError, aiohttp.ClientError) as exc:
            raise UpstreamCallError(upstream.name, f"{type(exc).__name__}: {exc}".rstrip(": ")) from exc

    async def metrics_text(self, upstream: Upstream, timeout_s: float) -> str | None:
        """The engine's own Prometheus text, or None when it cannot be read now."""
        try:
            async with self.session.get(f"{upstream.url}/metrics", timeout=self._timeout(timeout_s)) as resp:
                return await resp.text() if resp.status == 200 else None
        except (TimeoutError, aiohttp.ClientError):
            return None
