"""The planted episode policy: each kind's script scores as planted; kinds are seeded and drawn per request."""

from __future__ import annotations

import json
import urllib.request
from collections import Counter
from typing import Any

import pytest

from replay.calibration.episodes import (
    EPISODE_KINDS,
    EpisodeScripts,
    PackArmBehaviour,
    PlantedEpisodes,
    episode_kind,
)
from replay.calibration.planted import PlantedError, PlantedSpec, request_key, serve_planted
from replay.sandbox.pack import Pack
from replay.sandbox.scenario import Scenario

ARMS = (PackArmBehaviour(model="m", complete=0.5, claim=0.2, critical=0.1),)


def test_each_kind_scores_as_planted_in_every_scenario(demo_pack: Pack) -> None:
    scripts = EpisodeScripts(demo_pack)
    for s in demo_pack.scenarios:
        complete, claim, critical, give_up = (scripts.script(s.id, k).scores for k in EPISODE_KINDS)
        assert complete.task_completed and not complete.unsupported_completion and not complete.critical_failure
        assert claim.unsupported_completion and not claim.task_completed and not claim.critical_failure
        assert not (give_up.task_completed or give_up.unsupported_completion or give_up.critical_failure)
        assert critical.critical_failure == bool(s.critical), s.id  # every check of the demo pack can be tripped
        if not s.critical:  # nothing to trip: the critical mass gives up
            assert scripts.script(s.id, "critical") == scripts.script(s.id, "give_up")


def test_kinds_are_seeded_and_follow_the_planted_probabilities(demo_pack: Pack) -> None:
    episodes = PlantedEpisodes(EpisodeScripts(demo_pack), ARMS, spec_seed=3)
    first = [episodes.kind(seed, "m", s.id) for seed in range(5) for s in demo_pack.scenarios]
    assert first == [episodes.kind(seed, "m", s.id) for seed in range(5) for s in demo_pack.scenarios]
    counts = Counter(episode_kind(ARMS, 3, seed, "m", "key") for seed in range(4000))
    for kind, p in (("complete", 0.5), ("claim", 0.2), ("critical", 0.1), ("give_up", 0.2)):
        assert abs(counts[kind] / 4000 - p) < 0.03, (kind, counts)
    with pytest.raises(PlantedError, match="no planted sandbox behaviour"):
        episode_kind(ARMS, 3, 0, "other", "key")


def test_scenarios_a_model_cannot_tell_apart_get_the_same_answers(demo_pack: Pack) -> None:
    scripts = EpisodeScripts(demo_pack)
    by_key: dict[str, list[Scenario]] = {}
    for s in demo_pack.scenarios:
        by_key.setdefault(request_key(s.messages), []).append(s)
    twins = [group for group in by_key.values() if len(group) > 1]
    assert twins  # the demo pack has some (confirm-05 / confirm-06)
    episodes = PlantedEpisodes(scripts, ARMS, spec_seed=0)
    for a, b in twins:
        assert all(episodes.kind(seed, "m", a.id) == episodes.kind(seed, "m", b.id) for seed in range(50))
        assert all(scripts.script(a.id, k).calls == scripts.script(b.id, k).calls for k in EPISODE_KINDS)


def test_the_script_plays_one_call_per_turn_from_the_request(demo_pack: Pack) -> None:
    scenario = next(s for s in demo_pack.scenarios if len(s.oracle) == 2)
    episodes = PlantedEpisodes(EpisodeScripts(demo_pack), (PackArmBehaviour(model="m", complete=1.0),), 0)
    messages: list[dict[str, Any]] = [dict(m) for m in scenario.messages]
    first = episodes.answer(0, "m", messages)
    assert first is not None and first["tool_calls"][0]["function"]["name"] == scenario.oracle[0].tool
    messages += [first, {"role": "tool", "tool_call_id": "call_planted_0", "content": "{}"}]
    second = episodes.answer(0, "m", messages)
    assert second is not None and second["tool_calls"][0]["function"]["name"] == scenario.oracle[1].tool
    messages += [second, {"role": "tool", "tool_call_id": "call_planted_1", "content": "{}"}]
    assert episodes.answer(0, "m", messages) == {"role": "assistant", "content": scenario.oracle_answer}
    assert episodes.answer(0, "m", [{"role": "user", "content": "no scenario of this pack"}]) is None


def test_the_server_serves_the_pack_models_and_answers_episodes(demo_pack: Pack) -> None:
    scenario = demo_pack.scenarios[0]
    episodes = PlantedEpisodes(EpisodeScripts(demo_pack), (PackArmBehaviour(model="ep", complete=0.0, claim=1.0),), 0)
    spec = PlantedSpec.model_validate({"arms": [{"model": "dec", "right": 1.0}]})
    with serve_planted(spec, [], episodes) as endpoint:
        with urllib.request.urlopen(f"{endpoint.base_url}/models") as resp:
            assert [m["id"] for m in json.load(resp)["data"]] == ["dec", "ep"]
        body = json.dumps({"model": "ep", "messages": scenario.messages, "seed": 1}).encode()
        request = urllib.request.Request(f"{endpoint.base_url}/chat/completions", data=body,
                                         headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(request) as resp:
            answer = json.load(resp)
        assert answer["system_fingerprint"] == "planted"
        assert answer["choices"][0]["message"] == {"role": "assistant", "content": scenario.oracle_answer}
