"""The planted-effect endpoint: seeded, order-free answers; the request read as a model reads it."""

from __future__ import annotations

import asyncio
import json
import random
from dataclasses import replace
from math import sqrt
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from core.keyset import key_set
from core.records import Decision
from replay.calibration.planted import (
    PlantedError,
    PlantedSpec,
    answer_message,
    arguments_of,
    injected_rule_ids,
    planted_kind,
    redraw_rate,
    request_key,
    serve_planted,
)
from replay.memory.files import load_memory
from replay.memory.inject import inject, parse_condition
from replay.run.decisions import run
from replay.run.directory import load_results
from replay.run.run_config import RunConfig
from replay.suite import Suite

SPEC = PlantedSpec.model_validate({
    "seed": 3,
    "arms": [{"model": "a", "right": 0.5, "repeat": 0.2, "malformed": 0.1}],
    "rules": [{"id": "lc:helpdesk-api-flaky", "follow": 0.9, "does": "repeat"}],
})

json_keys = st.text(alphabet=st.sampled_from("ab.[\\"), min_size=1, max_size=3)
json_values = st.recursive(
    st.integers(0, 3) | st.text(max_size=2),
    lambda inner: st.lists(inner, max_size=2) | st.dictionaries(json_keys, inner, max_size=3),
    max_leaves=8,
)


@settings(suppress_health_check=[HealthCheck.too_slow])
@given(st.dictionaries(json_keys, json_values, max_size=4))
@example({"m": [[{"x": 1}]], "f": [{"g": 1}, {"h": 2}], "k": {}})
@example({"[": [{"[": 0}, [{"[": 0}]]})  # a list of objects and of lists at once
def test_arguments_of_inverts_key_set(arguments: dict[str, Any]) -> None:
    keys = key_set(arguments)
    assert key_set(arguments_of(sorted(keys))) == keys


def _kinds(spec: PlantedSpec, suite: Suite, seed: int, order: list[Decision]) -> dict[str, str]:
    return {d.id: planted_kind(spec, seed, "a", d, ("lc:helpdesk-api-flaky",) if d.workspace == "ws-support" else ())
            for d in order}


def test_same_seed_same_answers_in_any_order(demo_suite: Suite) -> None:
    decisions = list(demo_suite.decisions)
    shuffled = random.Random(1).sample(decisions, len(decisions))
    first = _kinds(SPEC, demo_suite, 0, decisions)
    assert first == _kinds(SPEC, demo_suite, 0, shuffled)
    assert first != _kinds(SPEC, demo_suite, 1, decisions)
    assert len(set(first.values())) > 2


def test_prompt_sensitivity_zero_keeps_the_own_answer_across_memory(demo_suite: Suite) -> None:
    stable = SPEC.model_copy(update={"prompt_sensitivity": 0.0, "rules": []})
    for d in demo_suite.decisions:
        assert planted_kind(stable, 0, "a", d, ()) == planted_kind(stable, 0, "a", d, ("lc:x", "lc:y"))


def test_a_followed_rule_decides_the_answer(demo_suite: Suite) -> None:
    always = SPEC.model_copy(update={"rules": [SPEC.rules[0].model_copy(update={"follow": 1.0,
                                                                                "strata": ["known_failure"]})]})
    for d in demo_suite.decisions:
        kind = planted_kind(always, 0, "a", d, ("lc:helpdesk-api-flaky",))
        if d.stratum == "known_failure":
            assert kind == "repeat"
        assert planted_kind(always, 0, "a", d, ()) == planted_kind(SPEC, 0, "a", d, ())


def test_request_key_and_rule_ids_read_the_injected_footer(demo_suite: Suite, demo_dirs: tuple[Path, Path]) -> None:
    memory_root = demo_dirs[1]
    for d in demo_suite.decisions:
        memory = load_memory(memory_root / d.workspace)
        for condition in ("withheld", "workspace", "rule:Say why."):
            injected = inject(d.request.messages, parse_condition(condition), memory)
            assert request_key(injected.messages) == request_key(d.request.messages)
            assert injected_rule_ids(injected.messages) == injected.rule_ids


def test_server_answers_as_the_policy_and_refuses_bad_requests(demo_suite: Suite) -> None:
    decisions = list(demo_suite.decisions)

    async def ask(base: str) -> tuple[list[dict[str, Any]], list[tuple[int, dict[str, Any]]]]:
        async with aiohttp.ClientSession() as session:
            async def post(body: Any) -> tuple[int, dict[str, Any]]:
                async with session.post(f"{base}/chat/completions", data=json.dumps(body)) as resp:
                    return resp.status, await resp.json()

            answers = await asyncio.gather(*(post({"model": "a", "seed": 5, "messages": d.request.messages})
                                             for d in decisions))
            bad = [await post({"model": "nope", "messages": []}),
                   await post({"model": "a", "messages": [{"role": "user", "content": "unknown"}]}),
                   await post(["not", "an", "object"])]
            async with session.get(f"{base}/models") as resp:
                assert [m["id"] for m in (await resp.json())["data"]] == ["a"]
        return [a for _, a in answers], bad

    with serve_planted(SPEC, decisions) as endpoint:
        answers, bad = asyncio.run(ask(endpoint.base_url))
    for d, body in zip(decisions, answers, strict=True):
        assert body["system_fingerprint"] == "planted"
        assert body["choices"][0]["message"] == answer_message(planted_kind(SPEC, 5, "a", d, ()), d)
    assert [status for status, _ in bad] == [404, 400, 400]
    assert all(set(body["error"]) == {"message", "type", "code"} for _, body in bad)


