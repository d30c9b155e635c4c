"""The running gateway: its registry, upstream pool, metrics and shadow runner, and the loop that
keeps every engine in line with the registry.

Every health tick probes each upstream and re-applies the registry to it: adapters the
registry has loaded but the engine does not list (a fresh or restarted engine) are loaded,
and adapters the registry has unloaded are unloaded. This is what makes a restarted gateway,
or a restarted engine, come back serving the same versions without an admin call. Adapter
files are re-fingerprinted before every load, so changed weights are never served under a
name the engine may still hold prefix-cache blocks for.
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path
from typing import Any

from core.attestation import adapter_fingerprint
from core.hosts import is_loopback
from serve.errors import ServeError
from serve.gateway.capture import Capture
from serve.gateway.config import GatewayConfig
from serve.gateway.errors import GatewayError
from serve.gateway.metrics import GatewayMetrics, parse_engine_metrics
from serve.gateway.prefixcache import PrefixCache
from serve.gateway.registry import Adapter, Registry, files_outside
from serve.gateway.routing import ModelNotFoundError, ModelNotLoadedError, Resolution, resolve
from serve.gateway.shadow import ShadowJob, ShadowRunner
from serve.gateway.tenancy import Tenancy
from serve.gateway.upstreams import Upstream, UpstreamCallError, UpstreamPool

log = logging.getLogger(__name__)
LOG_FLUSH_S = 1.0  # request/shadow log rows reach SQLite within this
# How a shadow job reaches its candidate: `serve.gateway.proxy.send_shadow`, handed in by the app.
# The proxy forwards through the running gateway, so it imports this module and never the reverse.
ShadowSender = Callable[["Gateway", ShadowJob], Awaitable[Any]]


class FilesChangedError(ServeError, RuntimeError):
    """An adapter's files no longer match the fingerprint taken when it was registered."""


class UnprotectedError(ServeError, ValueError):
    """A gateway that would take any caller's word for its workspace on an address others can reach."""


