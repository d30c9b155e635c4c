"""Kill -9 the gateway, restart the real engine under it, and check that everything comes back:
routes, rollback target, canary cohorts, shadow, adapters, and the adapters re-applied to the
fresh engine without any admin call. While the engine is down the gateway answers 503 with
Retry-After and recovers by itself.

This restarts the session's engine (about a minute and a half on two cores); the engine is
healthy again when the test ends, also when it fails.
"""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from tests.support.gateway_harness import GatewayProcess, wait_for, write_config
from tests.support.live import http_json

pytestmark = pytest.mark.engine

REPO = Path(__file__).resolve().parents[3]
RUN = uuid.uuid4().hex[:6]
C, D = f"gw-c-{RUN}", f"gw-d-{RUN}"


def engine_models(engine) -> set[str]:
    status, body = http_json("GET", f"{engine.base_url}/v1/models", timeout=5)
    return {m["id"] for m in body["data"]} if status == 200 else set()


def test_gateway_killed_and_engine_restarted_come_back_with_all_state(engine, seeded_adapters, tmp_path):
    config = write_config(tmp_path, [engine.base_url], seeded_adapters[1].parent,
                          extra="[shadow]\nqueue_size = 4\n")
    first = GatewayProcess(config, tmp_path / "gateway.log").start()
    second = GatewayProcess(config, tmp_path / "gateway.log")
    try:
        for name, seed in ((C, 1), (D, 2)):
            first.ok("POST", "/adapters", {"name": name, "path": seeded_adapters[seed].name})
            first.ok("POST", f"/adapters/{name}/load")
        first.ok("POST", "/routes/worker/production", {"version": D})
        first.ok("POST", "/routes/worker/production", {"version": C})  # D stays loaded as the rollback target
        first.ok("POST", "/routes/worker/canary", {"candidate": D, "percent": 30, "sticky_by": "session"})
        first.ok("POST", "/routes/worker/shadow", {"candidate": "worker-base", "sample_rate": 0.5})
        before = first.ok("GET", "/state")
        sessions = [f"s-{i}" for i in range(60)]
        cohort = {s: first.ok("GET", "/resolve", session=s)["kind"] for s in sessions}
        first.kill()

        engine.stop()
        second.start()  # the engine is down while the gateway starts
        down = second.chat()
        assert down.status_code == 503 and int(down.headers["retry-after"]) > 0
        assert down.json()["error"]["code"] == "engine_unavailable"
        after = second.ok("GET", "/state")
        assert {k: after[k] for k in ("revision", "routes", "adapters")} == {
            k: before[k] for k in ("revision", "routes", "adapters")}
        assert {s: second.ok("GET", "/resolve", session=s)["kind"] for s in sessions} == cohort

        engine.start()  # a fresh engine: it knows no adapters
        engine.wait_healthy()
        wait_for(lambda: second.client.get("/health").status_code == 200, "the gateway to see the engine",
                 limit_s=60)
        wait_for(lambda: {C, D} <= engine_models(engine), "the adapters to be re-applied", limit_s=60)
        if engine.log_path is not None:  # loaded twice: by the admin call, then by the re-apply
            log = engine.log_path.read_text(errors="replace")
            assert [log.count(f"Loaded new LoRA adapter: name '{name}'") for name in (C, D)] == [2, 2]
        production = second.chat()
        assert production.status_code == 200 and production.json()["model"] == C
        in_canary = next(s for s, kind in cohort.items() if kind == "canary")
        canary = second.chat({"X-Session-Id": in_canary})
        assert canary.headers["x-worker-kind"] == "canary" and canary.json()["model"] == D
        second.ok("POST", "/routes/worker/rollback")
        assert second.chat().json()["model"] == D  # the rollback target was re-applied too
    finally:
        first.kill()
        second.kill()
        if engine.proc is None or engine.proc.poll() is not None:
            engine.start()
            engine.wait_healthy()
