"""The pool audit on a corpus whose classes and origins are known: the recorded lookup session (one call that
timed out, then two that succeeded) copied under workspaces whose answers name the worker, Claude, or no model."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from core.capture_store import CORPUS, CapturedDecision
from replay.cli import main
from replay.corpus.claude_code import ClaudeCodeDir
from replay.curation.classes import DecisionClass
from replay.curation.curation_policy import CurationPolicy
from replay.curation.pool import audit_pool, decision_classes
from tests.support.curation import copy_workspace

POLICY = CurationPolicy(name="t", size=1, shares={"clean": 100}, worker_models=["worker", "worker-*"])


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("corpus")
    copy_workspace(root, "ws-w")
    copy_workspace(root, "ws-c", model="claude-sonnet-4-5-20250929")
    copy_workspace(root, "ws-u", model=None)
    return root


def test_every_count_of_the_pool(corpus: Path) -> None:
    report = audit_pool([ClaudeCodeDir(corpus)], POLICY)
    # three workspaces of two sessions; only the lookup session's calls have an outcome that gives a class
    assert (report.sessions, report.clusters, report.decisions) == (6, 3, 9)
    assert report.classes == {"clean": 0, "verified_action": 6, "recovery": 0, "known_failure": 3, "no_tool": 0}
    assert report.origins == {"worker": 3, "claude": 3, "unknown": 3}
    assert report.examples == {"clean": 0, "verified_action": 0, "recovery": 0, "known_failure": 0, "no_tool": 0}
    assert {c: why for c, why in report.cannot.items() if why} == {
        "verified_action": {"claude_origin": 2, "unknown_origin": 2, "not_in_clean_from": 2},
        "known_failure": {"no_proof": 3}}
    assert report.models == {"(none)": 3, "claude-sonnet-4-5-20250929": 3, "worker-base": 3}
    assert [(t.tool, t.actions) for t in report.top_tools] == [("mcp__inv__lookup", 9)]
    assert report.top_tools_share == 1.0 and report.refused == []


def test_the_pool_says_what_could_become_an_example_and_why_the_rest_cannot(
        corpus: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    widened = POLICY.model_copy(update={"clean_from": [DecisionClass.CLEAN, DecisionClass.VERIFIED_ACTION]})
    report = audit_pool([ClaudeCodeDir(corpus)], widened)
    # ws-w's second lookup retries the timeout; its third repeats the lookup its prompt holds `paid` for
    assert report.examples["verified_action"] == 1 and "not_in_clean_from" not in report.cannot["verified_action"]
    assert report.cannot["verified_action"]["redundant_repeat"] == 1
    policy = tmp_path / "p.toml"
    policy.write_text('name = "t"\nsize = 1\nworker_models = ["worker-*"]\n[shares]\nclean = 100\n')
    assert main(["curate", "pool", str(corpus), "--policy", str(policy)]) == 0
    out = capsys.readouterr().out
    assert "3 clusters (sessions with a classed decision; a cluster is one task" in out
    row = next(line.split() for line in out.splitlines() if line.lstrip().startswith("verified_action "))
    assert row == ["verified_action", "6", "0", "-", "claude_origin", "2,", "unknown_origin", "2,",
                   "not_in_clean_from", "2"]
    assert "known_failure 3 0 recovery no_proof 3" in " ".join(out.split())
    assert 'clean_from = ["clean", "verified_action"]' in out and "`curate build --runs`" in out


def test_the_json_has_the_documented_top_level_keys(corpus: Path, capsys: pytest.CaptureFixture[str]) -> None:
    policy = Path(__file__).resolve().parents[3] / "configs" / "curation" / "s1.1.toml"
    assert main(["curate", "pool", str(corpus), "--json", "--policy", str(policy)]) == 0
    data = json.loads(capsys.readouterr().out)
    assert {"sessions", "clusters", "classes", "origins", "top_tools_share"} <= data.keys()
    assert data["origins"] == {"worker": 3, "claude": 3, "unknown": 3}


def test_the_shipped_policy_documents_every_key_with_its_default() -> None:
    text = (Path(__file__).resolve().parents[3] / "configs" / "curation" / "s1.1.toml").read_text()
    for name, info in CurationPolicy.model_fields.items():
        doc = next((line for line in text.splitlines() if line.startswith(f"# {name} (")), None)
        assert doc is not None, name
        assert ("required" if info.is_required() else "default") in doc, name


def test_a_corpus_that_is_not_one_is_one_error_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["curate", "pool", str(tmp_path / "absent")]) == 2
    assert capsys.readouterr().err.strip() == f"error: {tmp_path / 'absent'}: not a corpus (not a directory)"


def row(n: int, tool: str | None, keys: list[str], outcome: str | None, parse: str = "ok") -> CapturedDecision:
    return CapturedDecision(
        id=f"s.main.{n}", captured_at="2026-12-01T00:00:00Z", mode=CORPUS, workspace="ws", session="s", route="",
        adapter="", kind=CORPUS, request_sha256="", message_hashes=[], roles=[], tools_offered=[], tool_choice="auto",
        parse_outcome=parse, chosen_tool=tool, chosen_keys=keys, call_id=None, calls=int(tool is not None),
        duration_s=0.0, outcome=outcome, thread="main")


@pytest.mark.parametrize(("after", "expected"), [
    (row(1, "lookup", ["id", "year"], "ok"), DecisionClass.RECOVERY),  # same tool, other key set
    (row(1, "search", ["q"], "ok"), DecisionClass.RECOVERY),  # another tool
    (row(1, "lookup", ["id"], "ok"), DecisionClass.VERIFIED_ACTION),  # the same call again: not a recovery
    (row(1, "lookup", ["id", "year"], "failed"), DecisionClass.KNOWN_FAILURE),
    (row(1, None, [], None, parse="no_call"), DecisionClass.NO_TOOL),
    (row(1, None, [], None, parse="malformed_call"), None),
    (row(1, "lookup", ["id"], None), None),  # no result recorded: proves nothing
])
def test_the_class_after_a_failed_call(after: CapturedDecision, expected: DecisionClass | None) -> None:
    assert decision_classes([row(0, "lookup", ["id"], "failed"), after]) == [DecisionClass.KNOWN_FAILURE, expected]


def test_a_session_without_failures_is_clean() -> None:
    assert decision_classes([row(0, "lookup", ["id"], "ok"), row(1, "send", ["to"], "ok")]) == [
        DecisionClass.CLEAN, DecisionClass.CLEAN]
