"""Sandbox episodes get the same memory injection as decision replay, per arm, from the demo's memory."""

from __future__ import annotations

from pathlib import Path

from demo.demo_data import write_demo
from demo.scenario_pack import write_pack
from replay.run.directory import manifest_diff
from replay.run.run_config import RunConfig
from replay.sandbox.pack import load_pack
from replay.sandbox.runner import plan_episodes, sandbox_manifest


def config(memory_root: Path) -> RunConfig:
    return RunConfig.model_validate({
        "endpoint": {"base_url": "http://127.0.0.1:9/v1"}, "memory": {"root": str(memory_root)},
        "arms": [{"name": "base", "model": "worker-base"},
                 {"name": "base+memory", "model": "worker-base", "memory": "workspace"},
                 {"name": "support-only", "model": "worker-base", "workspaces": ["ws-support"]}]})


def test_memory_is_injected_per_arm_and_done_episodes_are_skipped(tmp_path: Path) -> None:
    pack = load_pack(write_pack(tmp_path / "pack"))
    _, memory_root = write_demo(tmp_path / "demo")
    cfg = config(memory_root)
    items = plan_episodes(pack, cfg, done={("base", "recover-01")})
    by_arm: dict[str, list] = {}
    for item in items:
        by_arm.setdefault(item.arm.name, []).append(item)
    assert len(by_arm["base"]) == len(pack.scenarios) - 1
    assert all(i.messages == i.scenario.messages and not i.rule_ids for i in by_arm["base"])
    with_memory = by_arm["base+memory"]
    assert all("<memory>" in i.messages[0]["content"] for i in with_memory)
    assert all(i.messages[1:] == i.scenario.messages[1:] for i in with_memory)
    assert any(i.rule_ids for i in with_memory)
    assert {i.scenario.workspace for i in by_arm["support-only"]} == {"ws-support"}


def test_a_changed_pack_or_endpoint_kind_is_a_different_run(tmp_path: Path) -> None:
    cfg = config(tmp_path)
    one = load_pack(write_pack(tmp_path / "one", seed=0))
    two = load_pack(write_pack(tmp_path / "two", seed=1))
    served = {cfg.endpoint.base_url: ["worker-base"]}
    base = sandbox_manifest(cfg, one, served, None, "engine")
    assert manifest_diff(base, sandbox_manifest(cfg, one, served, None, "engine")) == []
    assert any(d.startswith("pack.sha256") for d in manifest_diff(base, sandbox_manifest(cfg, two, {}, None, "engine")))
    assert manifest_diff(base, sandbox_manifest(cfg, one, {}, None, "gateway")) == ["endpoint_kind: 'engine' -> 'gateway'"]


def test_an_arm_on_its_own_endpoint_is_named_in_the_sandbox_manifest(tmp_path: Path) -> None:
    """As `worker-replay run`'s run.json: each arm's own endpoint and what it served, beside the run's."""
    cfg = config(tmp_path)
    own = "http://127.0.0.1:8001/v1"
    cfg = cfg.model_copy(update={"arms": [*cfg.arms, cfg.arms[0].model_copy(update={"name": "q", "base_url": own})]})
    pack = load_pack(write_pack(tmp_path / "one", seed=0))
    manifest = sandbox_manifest(cfg, pack, {cfg.endpoint.base_url: ["worker-base"], own: ["worker-q"]}, None, "engine")
    assert manifest["models"] == ["worker-base"] and manifest["arm_endpoints"] == {own: ["worker-q"]}
    assert "arm_endpoints" not in sandbox_manifest(config(tmp_path), pack, {}, None, "engine")
