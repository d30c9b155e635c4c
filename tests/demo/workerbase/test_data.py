"""The worker base's training data: disjoint from what the demo scores, valid, and honest about rules."""

from __future__ import annotations

import json
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from core.records import TrainingExample
from demo.memory import ONE_RULE_TEXT, RULES
from demo.pack import write_pack
from demo.scenarios import KITS
from demo.workerbase.build import BaseSettings
from demo.workerbase.data import build_examples
from replay.memory.inject import RULES_CLOSE, RULES_OPEN
from replay.sandbox.pack import load_pack
from serve.engine.train import examples_sha256

EXAMPLES = build_examples(BaseSettings().examples, BaseSettings().seed)


def _tool_names(example: TrainingExample) -> set[str]:
    return {t["function"]["name"] for t in example.request.tools}


def _text(example: TrainingExample) -> str:
    return json.dumps(example.model_dump(mode="json"))


def _standing_rules(example: TrainingExample) -> str:
    system = str(example.request.messages[0]["content"])
    return system.partition(RULES_OPEN)[2].partition(RULES_CLOSE)[0]


@pytest.fixture(scope="module")
def scored(tmp_path_factory: pytest.TempPathFactory) -> tuple[set[str], set[str], set[str]]:
    """(workspaces, tool names, rule texts) of the demo suite and the whole sandbox pack."""
    pack = load_pack(write_pack(tmp_path_factory.mktemp("pack") / "pack"))
    workspaces = {kit.workspace for kit in KITS} | {s.workspace for s in pack.scenarios}
    tools = {t["function"]["name"] for kit in KITS for t in kit.tools} | {n for s in pack.scenarios for n in s.tools}
    rules = {rule.text for rules in RULES.values() for rule in rules} | {ONE_RULE_TEXT}
    return workspaces, tools, rules


def test_training_data_shares_no_workspace_tool_or_rule_with_what_the_demo_scores(
        scored: tuple[set[str], set[str], set[str]]) -> None:
    workspaces, tools, rules = scored
    assert not {e.workspace for e in EXAMPLES} & workspaces
    assert not set().union(*(_tool_names(e) for e in EXAMPLES)) & tools
    words = re.compile(r"\b(" + "|".join(sorted(tools)) + r")\b")
    for example in EXAMPLES:
        text = _text(example)
        assert not words.search(text), f"{example.id} names a demo tool: {words.search(text)}"
        assert not any(rule in text for rule in rules), f"{example.id} carries a demo rule"


def test_every_answer_is_a_valid_call_of_its_own_tool_list() -> None:
    for example in EXAMPLES:
        schemas = {t["function"]["name"]: t["function"]["parameters"] for t in example.request.tools}
        assert example.answer.tool in schemas, example.id
        schema = schemas[example.answer.tool]
        keys = set(example.answer.arguments)
        assert set(schema["required"]) <= keys <= set(schema["properties"]), example.id


def test_an_answer_only_a_rule_can_justify_always_comes_with_that_rule() -> None:
    """A repeat of the rejected call, or a review/queue tool, is never trained without a standing
    rule that names it: the base must not learn to do either on its own."""
    for example in EXAMPLES:
        rules = _standing_rules(example)
        rejected = [c["function"] for m in example.request.messages for c in m.get("tool_calls") or ()]
        repeats = any(f["name"] == example.answer.tool and json.loads(f["arguments"]) == example.answer.arguments
                      for f in rejected)
        fallback = example.answer.tool is not None and example.answer.tool.startswith(("request_", "queue_"))
        if repeats:
            assert "again" in rules or "resend" in rules or "repeat" in rules or "retry" in rules, example.id
        if fallback:
            assert example.answer.tool in rules, example.id


def test_the_split_carries_every_kind_with_and_without_memory() -> None:
    clusters = {e.cluster for e in EXAMPLES}
    assert clusters == {f"wb/{k}" for k in ("action", "flow", "error-fix", "rule-recovery", "redirect", "key-rule",
                                            "retry")}
    with_rules = sum(bool(_standing_rules(e)) for e in EXAMPLES)
    assert 0.3 * len(EXAMPLES) < with_rules < 0.9 * len(EXAMPLES)


@settings(max_examples=10, deadline=None)
@given(st.integers(min_value=0, max_value=2**32))
def test_the_same_seed_draws_the_same_examples(seed: int) -> None:
    assert examples_sha256(build_examples(20, seed)) == examples_sha256(build_examples(20, seed))
    assert examples_sha256(build_examples(20, seed)) != examples_sha256(build_examples(20, seed + 1))

