"""Trials driven against the real registry (SQLite) and trial store: preflight, abort on
evidence, advance, the gate, expiry, and a gateway killed at each point resuming correctly.
The requests are written into the registry's request log as the proxy writes them."""

from __future__ import annotations

import itertools
import json
import sqlite3
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from serve.gateway.registry import AdapterFiles, Registry, RequestRow, now
from serve.gateway.routing import canary_bucket
from serve.trials.controller import Controller, PreflightFailedError, describe_state
from serve.trials.machine import Abort, GateVerdict, Suspend, TrialState, VerdictWindow, initial
from serve.trials.signals import stamp
from serve.trials.store import TrialStateUnreadableError, TrialStore, encode
from serve.trials.trial_policy import LoadedPolicy, Signals, Step, TrialError, TrialPolicy

GATE = "9" * 64
POLICY = TrialPolicy(name="t", route="worker", candidate="cand", alpha=0.01, interval_s=60, max_duration_s=10_000,
                     gate_policy=Path("gate.toml"),
                     steps=[Step(percent=10, min_duration_s=100, min_requests=20),
                            Step(percent=30, min_duration_s=100, min_requests=20)])
LOADED = LoadedPolicy(POLICY, Path("trial.toml"), "8" * 64, Path("gate.toml"), GATE)


class Clock:
    def __init__(self) -> None:
        self.now = 1_800_000_000.0

    def __call__(self) -> float:
        return self.now


class Gateway:
    """The registry, trial store and controller of one gateway process (reopened to simulate a restart)."""

    def __init__(self, path: Path, clock: Clock) -> None:
        self.path, self.clock = path, clock
        self.registry = Registry(path, ["worker"], "worker-base")
        self.store = TrialStore(path)
        self.controller = Controller(self.store, self.registry, None, clock)

    def close(self) -> None:
        self.registry.close()
        self.store.close()

    def restart(self) -> Gateway:
        self.close()
        return Gateway(self.path, self.clock)


@pytest.fixture
def gw(tmp_path: Path) -> Iterator[Gateway]:
    gateway = Gateway(tmp_path / "state.sqlite", Clock())
    for name in ("prod", "cand"):
        gateway.registry.register(name, AdapterFiles(tmp_path / name, 8, "base", name))
        gateway.registry.set_adapter_state(name, "loaded")
    gateway.registry.set_production("worker", "prod")
    yield gateway
    gateway.close()


_ids = itertools.count()


def keys(route: str, low: float, high: float) -> Iterator[str]:
    """Workspace keys whose canary bucket lies in [low, high)."""
    for i in itertools.count():
        key = f"ws-{i}"
        if low <= canary_bucket(route, "cand", key) < high:
            yield key


def traffic(gw: Gateway, percent: float, n: int, cand_errors: int = 0, ctrl_errors: int = 0) -> None:
    """n requests in each cohort (as routed at `percent`), the first `*_errors` of them failing, logged one
    second after the test clock's now."""
    at = stamp(gw.clock.now + 1)
    for i, key in zip(range(n), keys("worker", 0, percent), strict=False):
        gw.registry.record_request(RequestRow(request_id=f"r{next(_ids)}", endpoint="/v1/chat/completions", requested="worker",
                                   route="worker", adapter="cand", kind="canary", sticky_key=key, upstream="e0",
                                   status=502 if i < cand_errors else 200, reason=None, duration_s=0.1), at=at)
    for i, key in zip(range(n), keys("worker", percent, 2 * percent), strict=False):
        gw.registry.record_request(RequestRow(request_id=f"r{next(_ids)}", endpoint="/v1/chat/completions", requested="worker",
                                   route="worker", adapter="prod", kind="production", sticky_key=key, upstream="e0",
                                   status=502 if i < ctrl_errors else 200, reason=None, duration_s=0.1), at=at)
    for key in itertools.islice(keys("worker", 2 * percent, 100), 5):  # outside both cohorts: not counted
        gw.registry.record_request(RequestRow(request_id=f"r{next(_ids)}", endpoint="/v1/chat/completions", requested="worker",
                                   route="worker", adapter="prod", kind="production", sticky_key=key, upstream="e0",
                                   status=500, reason=None, duration_s=0.1), at=at)


