"""Progressive trials on the real CPU engine with a real adapter, through the real gateway:
a scripted tool loop where the candidate's tool results come back failed is aborted by the
controller on its own; one where they do not steps through to `awaiting_gate`."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from serve.gateway.routing import canary_bucket
from tests.serve.gateway.test_capture import play
from tests.support.gateway_harness import RunningGateway, wait_for, write_config
from tests.support.trials import two_step_policy

pytestmark = pytest.mark.engine

CANDIDATE = f"trial-{uuid.uuid4().hex[:6]}"  # adapter names are never reused on an engine


def workspace(low: float, high: float, taken: int = 0) -> str:
    """A workspace whose canary bucket for CANDIDATE lies in [low, high)."""
    found = (f"ws-{i}" for i in range(10_000) if low <= canary_bucket("worker", CANDIDATE, f"ws-{i}") < high)
    for _ in range(taken):
        next(found)
    return next(found)


@pytest.fixture(scope="module")
def gw(engine: Any, seeded_adapters: dict[int, Path], tmp_path_factory: pytest.TempPathFactory
       ) -> Iterator[RunningGateway]:
    root = seeded_adapters[1].parent
    config = write_config(tmp_path_factory.mktemp("trial-gateway"), [engine.base_url], root,
                          extra='[capture]\nmode = "descriptor"\nsample_rate = 1.0\n')
    with RunningGateway(config) as gateway:
        gateway.ok("POST", "/adapters", {"name": CANDIDATE, "path": seeded_adapters[1].name})
        gateway.ok("POST", f"/adapters/{CANDIDATE}/load")
        yield gateway


def policy(directory: Path, min_requests: int) -> str:
    """Two steps (25%, 50%) a few live requests can pass; only tool anomalies are enforced, at α = 0.2:
    an abort at e ≥ 5 takes about 8 scripted rounds on the engine, where α = 0.05 took 12 (the bound
    at other levels is tested without the engine, in test_machine_boundaries and test_sequential)."""
    signals = "\n[signals.server_errors]\nenforced = false\n\n[signals.tool_anomalies]\nenforced = true\n"
    return str(two_step_policy(directory / f"trial-{min_requests}.toml", "live", CANDIDATE, min_requests, 0.2,
                               900, signals))


def status(gw: RunningGateway, trial: str) -> dict[str, Any]:
    return gw.ok("GET", f"/trials/{trial}")


def test_a_candidate_whose_tool_results_come_back_failed_is_aborted(gw: RunningGateway, tmp_path: Path) -> None:
    # the first step cannot end: its cohorts stay the ones the script plays
    started = gw.ok("POST", "/trials", {"id": "live-abort", "policy": policy(tmp_path, 1000)})
    assert started["phase"] == "step" and started["percent"] == 25
    cand, ctrl = workspace(0, 25), workspace(25, 50)
    assert gw.ok("GET", "/resolve", workspace=cand)["kind"] == "canary"
    histories = {w: [{"role": "user", "content": "Is invoice INV-7 paid?"}] for w in (cand, ctrl)}
    results = {cand: {"error": "Permission denied: the ledger is locked"}, ctrl: {"id": "INV-7", "paid": True}}
    for _ in range(14):  # interleaved, as live traffic is; each result labels the call before it
        for ws in (cand, ctrl):
            play(gw, [(histories[ws], f"s-{ws}", "lookup", results[ws])], ws)
        if status(gw, "live-abort")["phase"] == "aborted":
            break
    for ws in (cand, ctrl):
        play(gw, [(histories[ws], f"s-{ws}", None, None)], ws)
    try:
        done = wait_for(lambda: (s := status(gw, "live-abort"))["phase"] == "aborted" and s, "the abort", limit_s=60)
    except AssertionError as exc:
        raise AssertionError(f"{exc}: {status(gw, 'live-abort')}") from exc
    assert done["reason"].startswith("signal tool_anomalies")
    anomalies = done["evidence"]["tool_anomalies"]
    assert anomalies["candidate_bad"] >= 1 and anomalies["control_bad"] == 0
    assert gw.ok("GET", "/state")["routes"]["worker"]["canary"] is None
    assert gw.ok("GET", "/resolve", workspace=cand)["kind"] == "production"


def test_a_candidate_whose_tool_results_succeed_steps_through_to_the_gate(gw: RunningGateway, tmp_path: Path) -> None:
    gw.ok("POST", "/trials", {"id": "live-advance", "policy": policy(tmp_path, 3)})
    for step, (cand, ctrl) in enumerate(((workspace(0, 25), workspace(25, 50)),
                                         (workspace(0, 50, 1), workspace(50, 100))), start=1):
        assert status(gw, "live-advance")["step"] == step
        for i in range(3):
            for ws in (cand, ctrl):
                history = [{"role": "user", "content": "Is invoice INV-8 paid?"}]
                play(gw, [(history, f"s-{ws}-{step}-{i}", "lookup", {"id": "INV-8", "paid": True}),
                          (history, f"s-{ws}-{step}-{i}", None, None)], ws)
        wanted = "awaiting_gate" if step == 2 else "step"
        wait_for(lambda w=wanted, n=step: (s := status(gw, "live-advance"))["phase"] == w  # type: ignore[misc]
                 and (w == "awaiting_gate" or s["step"] == n + 1), f"past step {step}", limit_s=60)
    final = status(gw, "live-advance")
    assert final["evidence"]["tool_anomalies"]["candidate_bad"] == 0
    assert gw.ok("GET", "/state")["routes"]["worker"]["canary"]["percent"] == 50
    assert gw.ok("POST", "/trials/live-advance/abort", {"reason": "test over"})["phase"] == "aborted"