class Gateway:
    def __init__(self, config: GatewayConfig, send_shadow: ShadowSender) -> None:
        if config.auth.keys_file is None and not is_loopback(config.gateway.host):
            raise UnprotectedError(f"gateway.host = {config.gateway.host!r} is reachable from other machines, and "
                                   "without [auth] keys_file any caller could send any X-Workspace-Id: set keys_file "
                                   "(worker-serve keys make), or listen on 127.0.0.1")
        self.config = config
        self.metrics = GatewayMetrics(nvml=config.metrics.nvml)
        self.tenancy = Tenancy(config, self.metrics)  # the keys file is read now: a bad one stops the start
        dropped = self.metrics.log_rows_dropped
        self.registry = Registry(config.gateway.state_db, config.gateway.routes, config.base.served_model_name,
                                 config.gateway.request_log_keep,
                                 on_drop=lambda table, reason: dropped.labels(table, reason).inc())
        self.prefix_cache = PrefixCache(config.prefix_cache_scope, self.registry.prefix_cache_secret())
        self.pool = UpstreamPool(config.upstreams, config.gateway.connect_timeout_s, config.health.timeout_s,
                                 config.health.unhealthy_threshold)
        for upstream in self.pool.upstreams:  # zero from the start, so rate() and alerts see the first failure
            self.metrics.upstream_probe_failures.labels(upstream.name)
        self.shadow = ShadowRunner(config.shadow.queue_size, config.shadow.concurrency, config.shadow.timeout_s,
                                   lambda job: send_shadow(self, job), self.registry, self.metrics)
        self.capture = Capture(config.capture, self.metrics)  # off the production path: serve/gateway/capture.py
        self.lock = asyncio.Lock()  # serialises admin changes and the re-apply of the registry
        # (id, route, candidate) of every trial that has not ended (serve/trials sets it): the route
        # admin refuses changes that would contradict one.
        self.running_trials: Callable[[], list[tuple[str, str, str]]] = list
        self.rng = random.Random()
        self._tasks: list[asyncio.Task[None]] = []
        self._checks: dict[str, asyncio.Task[None]] = {}  # on-demand checks, one per upstream at a time
        self.sync_gauges()

    @property
    def admin_token(self) -> str | None:
        return self.config.admin.resolved_token()

    @property
    def retry_after_s(self) -> int:
        return self.config.gateway.retry_after_s

    async def start(self) -> None:
        await self.pool.open()
        await self.check_upstreams()
        self._tasks = [asyncio.create_task(self._health_loop(), name="health"),
                       asyncio.create_task(self._flush_loop(), name="log-flush"),
                       asyncio.create_task(self._keys_loop(), name="keys-reload")]
        self.shadow.start()
        self.capture.start()

    async def stop(self) -> None:
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        await self.shadow.stop()
        await self.capture.stop()
        await self.pool.close()
        self.metrics.close()
        self.registry.close()

    # --- routing -------------------------------------------------------------------------

    def resolve(self, model: str, workspace: str | None, session: str | None) -> Resolution:
        """`router.resolve` on the current state; an unknown or unloaded model is a 404 in OpenAI's shape."""
        try:
            return resolve(self.registry.state, model, workspace, session)
        except (ModelNotFoundError, ModelNotLoadedError) as exc:
            raise GatewayError(404, str(exc), exc.code) from exc

    def shadow_for(self, resolution: Resolution) -> str | None:
        """The shadow candidate when this production request is sampled for a shadow trial."""
        if resolution.kind != "production":
            return None
        shadow = self.registry.state.routes[resolution.route].shadow
        if shadow is None or self.rng.random() >= shadow.sample_rate:
            return None
        return shadow.candidate

    def sync_gauges(self) -> None:
        """Set the canary-percent gauges from the registry (after every routing change)."""
        routes = self.registry.state.routes.values()
        self.metrics.set_canaries({(r.name, r.canary.candidate): r.canary.percent for r in routes if r.canary})

    # --- engines -------------------------------------------------------------------------

    async def _flush_loop(self) -> None:
        """Write the request/shadow log every LOG_FLUSH_S; a store error is logged and counted
        and the rows wait for the next try (a row that cannot be written is dropped alone by
        the registry): the loop itself never ends on an error."""
        while True:
            await asyncio.sleep(LOG_FLUSH_S)
            try:
                self.registry.flush()
            except Exception as exc:  # noqa: BLE001 (any failure: the next tick tries again)
                log.error("request log: %s", exc)
                self.metrics.log_write_errors.inc()

    async def _keys_loop(self) -> None:
        """Read the keys file again when it changed (serve/gateway/tenancy.py); never ends on an error."""
        if self.tenancy.keys is None:
            return
        while True:
            await asyncio.sleep(self.config.auth.reload_interval_s)
            try:
                await self.tenancy.reload()
            except Exception:  # the loop must outlive any one bad read
                log.exception("keys file reload failed")

    async def _health_loop(self) -> None:
        while True:
            await asyncio.sleep(self.config.health.interval_s)
            try:
                await self.check_upstreams()
            except Exception:  # the loop must outlive any one bad probe
                log.exception("health check failed")

    async def check_upstreams(self) -> None:
        """Probe every engine at once (the health loop's tick)."""
        await asyncio.gather(*(self.check(u) for u in self.pool.upstreams))

    def request_check(self, upstream: Upstream) -> None:
        """Probe and re-apply now (an engine said it does not know an adapter we loaded)."""
        if upstream.name not in self._checks:
            task = asyncio.create_task(self.check(upstream))
            self._checks[upstream.name] = task
            task.add_done_callback(lambda _: self._checks.pop(upstream.name, None))

    async def check(self, upstream: Upstream) -> None:
        """Probe one engine; when it is up but lacks loaded adapters (it restarted), load them again first."""
        failure = await self.pool.probe(upstream)
        if failure is None:
            problems = await self._reapply(upstream) if self._drift(upstream) else []
            self.pool.mark(upstream, True, "; ".join(problems) or None)
        else:
            self.metrics.upstream_probe_failures.labels(upstream.name).inc()
            self.pool.probe_failed(upstream, failure)
        self.metrics.upstream_healthy.labels(upstream.name).set(1.0 if upstream.healthy else 0.0)

    def _drift(self, upstream: Upstream) -> bool:
        adapters = self.registry.state.adapters.values()
        return any((a.state == "loaded") != (a.name in upstream.models) for a in adapters)

    async def _reapply(self, upstream: Upstream) -> list[str]:
        problems = []
        async with self.lock:
            for adapter in self.registry.state.adapters.values():
                try:
                    if adapter.state == "loaded" and adapter.name not in upstream.models:
                        await self.verify_files(adapter)
                        await self.load_on(upstream, adapter)
                        log.info("re-applied adapter %s to upstream %s", adapter.name, upstream.name)
                    elif adapter.state != "loaded" and adapter.name in upstream.models:
                        await self.pool.unload_adapter(upstream, adapter.name, self.config.gateway.request_timeout_s)
                except (UpstreamCallError, FilesChangedError) as exc:
                    log.error("cannot re-apply adapter %s to %s: %s", adapter.name, upstream.name, exc)
                    problems.append(f"{adapter.name}: {exc}")
        return problems

    async def verify_files(self, adapter: Adapter) -> None:
        """Refuse files changed since registration: never serve new weights under an old name,
        nor files that now resolve outside the adapter root."""
        outside = await asyncio.to_thread(files_outside, Path(adapter.path), self.config.adapters.root.resolve())
        if outside:
            raise FilesChangedError(f"files of {adapter.name!r} at {adapter.path} now resolve outside the adapter root "
                                    f"({', '.join(outside)}); register a checked copy under a new version name")
        if await asyncio.to_thread(adapter_fingerprint, Path(adapter.path)) != adapter.fingerprint:
            raise FilesChangedError(f"the files of {adapter.name!r} at {adapter.path} changed since registration; "
                                    "register them under a new version name")

    async def load_on(self, upstream: Upstream, adapter: Adapter) -> bool:
        """Load one registered adapter on one engine (False when it was already there)."""
        return await self.pool.load_adapter(upstream, adapter.name, adapter.path,
                                            self.config.gateway.request_timeout_s)

    async def scrape_engines(self) -> None:
        """Refresh the engine series from every upstream's /metrics (absent when unreadable)."""
        timeout = self.config.metrics.engine_scrape_timeout_s
        texts = await asyncio.gather(*(self.pool.metrics_text(u, timeout) for u in self.pool.upstreams))
        samples = {}
        for upstream, text in zip(self.pool.upstreams, texts, strict=True):
            if text is not None:
                try:
                    samples[upstream.name] = parse_engine_metrics(text)
                except ValueError as exc:
                    log.warning("unreadable /metrics from %s: %s", upstream.name, exc)
        self.metrics.engine.samples = samples

    def public(self) -> Mapping[str, object]:
        return {**self.registry.state.public(),
                "upstreams": [u.public() for u in self.pool.upstreams],
                "shadow": {"queued": self.shadow.queue.qsize(), "queue_size": self.shadow.queue.maxsize,
                           "running": self.shadow.running, "agreement": self.registry.shadow_summary()}}
