"""The trials inside the gateway: recovery at start-up, a look at every running trial each
`interval_s`, and the Prometheus series.

Every trial change runs under the gateway's admin lock, so a look never interleaves with an
operator's canary change or the re-apply of the registry to an engine.

Series (on the gateway's `/metrics`):

* `worker_trial_step{trial, route, candidate}` — the current step (1-based; 0 once ended);
* `worker_trial_phase{trial, route, candidate, phase}` — 1 for the trial's phase;
* `worker_trial_evidence{trial, route, candidate, signal}` — the e-value per signal, with
  `worker_trial_evidence_threshold{trial, ...}` = 1/α' (an enforced signal at or above it aborts);
* `worker_trial_aborts_total{route, candidate, reason}` — ended trials that aborted, by reason
  (the signal's name, `operator` or `preflight`), from the store, so it survives restarts.
"""

from __future__ import annotations

import asyncio
import logging
import sqlite3
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

from core.sqlitedb import store_error
from serve.gateway.registry import STORE
from serve.gateway.service import Gateway
from serve.trials.controller import Controller
from serve.trials.machine import Event, TrialState
from serve.trials.signals import read_window
from serve.trials.store import StoredTrial, TrialStateUnreadableError, TrialStore
from serve.trials.trial_policy import LoadedPolicy

log = logging.getLogger("worker.trials")
_TICK_S = 1.0


def abort_reason(reason: str | None) -> str:
    """The label of an abort: the signal's name, `operator` or `preflight`."""
    head = (reason or "").split(":", 1)[0]
    return head.removeprefix("signal ").strip() or "unknown"


@dataclass(frozen=True)
class Snapshot:
    stored: StoredTrial
    state: TrialState


class TrialCollector(Collector):
    def __init__(self) -> None:
        self.snapshots: list[Snapshot] = []

    def collect(self) -> Iterator[GaugeMetricFamily | CounterMetricFamily]:
        labels = ["trial", "route", "candidate"]
        step = GaugeMetricFamily("worker_trial_step", "Current step of a progressive trial (0 once ended)",
                                 labels=labels)
        phase = GaugeMetricFamily("worker_trial_phase", "1 for the trial's phase", labels=[*labels, "phase"])
        evidence = GaugeMetricFamily("worker_trial_evidence", "E-value of the trial's sequential test per signal",
                                     labels=[*labels, "signal"])
        threshold = GaugeMetricFamily("worker_trial_evidence_threshold", "1/alpha per enforced signal: an "
                                      "enforced signal's evidence at or above it aborts the trial", labels=labels)
        aborts = CounterMetricFamily("worker_trial_aborts", "Trials aborted, by reason",
                                     labels=["route", "candidate", "reason"])
        counted: Counter[tuple[str, str, str]] = Counter()
        for snap in self.snapshots:
            s, state = snap.stored, snap.state
            key = [s.id, s.route, s.candidate]
            running = state.phase in ("step", "awaiting_gate")
            step.add_metric(key, state.step + 1 if running else 0)
            phase.add_metric([*key, state.phase], 1)
            threshold.add_metric(key, 1 / s.policy.alpha_per_signal())
            for name, signal in state.signals.items():
                evidence.add_metric([*key, name], signal.process.e_value)
            if state.phase == "aborted":
                counted[(s.route, s.candidate, abort_reason(state.reason))] += 1
        for labels_, n in sorted(counted.items()):
            aborts.add_metric(list(labels_), n)
        yield from (step, phase, evidence, threshold, aborts)


class TrialService:
    def __init__(self, gateway: Gateway) -> None:
        self.gw = gateway
        config = gateway.config
        self.store = TrialStore(config.gateway.state_db)
        observed = config.capture.mode != "off" and config.capture.sample_rate > 0
        self.controller = Controller(self.store, gateway.registry, config.capture.db if observed else None)
        gateway.running_trials = self.store.running  # the route admin refuses to contradict these
        self.collector = TrialCollector()
        gateway.metrics.registry.register(self.collector)
        self._task: asyncio.Task[None] | None = None
        self._looked: dict[str, float] = {}

    def recover(self) -> None:
        """Put every trial's routing back as its stored state says (`Controller.recover`), before the server
        listens: no request is routed first, and a store that cannot take the recovery's records (a full disk)
        stops the command with one `error:` line naming the store, never a failed start-up's traceback."""
        try:
            notes = self.controller.recover()
        except (OSError, sqlite3.Error) as exc:
            raise store_error(self.gw.registry.path, STORE, "record the trials' recovery at start-up", exc) from exc
        for note in notes:
            log.warning("%s", note)
        self._refresh()

    def run_in_background(self) -> None:
        self._task = asyncio.create_task(self._loop(), name="trials")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
        self.store.close()

    async def _loop(self) -> None:
        while True:
            await asyncio.sleep(_TICK_S)
            try:
                await self.look_due()
            except Exception:  # a bad look must not end the loop that guards every other trial
                log.exception("trial look failed")

    async def look_due(self, force: bool = False) -> None:
        now = time.monotonic()
        for trial_id, _, _ in self.store.running():
            async with self.gw.lock:
                try:
                    stored = self.store.get(trial_id)
                    if force or now - self._looked.get(trial_id, -1e18) >= stored.policy.interval_s \
                            or self._expiring(stored):
                        self._looked[trial_id] = now
                        await self._look(trial_id)
                except TrialStateUnreadableError:
                    for note in self.controller.recover():  # ends it, candidate at weight 0
                        log.warning("%s", note)
                self._refresh()

    async def _look(self, trial_id: str) -> None:
        """A look whose reading runs in a thread, on connections of its own, so the event loop serves
        traffic meanwhile; the gateway lock (held by the caller) keeps the trial's state still."""
        window = self.controller.window(trial_id)
        counts = None
        if window is not None:
            self.controller.registry.flush_quietly()
            counts = await asyncio.to_thread(read_window, self.controller.registry.path, self.controller.capture_db,
                                             window)
        self.controller.look(trial_id, counts)

    def _expiring(self, stored: StoredTrial) -> bool:
        """Its maximum duration has passed: look now, not at the next interval (expiry waits for no look)."""
        started = stored.state().started_at
        return started is not None and self.controller.clock() - started >= stored.policy.max_duration_s

    async def start_trial(self, trial_id: str, loaded: LoadedPolicy) -> TrialState:
        async with self.gw.lock:
            try:
                return self.controller.start(trial_id, loaded)
            finally:
                self._looked[trial_id] = time.monotonic()
                self._refresh()

    async def handle(self, trial_id: str, event: Event) -> TrialState:
        async with self.gw.lock:
            try:
                return self.controller.handle(trial_id, event)
            finally:
                self._refresh()

    def _refresh(self) -> None:
        """Canary gauges and trial series after any change."""
        self.gw.sync_gauges()
        snapshots = []
        for row in self.store.trials():
            try:
                stored = self.store.get(row["id"])
                snapshots.append(Snapshot(stored, stored.state()))
            except TrialStateUnreadableError:
                continue  # its journal says so; nothing to plot
        self.collector.snapshots = snapshots
