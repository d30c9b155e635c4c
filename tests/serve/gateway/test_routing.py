"""Route resolution, sticky canary cohorts and replica choice (pure functions)."""

from __future__ import annotations

import pytest

from serve.gateway.registry import Adapter, Canary, Route, State
from serve.gateway.routing import ModelNotFoundError, ModelNotLoadedError, canary_bucket, replica_order, resolve

AT = "2026-01-01T00:00:00Z"


def adapter(name: str, state: str = "loaded") -> Adapter:
    return Adapter(name, f"/a/{name}", 8, "SmolLM2-135M-Instruct", "f", state, AT, AT)


def make_state(percent: float | None = None, sticky_by: str = "workspace") -> State:
    canary = Canary("cand-v1", percent, sticky_by, AT) if percent is not None else None
    route = Route("worker", "prod-v1", "worker-base", canary, None, AT)
    adapters = {a.name: a for a in (adapter("prod-v1"), adapter("cand-v1"), adapter("old-v0", "unloaded"))}
    return State(1, "worker-base", {"worker": route}, adapters)


def in_canary(state: State, workspaces: list[str]) -> set[str]:
    return {w for w in workspaces if resolve(state, "worker", w, None).kind == "canary"}


def test_route_resolves_to_production_and_names_resolve_to_pinned_versions():
    state = make_state()
    assert resolve(state, "worker", None, None).target == "prod-v1"
    assert resolve(state, "worker", None, None).kind == "production"
    pinned = resolve(state, "cand-v1", "ws-1", None)
    assert (pinned.kind, pinned.target, pinned.route) == ("pinned", "cand-v1", "")
    assert resolve(state, "worker-base", None, None).kind == "pinned"


def test_unknown_and_unloaded_versions_are_not_found():
    with pytest.raises(ModelNotFoundError, match="'nope'"):
        resolve(make_state(), "nope", None, None)
    with pytest.raises(ModelNotLoadedError, match="unloaded"):
        resolve(make_state(), "old-v0", None, None)


def test_thirty_percent_canary_takes_thirty_percent_of_distinct_workspaces():
    workspaces = [f"ws-{i}" for i in range(20_000)]
    share = len(in_canary(make_state(30.0), workspaces)) / len(workspaces)
    # Binomial(20000, 0.3): one standard deviation is 0.32 points; allow three.
    assert abs(share - 0.30) < 0.0097


def test_cohorts_are_sticky_and_raising_the_percent_only_adds_workspaces():
    workspaces = [f"ws-{i}" for i in range(2000)]
    at_10, at_30, at_50 = (in_canary(make_state(p), workspaces) for p in (10.0, 30.0, 50.0))
    assert at_30 == in_canary(make_state(30.0), workspaces)  # same answer every time
    assert at_10 <= at_30 <= at_50
    assert in_canary(make_state(100.0), workspaces) == set(workspaces)


def test_canary_needs_its_sticky_header_and_can_stick_by_session():
    state = make_state(100.0)
    assert resolve(state, "worker", None, "s-1").kind == "production"  # no workspace header
    by_session = make_state(100.0, sticky_by="session")
    res = resolve(by_session, "worker", "ws-1", "s-1")
    assert (res.kind, res.target, res.cohort_key) == ("canary", "cand-v1", "s-1")
    assert resolve(by_session, "worker", "ws-1", None).kind == "production"


def test_bucket_depends_on_the_candidate_so_each_canary_draws_a_fresh_cohort():
    keys = [f"ws-{i}" for i in range(1000)]
    first = {k for k in keys if canary_bucket("worker", "cand-v1", k) < 30}
    second = {k for k in keys if canary_bucket("worker", "cand-v2", k) < 30}
    assert first != second
    assert all(0 <= canary_bucket("worker", "c", k) < 100 for k in keys)


def test_a_workspace_stays_on_its_replica_and_only_a_lost_replicas_keys_move():
    replicas = ["engine-0", "engine-1", "engine-2"]
    keys = [f"ws-{i}" for i in range(3000)]
    first = {k: replica_order(replicas, k, {})[0] for k in keys}
    assert first == {k: replica_order(replicas, k, {"engine-0": 9})[0] for k in keys}  # load does not move keys
    counts = {r: sum(1 for v in first.values() if v == r) for r in replicas}
    assert all(800 < n < 1200 for n in counts.values()), counts
    without_1 = {k: replica_order(["engine-0", "engine-2"], k, {})[0] for k in keys}
    moved = {k for k in keys if without_1[k] != first[k]}
    assert moved == {k for k in keys if first[k] == "engine-1"}


def test_requests_without_a_key_go_to_the_least_busy_replica_then_rotate():
    replicas = ["engine-0", "engine-1"]
    assert replica_order(replicas, None, {"engine-0": 3, "engine-1": 1})[0] == "engine-1"
    assert {replica_order(replicas, None, {}, turn)[0] for turn in range(2)} == set(replicas)
