"""The admin API over HTTP: auth, status codes, all-or-nothing changes, serialised concurrent
calls, the canary split, rollback and restart.

Checks the gateway answers before any upstream call run with no upstream at all. The adapters
here are fake files no real engine would load, so the rest front the named fault injector as a
stand-in that accepts loads (or is made to refuse one, delay one, or come back empty); what they
assert is the gateway's registry, routing and the requests it sends, never an engine's answer.
tests/serve/gateway/test_app_live.py repeats the key paths (routing kinds, rollback, a refused
load) against the real engine with real adapters."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import pytest

from tests.support.fault_upstream import FaultUpstream
from tests.support.gateway_harness import RunningGateway, fake_adapter, start_gateway, write_config


def add(gw: RunningGateway, root, name: str, load: bool = True) -> None:
    fake_adapter(root, name)
    gw.ok("POST", "/adapters", {"name": name, "path": name})
    if load:
        gw.ok("POST", f"/adapters/{name}/load")


def status_and_code(response) -> tuple[int, str]:
    return response.status_code, response.json()["error"]["code"]


def test_admin_needs_the_bearer_token(tmp_path, root, no_upstream):
    with start_gateway(tmp_path, root, [no_upstream]) as gw:
        assert status_and_code(gw.admin("GET", "/state", token=None)) == (401, "invalid_token")
        assert status_and_code(gw.admin("GET", "/state", token="wrong")) == (401, "invalid_token")
        refused = gw.admin("POST", "/adapters", {"name": "a-v1", "path": "a-v1"}, token=None)
        assert refused.status_code == 401 and refused.headers["www-authenticate"] == "Bearer"
        assert gw.admin("GET", "/state").status_code == 200


def test_admin_is_disabled_without_a_configured_token(tmp_path, root, no_upstream):
    path = write_config(tmp_path / "gw", [no_upstream.url], root)
    path.write_text(path.read_text().replace('token = "test-admin-token"\n', ""))
    with RunningGateway(path) as gw:
        assert status_and_code(gw.admin("GET", "/state")) == (401, "admin_disabled")


@pytest.mark.parametrize(("path", "body", "named"), [
    ("/adapters", {"name": "a-v1"}, "path"),
    ("/adapters", {"name": "a v1", "path": "x"}, "name"),
    ("/adapters", {"name": "a-v1", "path": "x", "colour": "red"}, "colour"),
    ("/routes/worker/canary", {"candidate": "a-v1", "percent": 130}, "percent"),
    ("/routes/worker/canary", {"candidate": "a-v1", "percent": 30, "sticky_by": "tenant"}, "sticky_by"),
    ("/routes/worker/shadow", {"candidate": "a-v1", "sample_rate": 1.5}, "sample_rate"),
    ("/routes/worker/production", {}, "version"),
])
def test_bad_bodies_get_422_naming_the_field(tmp_path, root, no_upstream, path, body, named):
    with start_gateway(tmp_path, root, [no_upstream]) as gw:
        response = gw.admin("POST", path, body)
        assert status_and_code(response) == (422, "invalid_body")
        assert named in response.json()["error"]["message"]


def test_adapters_that_do_not_fit_get_422(tmp_path, root, no_upstream):
    with start_gateway(tmp_path, root, [no_upstream]) as gw:
        fake_adapter(root, "huge", rank=64)
        response = gw.admin("POST", "/adapters", {"name": "huge-v1", "path": "huge"})
        assert status_and_code(response) == (422, "invalid_adapter") and "rank 64" in response.text
        outside = gw.admin("POST", "/adapters", {"name": "x-v1", "path": "/etc"})
        assert status_and_code(outside) == (422, "invalid_adapter") and "outside the adapter root" in outside.text


def test_unknown_versions_and_routes_get_404(tmp_path, root, no_upstream):
    with start_gateway(tmp_path, root, [no_upstream]) as gw:
        assert status_and_code(gw.admin("POST", "/adapters/ghost/load")) == (404, "adapter_not_found")
        assert status_and_code(gw.admin("POST", "/routes/worker/production", {"version": "ghost"})) == (
            404, "adapter_not_found")
        assert status_and_code(gw.admin("POST", "/routes/nope/rollback")) == (404, "route_not_found")
        assert status_and_code(gw.admin("GET", "/resolve", model="ghost")) == (404, "model_not_found")


def test_conflicts_get_409(tmp_path, root, fault):
    with start_gateway(tmp_path, root, [fault]) as gw:
        add(gw, root, "a-v1")
        add(gw, root, "b-v1")
        add(gw, root, "c-v1", load=False)
        fake_adapter(root, "a-v1-copy")
        assert status_and_code(gw.admin("POST", "/adapters", {"name": "a-v1", "path": "a-v1-copy"})) == (
            409, "name_taken")
        assert status_and_code(gw.admin("POST", "/adapters", {"name": "worker", "path": "a-v1"})) == (
            409, "name_taken")
        assert status_and_code(gw.admin("POST", "/routes/worker/rollback")) == (409, "no_previous")
        assert status_and_code(gw.admin("POST", "/routes/worker/production", {"version": "c-v1"})) == (
            409, "not_loaded")
        gw.ok("POST", "/routes/worker/production", {"version": "a-v1"})
        assert status_and_code(gw.admin("POST", "/adapters/a-v1/unload")) == (409, "in_use")
        assert status_and_code(gw.admin("POST", "/routes/worker/canary", {"candidate": "a-v1", "percent": 5})) == (
            409, "is_production")
        gw.ok("POST", "/routes/worker/canary", {"candidate": "b-v1", "percent": 5})
        assert gw.ok("POST", "/routes/worker/canary", {"candidate": "b-v1", "percent": 20})["route"]["canary"][
            "percent"] == 20  # ramping the same candidate is allowed
        assert status_and_code(gw.admin("POST", "/routes/worker/canary", {
            "candidate": "worker-base", "percent": 5})) == (409, "canary_running")


def test_a_failed_load_changes_nothing_anywhere(tmp_path, root):
    with FaultUpstream() as good, FaultUpstream() as bad, start_gateway(tmp_path, root, [good, bad]) as gw:
        fake_adapter(root, "a-v1")
        gw.ok("POST", "/adapters", {"name": "a-v1", "path": "a-v1"})
        before = gw.ok("GET", "/state")
        bad.fail_loads.add("a-v1")
        response = gw.admin("POST", "/adapters/a-v1/load")
        assert status_and_code(response) == (502, "engine_load_failed")
        assert "nothing changed" in response.json()["error"]["message"]
        after = gw.ok("GET", "/state")
        assert (after["revision"], after["adapters"], after["routes"]) == (
            before["revision"], before["adapters"], before["routes"])
        assert good.loads == ["a-v1"] and good.adapters == {}  # loaded there, then undone
        assert status_and_code(gw.admin("POST", "/routes/worker/production", {"version": "a-v1"})) == (
            409, "not_loaded")


def test_changed_files_are_never_loaded_under_the_old_name(tmp_path, root, fault):
    with start_gateway(tmp_path, root, [fault]) as gw:
        add(gw, root, "a-v1", load=False)
        (root / "a-v1" / "adapter_model.safetensors").write_bytes(b"retrained weights")
        assert status_and_code(gw.admin("POST", "/adapters/a-v1/load")) == (409, "files_changed")
        assert fault.loads == []  # the stand-in engine was never asked to load


def test_concurrent_registrations_of_one_name_admit_exactly_one(tmp_path, root, no_upstream):
    with start_gateway(tmp_path, root, [no_upstream]) as gw:
        for i in range(8):
            fake_adapter(root, f"copy-{i}")
        with ThreadPoolExecutor(8) as pool:
            statuses = list(pool.map(lambda i: gw.admin("POST", "/adapters", {
                "name": "same-v1", "path": f"copy-{i}"}).status_code, range(8)))
        assert sorted(statuses) == [201] + [409] * 7
        assert [a["name"] for a in gw.ok("GET", "/adapters")["adapters"]] == ["same-v1"]


def test_concurrent_changes_are_serialised_into_one_consistent_history(tmp_path, root, fault):
    with start_gateway(tmp_path, root, [fault]) as gw:
        for name in ("a-v1", "b-v1"):
            add(gw, root, name)
        for name in ("e-v1", "f-v1", "g-v1"):
            add(gw, root, name, load=False)
        first_revision = gw.ok("GET", "/state")["revision"]
        fault.load_delay_s = 0.05  # a load holds the lock while the other calls queue behind it
        calls = [("POST", f"/adapters/{n}/load", None) for n in ("e-v1", "f-v1", "g-v1")]
        calls += [("POST", "/routes/worker/production", {"version": v})
                  for v in ["a-v1", "e-v1", "b-v1", "f-v1", "worker-base", "g-v1"] * 3]
        calls += [("POST", "/routes/worker/rollback", None)] * 6
        with ThreadPoolExecutor(12) as pool:
            responses = list(pool.map(lambda c: gw.admin(*c), calls))
        assert all(r.status_code in (200, 409) for r in responses), [r.text for r in responses]
        reported = {r.json()["revision"]: r.json() for r in responses if r.status_code == 200}
        # Replaying the log one change at a time reproduces every state a caller was shown:
        # no call saw another's half-done change.
        final = gw.ok("GET", "/state")
        log = {e["revision"]: e for e in gw.ok("GET", "/log", limit=1000)["log"]}
        assert sorted(log) == list(range(1, final["revision"] + 1))
        loaded, production, previous = {"a-v1", "b-v1"}, "worker-base", None
        for revision in range(first_revision + 1, final["revision"] + 1):
            action, detail = log[revision]["action"], log[revision]["detail"]
            if action == "adapter_loaded":
                loaded.add(detail["name"])
            elif action == "set_production":
                assert detail["version"] in loaded | {"worker-base"}  # never production before it was loaded
                production, previous = detail["version"], production
            else:
                assert action == "rollback"
                production, previous = previous, production
            shown = reported.get(revision, {}).get("route")
            if shown is not None:
                assert (shown["production"], shown["previous"]) == (production, previous)
        route = final["routes"]["worker"]
        assert (route["production"], route["previous"]) == (production, previous)
        assert set(fault.adapters) == {a["name"] for a in final["adapters"] if a["state"] == "loaded"} == loaded


def test_thirty_percent_canary_sends_thirty_percent_of_workspaces_and_logs_the_split(tmp_path, root, fault):
    with start_gateway(tmp_path, root, [fault]) as gw:
        add(gw, root, "cand-v1")
        gw.ok("POST", "/routes/worker/canary", {"candidate": "cand-v1", "percent": 30, "sticky_by": "workspace"})
        workspaces = [f"tenant-{i}" for i in range(2000)]
        kinds = {w: gw.ok("GET", "/resolve", model="worker", workspace=w)["kind"] for w in workspaces}
        share = sum(kind == "canary" for kind in kinds.values()) / len(workspaces)
        assert abs(share - 0.30) <= 0.03
        assert 'worker_gateway_canary_percent{candidate="cand-v1",route="worker"} 30.0' in gw.metrics()
        canary = next(w for w, k in kinds.items() if k == "canary")
        stable = next(w for w, k in kinds.items() if k == "production")
        for workspace, adapter in ((canary, "cand-v1"), (stable, "worker-base")):
            response = gw.chat(headers={"X-Workspace-Id": workspace})
            assert response.headers["x-worker-adapter"] == adapter
            assert fault.requests[-1]["model"] == adapter  # what the gateway asked the upstream for
        logged = {r["sticky_key"]: (r["kind"], r["adapter"]) for r in gw.ok("GET", "/requests")["requests"]}
        assert logged == {canary: ("canary", "cand-v1"), stable: ("production", "worker-base")}
        gw.ok("DELETE", "/routes/worker/canary")
        assert gw.chat(headers={"X-Workspace-Id": canary}).headers["x-worker-kind"] == "production"
        assert "worker_gateway_canary_percent{" not in gw.metrics()


def test_rollback_takes_effect_on_the_next_request(tmp_path, root, fault):
    with start_gateway(tmp_path, root, [fault]) as gw:
        add(gw, root, "a-v1")
        add(gw, root, "b-v1")
        gw.ok("POST", "/routes/worker/production", {"version": "a-v1"})
        gw.ok("POST", "/routes/worker/production", {"version": "b-v1"})
        assert gw.chat().headers["x-worker-adapter"] == "b-v1"
        loads_before = list(fault.loads)
        gw.ok("POST", "/routes/worker/rollback")
        assert gw.chat().headers["x-worker-adapter"] == "a-v1"
        assert fault.loads == loads_before  # the rollback target was still loaded


def test_a_restarted_gateway_comes_back_with_everything_and_re_applies_it(tmp_path, root):
    with FaultUpstream() as fault:
        port = fault.port
        with start_gateway(tmp_path, root, [fault]) as gw:
            for name in ("a-v1", "b-v1", "c-v1", "d-v1"):
                add(gw, root, name)
            gw.ok("POST", "/routes/worker/production", {"version": "a-v1"})
            gw.ok("POST", "/routes/worker/production", {"version": "b-v1"})
            gw.ok("POST", "/routes/worker/canary", {"candidate": "c-v1", "percent": 30, "sticky_by": "session"})
            gw.ok("POST", "/routes/worker/shadow", {"candidate": "d-v1", "sample_rate": 0.25})
            before = gw.ok("GET", "/state")
            cohort = {s: gw.ok("GET", "/resolve", session=s)["kind"] for s in (f"s-{i}" for i in range(50))}
    # the engine restarted too: it has no adapters
    with FaultUpstream(port) as fresh, RunningGateway(tmp_path / "gw" / "gateway.toml") as gw:
        after = gw.ok("GET", "/state")
        assert {k: after[k] for k in ("revision", "routes", "adapters")} == {
            k: before[k] for k in ("revision", "routes", "adapters")}
        assert sorted(fresh.adapters) == ["a-v1", "b-v1", "c-v1", "d-v1"]
        assert {s: gw.ok("GET", "/resolve", session=s)["kind"] for s in cohort} == cohort
        assert gw.chat().headers["x-worker-adapter"] == "b-v1"
        assert 'worker_gateway_canary_percent{candidate="c-v1",route="worker"} 30.0' in gw.metrics()


@pytest.mark.parametrize(("method", "path", "body", "params"), [
    ("POST", "/adapters", {"name": "a-v1", "path": "a\u0000b"}, {}),
    ("POST", "/adapters", {"name": "a\u0000v1", "path": "a-v1"}, {}),
    ("POST", "/routes/wor%00ker/production", {"version": "worker-base"}, {}),
    ("POST", "/routes/worker/production", {"version": "a\u0000"}, {}),
    ("POST", "/routes/worker/canary", {"candidate": "\u0000", "percent": 5}, {}),
    ("GET", "/resolve", None, {"model": "x\u0000y"}),
    ("GET", "/requests", None, {"limit": "lots"}),
])
def test_bad_admin_input_is_a_4xx_with_a_message(tmp_path, root, no_upstream, method, path, body, params):
    """Issue 14 item 8 and its siblings: no admin input is a 500."""
    with start_gateway(tmp_path, root, [no_upstream]) as gw:
        response = gw.admin(method, path, body, **params)
        assert 400 <= response.status_code < 500, response.text
        assert response.json()["error"]["message"]


def test_a_deeply_nested_admin_body_is_a_4xx(tmp_path, root, no_upstream):
    with start_gateway(tmp_path, root, [no_upstream]) as gw:
        response = gw.client.post("/admin/adapters", content=b"[" * 100_000,
                                  headers={"Authorization": "Bearer test-admin-token",
                                           "Content-Type": "application/json"})
        assert 400 <= response.status_code < 500, response.text
        assert response.json()["error"]["message"]


def test_loading_refuses_files_swapped_for_links_outside_the_root(tmp_path, root, fault):
    """Issue 14 item 15 at load time: a file replaced by a link after registration."""
    with start_gateway(tmp_path, root, [fault]) as gw:
        add(gw, root, "a-v1", load=False)
        outside = tmp_path / "outside.safetensors"
        weights = root / "a-v1" / "adapter_model.safetensors"
        outside.write_bytes(weights.read_bytes())
        weights.unlink()
        weights.symlink_to(outside)
        response = gw.admin("POST", "/adapters/a-v1/load")
        assert status_and_code(response) == (409, "files_changed")
        assert "outside the adapter root" in response.json()["error"]["message"]
        assert fault.loads == []  # the stand-in engine was never asked to load
