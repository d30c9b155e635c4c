"""`worker-demo loop`'s curation policy: the shipped S1.1 policy changed on its parsed form (shortfall shrinks, the
planted explorer among the worker's models, the near-duplicate rule off because the loop's two sessions are one
task, no per-tool cap because every correction calls one tool), everything else as shipped; the written TOML reads
back the same."""

from __future__ import annotations

from pathlib import Path

from demo.loop import EXPLORER, POLICY, loop_policy
from replay.curation.curation_policy import load_policy


def test_the_loop_policy_is_the_shipped_one_shrunk_with_the_explorer(tmp_path: Path) -> None:
    shipped, _ = load_policy(POLICY)
    loop, _ = load_policy(loop_policy(tmp_path))
    assert loop.shortfall == "shrink" and loop.worker_models == [EXPLORER, *shipped.worker_models]
    assert loop.near_duplicate_threshold == 1.0  # off; session and request-hash exclusion still hold
    assert loop.max_tool_share is None and shipped.max_tool_share is not None
    changed = {"shortfall", "worker_models", "near_duplicate_threshold", "max_tool_share"}
    assert loop.model_dump(exclude=changed) == shipped.model_dump(exclude=changed)
