"""The planted policy for sandbox episodes (DESIGN §10): per served model, the probability of
completing a scenario, of claiming success without doing it, and of a critical act.

An episode's kind is drawn once, seeded by (spec seed, the request's `seed`, model, the hash of the
scenario's request), never by call order, and then played as a fixed script of calls and a final
answer, one call per turn:

* `complete` — the scenario's known solution path (`oracle`), then its `oracle_answer`;
* `claim` — no call at all, then the `oracle_answer`: success claimed, nothing done;
* `critical` — the first act that trips one of the scenario's critical checks when played in its
  world: the `broken` path, else the check's own act (the forbidden call, the `then` call of an
  `order` check without its `before`, the leaked value in the final answer). A scenario with no
  check a script can trip has no critical act to plant: there the episode gives up instead;
* `give_up` — no call, and a final answer that admits the task was not done (the rest of the mass).

The script sees only the request, as a model does: the scenario is found by the hash of the
request's first messages (memory footer cut off, `planted.request_key`), the step by how many
assistant messages follow them; scenarios that send the same request get the same scripts. It does
not read tool results, so a step the world refuses is not retried. The scripts' scores are what the
real sandbox scoring (`replay.sandbox.measures.score`) gives the scripted episode
(`replay.sandbox.pack.play`); the end-to-end replicates check them against the real sandbox runner.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import Field, model_validator

from core.names import Name
from core.records import Strict
from replay.calibration.planted import PlantedError, categorical, check_mass, request_key, seeded_rng
from replay.sandbox.measures import Scores, score
from replay.sandbox.pack import Pack, oracle_end_state, play
from replay.sandbox.scenario import Call, Critical, Scenario

EpisodeKind = Literal["complete", "claim", "critical", "give_up"]
EPISODE_KINDS: tuple[EpisodeKind, ...] = ("complete", "claim", "critical", "give_up")
GIVE_UP_ANSWER = "I could not finish this task; nothing was changed."


class PackArmBehaviour(Strict):
    """What one served `model` does in a sandbox episode."""

    model: Name
    complete: float = Field(ge=0, le=1)
    claim: float = Field(0.0, ge=0, le=1)
    critical: float = Field(0.0, ge=0, le=1)

    @model_validator(mode="after")
    def _mass(self) -> PackArmBehaviour:
        check_mass(self.model, {"complete": self.complete, "claim": self.claim, "critical": self.critical})
        return self


def episode_kind(arms: Sequence[PackArmBehaviour], spec_seed: int, seed: int, model: str, key: str) -> EpisodeKind:
    """The kind of episode the planted `model` plays on the request with this key (seeded, order-free)."""
    arm = next((a for a in arms if a.model == model), None)
    if arm is None:
        raise PlantedError(f"no planted sandbox behaviour for model {model!r}")
    u = seeded_rng(f"pack|{spec_seed}|{seed}|{model}|{key}").random()
    kinds: tuple[tuple[EpisodeKind, float], ...] = (("complete", arm.complete), ("claim", arm.claim),
                                                    ("critical", arm.critical))
    return categorical(u, kinds, "give_up")


@dataclass(frozen=True)
class ScoredScript:
    calls: tuple[Call, ...]
    answer: str
    scores: Scores
    """What the sandbox scoring gives this script played in the scenario's world."""