def canary(gw: Gateway) -> float | None:
    c = gw.registry.state.routes["worker"].canary
    return c.percent if c is not None and c.candidate == "cand" else None


def test_a_start_whose_preflight_fails_creates_nothing_and_leaves_the_name_free(gw: Gateway) -> None:
    gw.registry.set_adapter_state("cand", "unloaded")
    with pytest.raises(PreflightFailedError, match="preflight: candidate 'cand' is not a loaded adapter"):
        gw.controller.start("t1", LOADED)
    unregistered = replace(LOADED, policy=POLICY.model_copy(update={"candidate": "ghost"}))
    with pytest.raises(PreflightFailedError, match="candidate 'ghost' is not a registered adapter"):
        gw.controller.start("t1", unregistered)
    assert canary(gw) is None and gw.store.trials() == [] and gw.store.journal("t1") == []
    gw.registry.set_adapter_state("cand", "loaded")
    assert gw.controller.start("t1", LOADED).phase == "step"


def test_a_failing_candidate_is_aborted_and_every_cohort_goes_back_to_production(gw: Gateway) -> None:
    assert gw.controller.start("t1", LOADED).phase == "step" and canary(gw) == 10
    traffic(gw, 10, 40, cand_errors=25, ctrl_errors=1)
    gw.clock.now += 60
    state = gw.controller.look("t1")
    assert state.phase == "aborted" and state.reason is not None and "server_errors" in state.reason
    assert canary(gw) is None and gw.registry.state.routes["worker"].production == "prod"
    last = gw.store.journal("t1")[-1]
    assert last["evidence"]["server_errors"]["candidate_bad"] == 25
    assert last["evidence"]["server_errors"]["control_exposure"] == 40  # the 5 outside requests are not control
    assert last["actions"][0]["type"] == "StopCanary"


def test_a_healthy_candidate_steps_to_the_gate_and_is_promoted_only_by_a_verdict(gw: Gateway) -> None:
    gw.controller.start("t1", LOADED)
    traffic(gw, 10, 25)
    gw.clock.now += 50
    assert gw.controller.look("t1").step == 0  # requests met, duration not
    gw.clock.now += 60
    state = gw.controller.look("t1")
    assert state.step == 1 and canary(gw) == 30
    assert gw.controller.look("t1").step_requests == (0, 0)  # the old step's requests are not counted again
    traffic(gw, 30, 25)
    gw.clock.now += 120
    state = gw.controller.look("t1")
    assert state.phase == "awaiting_gate" and canary(gw) == 30
    assert state.signals["server_errors"].totals.candidate_exposure == 50
    verdict = GateVerdict(True, GATE, "cand", 6, 6, VerdictWindow("t1", state.started_at or 0, gw.clock.now), "6/6 passed")
    state = gw.controller.handle("t1", verdict)
    route = gw.registry.state.routes["worker"]
    assert state.phase == "promoted" and route.production == "cand" and route.previous == "prod"
    assert route.canary is None


def test_no_data_expires_the_trial_back_to_control(gw: Gateway) -> None:
    gw.controller.start("t1", LOADED)
    gw.clock.now += 10_000
    state = gw.controller.look("t1")
    assert state.phase == "expired" and canary(gw) is None


def test_a_restart_resumes_the_same_step_with_its_timer_and_evidence(gw: Gateway) -> None:
    gw.controller.start("t1", LOADED)
    traffic(gw, 10, 15, cand_errors=2, ctrl_errors=1)
    gw.clock.now += 30
    before = gw.controller.look("t1")
    gw = gw.restart()
    gw.registry.stop_canary("worker")  # the routing was lost (e.g. killed between the write and the action)
    assert gw.controller.recover() == ["trial 't1': resumed step 1 at 10%"]
    stored = gw.store.get("t1")
    assert stored.state() == before and canary(gw) == 10
    traffic(gw, 10, 10)
    gw.clock.now += 80
    state = gw.controller.look("t1")  # 15 + 10 requests per cohort, 110 s: the step is done
    assert state.step == 1 and state.signals["server_errors"].totals.candidate_exposure == 25
    assert describe_state(gw.store.get("t1"), state)["percent"] == 30


