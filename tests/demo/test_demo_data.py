"""The deterministic demo: suite, training split and workspace memory."""

from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path

import pytest

from core.keyset import sorted_key_set
from core.records import BUILTIN_STRATA, Decision, TrainingExample
from demo.demo_data import TRAIN_JSONL, write_demo
from demo.memory import GENUINE_RULE_IDS, HARMFUL_RULE_IDS, ONE_RULE_TEXT, RULES
from replay.memory.contract import check_memory, has_violations
from replay.memory.files import load_memory
from replay.suite import load_suite, validate_suite
from replay.suite_checks import request_hash

RULE_LINE = re.compile(r"^- (?P<text>.+) <!-- lc:(?P<slug>[a-z0-9-]+)(?: evidence:(?P<evidence>[a-z-]+))? -->$")


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("demo")
    write_demo(out, seed=0)
    return out


def files_of(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def train_of(demo: Path) -> list[TrainingExample]:
    return [TrainingExample.model_validate_json(line) for line in (demo / TRAIN_JSONL).read_text().splitlines()]


def test_same_seed_same_bytes(demo: Path, tmp_path: Path) -> None:
    write_demo(tmp_path / "again", seed=0)
    assert files_of(tmp_path / "again") == files_of(demo)


def test_other_seed_other_decisions(demo: Path, tmp_path: Path) -> None:
    write_demo(tmp_path / "other", seed=1)
    assert (tmp_path / "other/suite/decisions.jsonl").read_bytes() != (demo / "suite/decisions.jsonl").read_bytes()


def test_refuses_to_overwrite(demo: Path) -> None:
    with pytest.raises(FileExistsError):
        write_demo(demo)


def test_suite_is_valid_frozen_and_has_every_stratum(demo: Path) -> None:
    assert validate_suite(demo / "suite") == []
    suite = load_suite(demo / "suite")
    assert suite.frozen
    counts = Counter(d.stratum for d in suite.decisions)
    assert set(counts) == set(BUILTIN_STRATA)
    held_out = sum(n for s, n in counts.items() if s != "training_sanity")
    assert 48 <= held_out <= 64
    assert counts["training_sanity"] == 24
    assert len({d.workspace for d in suite.decisions}) == 4


def test_no_call_targets_use_auto_and_calls_mostly_required(demo: Path) -> None:
    suite = load_suite(demo / "suite")
    no_call = [d for d in suite.decisions if d.target is not None and d.target.tool is None]
    assert 2 <= len(no_call) <= 8
    assert all(d.request.tool_choice == "auto" for d in no_call)
    required = sum(1 for d in suite.decisions if d.request.tool_choice == "required")
    assert required >= 0.9 * len(suite.decisions)


def test_recoveries_follow_a_rejected_call_with_a_different_tool(demo: Path) -> None:
    for d in load_suite(demo / "suite").decisions:
        if d.stratum != "verified_recovery":
            continue
        last_call, tool_result = d.request.messages[-2], d.request.messages[-1]
        assert tool_result["role"] == "tool" and "error" in json.loads(tool_result["content"])
        rejected = last_call["tool_calls"][0]["function"]["name"]
        assert d.target is not None and d.target.tool not in (None, rejected)


def test_known_failures_carry_the_failed_action(demo: Path) -> None:
    failures = [d for d in load_suite(demo / "suite").decisions if d.stratum == "known_failure"]
    assert all(d.target is None and d.failed_action is not None for d in failures)
    with_arguments = [d for d in failures if d.failed_action.arguments is not None]
    content_free = [d for d in failures if d.failed_action.arguments is None]
    assert with_arguments and content_free
    assert all(d.failed_action.arg_keys for d in content_free)


def test_targets_use_nested_keys(demo: Path) -> None:
    keys = {k for d in load_suite(demo / "suite").decisions if d.target for k in d.target.arg_keys}
    assert any("[]." in k for k in keys)
    assert any(k.count(".") >= 2 for k in keys)


def state(d: Decision) -> str:
    """The request as the model reads it, with random tool-call ids blanked out."""
    text = json.dumps(d.request.model_dump(mode="json"), sort_keys=True)
    return re.sub(r"call_[0-9a-f]{12}", "call_", text)


def test_training_split_is_disjoint_from_the_suite(demo: Path) -> None:
    suite = load_suite(demo / "suite").decisions
    train = train_of(demo)
    assert len(train) >= 48
    assert all(d.target is not None and d.target.tool for d in train)
    assert not {d.id for d in suite} & {d.id for d in train}
    assert not {d.session for d in suite} & {d.session for d in train}
    assert not {request_hash(d.request) for d in suite} & {request_hash(d.request) for d in train}
    assert len({state(d) for d in (*suite, *train)}) == len(suite) + len(train)


def test_training_lines_carry_the_full_answer_of_their_target(demo: Path) -> None:
    train = train_of(demo)
    for d in train:
        assert d.target is not None and d.answer.tool == d.target.tool
        assert sorted_key_set(d.answer.arguments) == d.target.arg_keys
    recovery = {d.answer.tool for d in train if d.stratum == "verified_recovery"}
    assert {"list_invoices", "finalize_invoice", "reopen_ticket", "find_free_slots"} <= recovery
    assert {d.stratum for d in train} == {"verified_recovery", "clean_trajectory_action", "verified_action"}


def test_suite_lines_never_carry_an_answer(demo: Path) -> None:
    lines = (demo / "suite/decisions.jsonl").read_text().splitlines()
    assert lines and all("answer" not in json.loads(line) for line in lines)


def test_training_sanity_comes_from_the_training_distribution(demo: Path) -> None:
    suite = load_suite(demo / "suite").decisions
    sanity_clusters = {d.cluster for d in suite if d.stratum == "training_sanity"}
    assert sanity_clusters <= {d.cluster for d in train_of(demo)}


def rules_in(path: Path) -> dict[str, tuple[str, str | None, str]]:
    """rule id (lc:slug) -> (text, evidence, section) read straight from the file."""
    out, section = {}, ""
    for line in path.read_text().splitlines():
        if line.startswith("## "):
            section = "pending" if line[3:].startswith("Pending") else "rules"
        match = RULE_LINE.match(line)
        if match:
            out["lc:" + match["slug"]] = (match["text"], match["evidence"], section)
    return out


def test_memory_files_in_the_documented_format(demo: Path) -> None:
    memory = demo / "memory"
    assert sorted(p.name for p in memory.iterdir()) == ["ws-files", "ws-invoicing", "ws-sales", "ws-support"]
    seen: dict[str, tuple[str, str | None, str]] = {}
    for ws in memory.iterdir():
        for relative in ("memory/profile.md", "memory/index.md", "memory/weekly-summary.md",
                         "memory/reference/corrections-log.md"):
            assert (ws / relative).is_file()
        rules = rules_in(ws / "rules/learned-corrections.md")
        assert {r.id for r in RULES[ws.name]} == set(rules)
        assert len(rules) <= 60
        assert all(len(text) <= 160 for text, _, _ in rules.values())
        seen.update(rules)
    assert any(evidence is None for _, evidence, _ in seen.values()), "a legacy rule without evidence"
    assert {section for _, _, section in seen.values()} == {"rules", "pending"}
    assert set(seen) >= GENUINE_RULE_IDS
    (harmful,) = HARMFUL_RULE_IDS
    assert seen[harmful][1] == "user-explicit", "the harmful rule must be authorised to be injected"
    assert "harm" not in harmful


def test_corrections_log_has_provenance_and_a_retired_rule(demo: Path) -> None:
    logs = {ws.name: (ws / "memory/reference/corrections-log.md").read_text() for ws in (demo / "memory").iterdir()}
    assert "## lc:invoice-customer-filter\n**Rule (current):**" in logs["ws-invoicing"]
    assert "**Evidence:** user-explicit · scope: standing" in logs["ws-invoicing"]
    assert re.search(r"^- lc:[a-z-]+: superseded by lc:[a-z-]+ \(.+\), \d{4}-\d{2}-\d{2}$",
                     logs["ws-invoicing"], re.MULTILINE)
    assert "## lc:folder-not-file — " in logs["ws-files"], "older heading style"


def test_genuine_rules_match_recovery_targets(demo: Path) -> None:
    rules = rules_in(demo / "memory/ws-invoicing/rules/learned-corrections.md")
    assert "list_invoices" in rules["lc:invoice-customer-filter"][0]
    recoveries = [d for d in load_suite(demo / "suite").decisions
                  if d.stratum == "verified_recovery" and d.cluster == "invoicing/customer-filter"]
    assert recoveries and all(d.target.tool == "list_invoices" and "filter.customer_id" in d.target.arg_keys
                              for d in recoveries)


def test_memory_never_contains_injection_tags(demo: Path) -> None:
    for path in (demo / "memory").rglob("*.md"):
        assert not re.search(r"</?(standing_rules|memory)\b", path.read_text(), re.IGNORECASE), path


def test_one_rule_text() -> None:
    assert ONE_RULE_TEXT == "If a tool call was just rejected, choose a different tool and say why."


def test_memory_module_reads_the_demo_memory_without_violations(demo: Path) -> None:
    authorised: set[str] = set()
    for ws in (demo / "memory").iterdir():
        assert not has_violations(check_memory(ws)), [str(p) for p in check_memory(ws)]
        authorised |= {r.id for r in load_memory(ws).authorised_rules()}
    assert authorised >= GENUINE_RULE_IDS | HARMFUL_RULE_IDS