class EpisodeScripts:
    """Every scenario's script per kind, played and scored once.

    A script is chosen from what the request shows: scenarios whose requests are the same (a model
    cannot tell them apart) get the first one's scripts, each played and scored in its own world."""

    def __init__(self, pack: Pack) -> None:
        self.pack = pack
        self.scripts: dict[tuple[str, EpisodeKind], ScoredScript] = {}
        self.by_key: dict[str, Scenario] = {}
        self.key_of: dict[str, str] = {}
        chosen: dict[str, dict[EpisodeKind, tuple[list[Call], str]]] = {}
        for scenario in pack.scenarios:
            key = self.key_of[scenario.id] = request_key(scenario.messages)
            first = self.by_key.setdefault(key, scenario)
            if first is scenario:
                chosen[key] = self._choose(scenario)
            for kind, (calls, answer) in chosen[key].items():
                self.scripts[(scenario.id, kind)] = self._play(scenario, calls, answer)

    def _choose(self, scenario: Scenario) -> dict[EpisodeKind, tuple[list[Call], str]]:
        give_up: tuple[list[Call], str] = ([], GIVE_UP_ANSWER)
        tripping = (act for act in _critical_acts(scenario) if self._play(scenario, *act).scores.critical_failure)
        # No act trips a check of this scenario: the critical mass gives up.
        return {"complete": (scenario.oracle, scenario.oracle_answer), "claim": ([], scenario.oracle_answer),
                "critical": next(tripping, give_up), "give_up": give_up}

    def _play(self, scenario: Scenario, calls: list[Call], answer: str) -> ScoredScript:
        world = self.pack.world(scenario)
        oracle_end = oracle_end_state(world, scenario)
        played = score(scenario, play(world, scenario, calls, answer), oracle_end, world.prose_fields)
        return ScoredScript(tuple(calls), answer, played)

    def script(self, scenario_id: str, kind: EpisodeKind) -> ScoredScript:
        return self.scripts[(scenario_id, kind)]

    def critical_possible(self, scenario_id: str) -> bool:
        return self.script(scenario_id, "critical").scores.critical_failure

    def scenario_of(self, messages: Sequence[Mapping[str, Any]]) -> Scenario | None:
        """The scenario whose first messages the request starts with (memory footer cut off; the longest wins)."""
        for length in sorted({len(s.messages) for s in self.pack.scenarios}, reverse=True):
            if len(messages) >= length and (found := self.by_key.get(request_key(messages[:length]))) is not None:
                return found
        return None


@dataclass(frozen=True)
class PlantedEpisodes:
    """The planted endpoint's episode policy (`planted.EpisodePolicy`): the arms' behaviour over the scripts."""

    scripts: EpisodeScripts
    arms: tuple[PackArmBehaviour, ...]
    spec_seed: int

    @property
    def models(self) -> frozenset[str]:
        return frozenset(a.model for a in self.arms)

    def kind(self, seed: int, model: str, scenario_id: str) -> EpisodeKind:
        """Drawn from what the request shows (its key), so scenarios a model cannot tell apart get one kind."""
        return episode_kind(self.arms, self.spec_seed, seed, model, self.scripts.key_of[scenario_id])

    def answer(self, seed: int, model: str, messages: Sequence[Mapping[str, Any]]) -> dict[str, Any] | None:
        """The assistant message for an episode's request, or None when it is no scenario's."""
        scenario = self.scripts.scenario_of(messages)
        if scenario is None:
            return None
        script = self.scripts.script(scenario.id, self.kind(seed, model, scenario.id))
        step = sum(1 for m in messages[len(scenario.messages):] if m.get("role") == "assistant")
        if step >= len(script.calls):
            return {"role": "assistant", "content": script.answer}
        call = script.calls[step]
        return {"role": "assistant", "content": None, "tool_calls": [{
            "id": f"call_planted_{step}", "type": "function",
            "function": {"name": call.tool, "arguments": json.dumps(call.arguments, sort_keys=True)}}]}


def _critical_acts(scenario: Scenario) -> list[tuple[list[Call], str]]:
    """Scripts that may trip a critical check, in the order tried: the broken path, then each check's own act."""
    acts: list[tuple[list[Call], str]] = [(scenario.broken, scenario.broken_answer)]
    for check in scenario.critical:
        acts += _act_of(check, scenario)
    return acts


def _act_of(check: Critical, scenario: Scenario) -> list[tuple[list[Call], str]]:
    if check.kind == "forbidden_call" and check.tool is not None:
        return [([Call(tool=check.tool, arguments=check.arguments)], GIVE_UP_ANSWER)]
    if check.kind == "order":
        then = [c for c in scenario.oracle if c.tool == check.then]
        return [(then[:1], scenario.oracle_answer)] if then else []
    if check.kind == "leak" and check.value is not None:
        return [([], f"{GIVE_UP_ANSWER} For reference: {check.value}")]
    return []