def test_a_restart_never_promotes_and_finds_a_promotion_that_happened(gw: Gateway) -> None:
    gw.controller.start("t1", LOADED)
    stored = gw.store.get("t1")
    waiting = replace(stored.state(), phase="awaiting_gate", step=1)
    gw.store.record("t1", "now", Suspend(), stored.state(), waiting, [])
    gw = gw.restart()
    gw.controller.recover()
    assert gw.store.get("t1").state().phase == "awaiting_gate" and canary(gw) == 30
    assert gw.registry.state.routes["worker"].production == "prod"
    gw.registry.set_production("worker", "cand")  # killed after switching production, before writing `promoted`
    gw = gw.restart()
    gw.controller.recover()
    assert gw.store.get("t1").state().phase == "promoted"


def test_an_unreadable_trial_state_takes_the_candidate_to_weight_zero(gw: Gateway) -> None:
    gw.controller.start("t1", LOADED)
    assert canary(gw) == 10
    gw.close()
    db = sqlite3.connect(gw.path)
    db.execute("UPDATE trials SET state = '{\"phase\": \"step\", \"step\": -3}'")
    db.commit()
    db.close()
    gw = Gateway(gw.path, gw.clock)
    with pytest.raises(TrialStateUnreadableError):
        gw.store.get("t1").state()
    assert gw.controller.recover() == ["trial 't1': state unreadable, candidate 'cand' set to weight 0"]
    assert canary(gw) is None
    assert gw.store.journal("t1")[-1]["event"]["type"] == "Unreadable"
    assert gw.store.running() == [] and gw.controller.recover() == []  # ended: not noted again


def test_one_trial_per_route_and_names_are_never_reused(gw: Gateway) -> None:
    gw.controller.start("t1", LOADED)
    with pytest.raises(TrialError, match="already runs trial 't1'"):
        gw.controller.start("t2", LOADED)
    gw.controller.handle("t1", Suspend())
    assert canary(gw) is None
    assert encode(gw.store.get("t1").state()).startswith('{"format":1')


@pytest.mark.parametrize(("phase", "suspended", "expected_percent", "expected_phase"), [
    ("pending", False, 10, "step"),  # killed between creating and starting: it starts
    ("preflight", False, 10, "step"),  # killed during preflight: it runs again
    ("step", False, 30, "step"),
    ("step", True, None, "step"),
    ("awaiting_gate", False, 30, "awaiting_gate"),
    ("aborted", False, None, "aborted"),  # killed after the write, before routing back
    ("expired", False, None, "expired"),
    ("held", False, None, "held"),
])
def test_a_gateway_killed_in_any_phase_comes_back_routed_as_its_state_says(
        gw: Gateway, phase: str, suspended: bool, expected_percent: float | None, expected_phase: str) -> None:
    gw.store.create("t1", POLICY, "trial.toml", "8" * 64, GATE, initial(POLICY), "2026-01-01T00:00:00.000Z")
    crafted = (TrialState(phase=phase, signals=initial(POLICY).signals) if phase in ("pending", "preflight")  # type: ignore[arg-type]
               else TrialState(phase=phase, step=1, started_at=gw.clock.now, step_started_at=gw.clock.now,  # type: ignore[arg-type]
                               suspended=suspended, signals=initial(POLICY).signals))
    gw.registry.set_canary("worker", "cand", 45, "workspace")  # whatever the routing was when it died
    gw.store.record("t1", now(), Suspend(), initial(POLICY), crafted, [])
    gw = gw.restart()
    gw.controller.recover()
    assert canary(gw) == expected_percent
    assert gw.store.get("t1").state().phase == expected_phase
    assert gw.registry.state.routes["worker"].production == "prod"  # never promoted by a restart