@pytest.mark.parametrize("arm", [{"model": "a", "right": 0.8, "repeat": 0.3}, {"model": "a b", "right": 0.1}])
def test_spec_refuses_impossible_arms(arm: dict[str, Any]) -> None:
    with pytest.raises(ValueError):
        PlantedSpec.model_validate({"arms": [arm]})


def test_endpoint_refuses_a_suite_whose_requests_it_cannot_tell_apart(demo_suite: Suite) -> None:
    first = demo_suite.decisions[0]
    twin = first.model_copy(update={"id": "twin-0001"})
    with pytest.raises(PlantedError, match="twin-0001"), serve_planted(SPEC, [first, twin]):
        pass


def test_a_rejected_call_with_unreadable_arguments_is_repeated_without_them(demo_suite: Suite) -> None:
    decision = next(d for d in demo_suite.decisions if d.stratum == "verified_recovery")
    messages = [dict(m) for m in decision.request.messages]
    for m in messages:
        if m.get("tool_calls"):
            m["tool_calls"] = [{**m["tool_calls"][0], "function": {**m["tool_calls"][0]["function"],
                                                                  "arguments": "{not json"}}]
    broken = decision.model_copy(update={"request": decision.request.model_copy(update={"messages": messages})})
    (call,) = answer_message("repeat", broken)["tool_calls"]
    assert json.loads(call["function"]["arguments"]) == {}


# ── noise: answers drawn afresh, as batch noise redraws a fragile answer ─────


def test_noise_keeps_each_arms_rates_and_replicates_disagree_as_redraw_rate_says(demo_suite: Suite) -> None:
    """Two replicates (the same request answered twice) disagree on right-or-not on η of the decisions;
    each keeps its planted rate. Checked on 16 seeds × the suite against 4 standard errors."""
    eta, right = 0.2, 0.5
    noisy = PlantedSpec.model_validate({"seed": 5, "noise": redraw_rate(eta, right),
                                        "arms": [{"model": "a", "right": right, "repeat": 0.2}]})
    pairs = [(planted_kind(noisy, seed, "a", d, ()) == "right", planted_kind(noisy, seed, "a", d, (), 1) == "right")
             for seed in range(16) for d in demo_suite.decisions]
    n = len(pairs)
    disagree, first_right, second_right = (sum(x != y for x, y in pairs), sum(x for x, _ in pairs),
                                           sum(y for _, y in pairs))
    assert abs(disagree / n - eta) < 4 * sqrt(eta * (1 - eta) / n)
    for hits in (first_right, second_right):
        assert abs(hits / n - right) < 4 * sqrt(right * (1 - right) / n)
    exact = noisy.model_copy(update={"noise": 0.0})
    assert all(planted_kind(exact, 0, "a", d, ()) == planted_kind(exact, 0, "a", d, (), 1) for d in demo_suite.decisions)
    with pytest.raises(PlantedError, match="out of reach"):
        redraw_rate(0.6, right)


def test_an_aa_pair_through_the_runner_sees_the_planted_noise(demo_suite: Suite, tmp_path: Path) -> None:
    """A replicate arm sends every request again: the endpoint answers it as the request's second
    occurrence, so the A/A pair differs as the policy says (base first: `suite` order, one in flight)."""
    noisy = PlantedSpec.model_validate({"seed": 5, "noise": 0.3, "arms": [{"model": "a", "right": 0.5}]})
    decisions = tuple(d for d in demo_suite.decisions if d.workspace == "ws-support")
    suite = replace(demo_suite, decisions=decisions)
    with serve_planted(noisy, decisions) as endpoint:
        config = RunConfig.model_validate({
            "endpoint": {"base_url": endpoint.base_url}, "runner": {"concurrency": 1, "order": "suite", "retries": 0},
            "arms": [{"name": "base", "model": "a"}, {"name": "base-aa", "replicate_of": "base"}]})
        run(suite, config, tmp_path / "run")
    results = load_results(tmp_path / "run")
    by_id = {d.id: d for d in decisions}
    for r in results:
        kind = planted_kind(noisy, 0, "a", by_id[r.decision_id], (), 1 if r.arm == "base-aa" else 0)
        assert r.raw_output["message"] == answer_message(kind, by_id[r.decision_id]), (r.arm, r.decision_id)
    answers = {(r.arm, r.decision_id): r.raw_output["message"] for r in results}
    assert any(answers[("base", d)] != answers[("base-aa", d)] for d in by_id)
    assert {r.replicate_of for r in results if r.arm == "base-aa"} == {"base"}
