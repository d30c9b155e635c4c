"""The demo scenario pack: deterministic, proven by its own check, disjoint from the training split."""

from __future__ import annotations

from pathlib import Path

import pytest

from core.errors import WorkerTierError
from demo.demo_data import TRAIN_JSONL, write_demo
from demo.scenario_pack import build_scenarios, write_pack
from demo.worlds import WORLDS
from replay.sandbox.pack import check_pack, load_pack, pack_stats


@pytest.fixture(scope="module")
def pack_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_pack(tmp_path_factory.mktemp("pack") / "pack", seed=0)


def test_the_same_seed_gives_the_same_bytes(pack_dir: Path, tmp_path: Path) -> None:
    again = write_pack(tmp_path / "again", seed=0)
    for name in ("pack.toml", "scenarios.jsonl"):
        assert (again / name).read_bytes() == (pack_dir / name).read_bytes()
    assert [s.id for s in build_scenarios(1)] == [s.id for s in build_scenarios(0)]
    assert build_scenarios(1) != build_scenarios(0)


def test_the_pack_is_frozen_and_large_enough(pack_dir: Path) -> None:
    pack = load_pack(pack_dir)
    stats = pack_stats(pack)
    assert pack.frozen and stats["scenarios"] >= 40 and len(stats["policy_families"]) >= 6
    assert set(stats["worlds"]) == set(WORLDS)
    assert all(s.claims and s.success.asserts for s in pack.scenarios)


def test_every_oracle_passes_and_every_broken_variant_fails(pack_dir: Path) -> None:
    results = check_pack(load_pack(pack_dir))
    assert [r.scenario for r in results if not r.oracle_passes] == []
    assert [r.scenario for r in results if not r.broken_fails] == []
    assert len(results) >= 40


def test_no_scenario_state_is_a_training_state(pack_dir: Path, tmp_path: Path) -> None:
    write_demo(tmp_path / "demo", seed=0)
    trained = {line for line in (tmp_path / "demo" / TRAIN_JSONL).read_text().splitlines()}
    training_users = {m["content"] for line in trained for m in __import__("json").loads(line)["request"]["messages"]
                      if m["role"] == "user"}
    for scenario in load_pack(pack_dir).scenarios:
        users = [m["content"] for m in scenario.messages if m["role"] == "user"]
        assert not set(users) & training_users, scenario.id


def test_the_demo_slice_is_lines_of_the_whole_pack(pack_dir: Path, tmp_path: Path) -> None:
    one = write_pack(tmp_path / "slice", seed=0, per_family=1)
    whole = set((pack_dir / "scenarios.jsonl").read_text().splitlines())
    lines = (one / "scenarios.jsonl").read_text().splitlines()
    assert len(lines) == 6 and set(lines) <= whole
    assert load_pack(one).manifest.name == "demo-sandbox-slice1"
    three = write_pack(tmp_path / "three", seed=0, per_family=1, families=("claims", "recover", "pii"))
    assert [s.id for s in load_pack(three).scenarios] == ["recover-01", "pii-01", "claims-01"]
    assert set((three / "scenarios.jsonl").read_text().splitlines()) <= set(lines)
    assert load_pack(three).manifest.name == "demo-sandbox-slice1-recover-pii-claims"
    with pytest.raises(WorkerTierError, match=r"unknown scenario families \['refunds'\]"):
        write_pack(tmp_path / "bad", families=("recover", "refunds"))
