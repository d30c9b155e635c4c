"""The slow loop's sandbox world (demo/loop_world.py) on its own, without an engine: the planted failure
refuses INV-7 with its reason, and a known failure's scenario written as the loop writes its pack proves itself
(the corrected call completes it, the failed one does not)."""

from __future__ import annotations

import tomllib
from datetime import UTC, datetime
from pathlib import Path

from demo.loop_world import LOOP_WORLD, PLANTED, TOOL, scenario_for, write_loop_pack
from replay.sandbox.pack import PACK_TOML, check_pack, load_pack
from replay.sandbox.world import Episode

MESSAGES = [{"role": "user", "content": "Is INV-7 paid?"}]


def test_the_planted_merge_refuses_inv_7_and_inv_8_is_found() -> None:
    episode = Episode.start(LOOP_WORLD, PLANTED, [TOOL], datetime(2026, 12, 1, tzinfo=UTC), 0)
    refused = episode.call(TOOL, {"id": "INV-7"})
    assert refused["error"]["code"] == "merged" and "INV-8" in refused["error"]["message"]
    assert episode.call(TOOL, {"id": "INV-8"}) == {"id": "INV-8", "status": "paid"}
    assert [(a.ok, a.kind) for a in episode.actions] == [(False, "failed"), (True, "ok")]
    assert episode.ctx.done and episode.snapshot()["viewed"] == {"INV-8": True}


def test_a_known_failure_becomes_a_frozen_pack_whose_scenario_proves_itself(tmp_path: Path) -> None:
    scenario = scenario_for("sess-1.3", "ws-agent", MESSAGES, {"id": "INV-7"}, {"id": "INV-8"})
    pack = load_pack(write_loop_pack(tmp_path / "pack", [scenario]))
    assert pack.frozen and tomllib.loads((tmp_path / "pack" / PACK_TOML).read_text())["worlds"] == "demo.loop_world"
    assert [s.id for s in pack.scenarios] == ["loop-sess-1-3"] and pack.scenarios[0].decision == "sess-1.3"
    [check] = check_pack(pack)
    assert check.oracle_passes and check.broken_fails, check