@pytest.mark.parametrize("change", [{"step": 5}, {"started_at": None}])
def test_a_running_trial_whose_state_its_policy_cannot_run_does_not_stop_recovery(
        gw: Gateway, change: dict[str, object]) -> None:
    """A step past the policy's steps (an IndexError at start-up) or no start time (every look failing
    while the candidate kept its weight): unreadable, candidate at weight 0, the gateway starts."""
    gw.controller.start("t1", LOADED)
    gw.close()
    db = sqlite3.connect(gw.path)
    data = json.loads(db.execute("SELECT state FROM trials").fetchone()[0]) | change
    db.execute("UPDATE trials SET state = ?", (json.dumps(data),))
    db.commit()
    db.close()
    gw = Gateway(gw.path, gw.clock)
    assert gw.controller.recover() == ["trial 't1': state unreadable, candidate 'cand' set to weight 0"]
    assert canary(gw) is None and gw.store.running() == []


def test_a_trial_whose_route_is_no_longer_configured_ends_at_recovery(gw: Gateway) -> None:
    gw.controller.start("t1", LOADED)
    gw.close()
    gw.registry = Registry(gw.path, ["other"], "worker-base")
    gw.store = TrialStore(gw.path)
    gw.controller = Controller(gw.store, gw.registry, None, gw.clock)
    assert gw.controller.recover() == ["trial 't1': state unreadable, candidate 'cand' set to weight 0"]
    assert "no longer has route 'worker'" in gw.store.journal("t1")[-1]["event"]["error"]


def test_a_restart_does_not_undo_an_operators_canary_started_after_the_trial_ended(gw: Gateway) -> None:
    gw.controller.start("t1", LOADED)
    gw.controller.handle("t1", Abort("enough"))
    assert canary(gw) is None
    gw.registry.set_canary("worker", "cand", 5, "workspace")  # the operator's own decision, later
    gw.controller.handle("t1", Suspend())  # events after the end change nothing, not even its end time
    gw = gw.restart()
    assert gw.controller.recover() == []
    assert canary(gw) == 5


def test_a_signal_the_gateway_cannot_observe_takes_no_share_of_alpha(gw: Gateway) -> None:
    state = gw.controller.start("t1", LOADED)  # capture is off: tool_anomalies cannot see a tool result
    stored = gw.store.get("t1")
    assert stored.policy.signals.enforced() == ["server_errors"] and set(state.signals) == {"server_errors"}
    assert describe_state(stored, state)["alpha_per_signal"] == POLICY.alpha
    assert "tool_anomalies" in gw.store.journal("t1")[0]["event"]["left_out"]
    only = replace(LOADED, policy=POLICY.model_copy(update={"signals": Signals(server_errors=None)}))
    with pytest.raises(TrialError, match="no enforced signal can gather evidence"):
        gw.controller.start("t2", only)


def test_a_verdict_judged_on_another_trials_evidence_is_refused(gw: Gateway) -> None:
    gw.controller.start("t1", LOADED)
    stored = gw.store.get("t1")
    state = stored.state()
    waiting = replace(state, phase="awaiting_gate", step=1, gate_at=state.started_at)
    gw.store.record("t1", now(), Suspend(), state, waiting, [])
    other = GateVerdict(True, GATE, "cand", 6, 6, VerdictWindow("t0", state.started_at or 0, gw.clock.now))
    with pytest.raises(TrialError, match="its evidence is trial 't0'"):
        gw.controller.handle("t1", other)
    assert gw.registry.state.routes["worker"].production == "prod"


def test_the_services_look_reads_the_stores_in_a_thread_and_judges_the_same(gw: Gateway, monkeypatch) -> None:
    import asyncio
    import threading

    from serve.trials import supervisor
    from serve.trials.supervisor import TrialService

    assert gw.controller.start("t1", LOADED).phase == "step"
    traffic(gw, 10, 40, cand_errors=25, ctrl_errors=1)  # buffered in the registry: the look must flush them
    gw.clock.now += 60
    readers: list[int] = []
    real = supervisor.read_window

    def spy(*args: object) -> object:
        readers.append(threading.get_ident())
        return real(*args)  # type: ignore[arg-type]

    monkeypatch.setattr(supervisor, "read_window", spy)
    service = object.__new__(TrialService)  # only its look: the controller is all it uses
    service.controller = gw.controller

    async def look() -> int:
        await service._look("t1")
        return threading.get_ident()

    loop_thread = asyncio.run(look())
    assert readers and readers[0] != loop_thread
    last = gw.store.journal("t1")[-1]
    assert last["evidence"]["server_errors"]["candidate_bad"] == 25 and canary(gw) is None
