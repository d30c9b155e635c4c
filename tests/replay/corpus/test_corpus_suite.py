"""A corpus without a capture: the recorded Claude Code sessions (tests/replay/corpus/data/claude-code)
audited and built into a suite, the audit's counts checked against a plain count of the same lines."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from core.records import Decision
from replay.cli import main as replay_main
from replay.corpus.audit import audit
from replay.corpus.claude_code import ClaudeCodeDir
from replay.corpus.corpus_suite import in_test_split
from replay.suite import SuiteError, check_privacy, load_suite
from tests.replay.corpus.test_claude_code import DATA, WORKSPACE, captures
from tests.support.suites import build_corpus_suite

KEY = "7e" * 32


def keys_file(tmp_path: Path) -> Path:
    path = tmp_path / "keys.toml"
    path.write_text(f'[keys]\n"{WORKSPACE}" = "{KEY}"\n')
    path.chmod(0o600)
    return path


def plain_counts(root: Path) -> dict[str, int]:
    """The audit's counts by a plain pass over the lines, sharing no code with it."""
    lines = [json.loads(line) for p in (root / WORKSPACE).rglob("*.jsonl") for line in p.read_text().splitlines()]
    tool_uses = {b["id"] for r in lines if r.get("type") == "assistant" for b in r["message"]["content"]
                 if b["type"] == "tool_use"}
    results = [b for r in lines if r.get("type") == "user" and isinstance(r["message"]["content"], list)
               for b in r["message"]["content"] if b["type"] == "tool_result"]
    return {"records": len(lines), "tool_use": len(tool_uses), "tool_result": len(results),
            "is_error": sum(b.get("is_error") is True for b in results)}


def test_the_audit_counts_what_a_plain_pass_counts():
    report = audit(ClaudeCodeDir(DATA))
    expected = plain_counts(DATA)
    assert {k: getattr(report, k) for k in expected} == expected
    assert (report.workspaces, report.sessions, report.subagent_runs, report.refused) == (1, 2, 0, [])
    assert report.first is not None and report.last is not None and report.first < report.last
    assert sum(t.actions for t in report.top_tools) == report.tool_use
    # the lookup loop: one failed call (known failure), then two that succeeded in a thread with a failure
    assert report.decisions == {"known_failure": 1, "verified_action": 2} and report.clusters == 1


def test_an_unreadable_file_is_refused_with_its_reason_and_the_audit_goes_on(tmp_path):
    shutil.copytree(DATA / WORKSPACE, tmp_path / WORKSPACE)
    broken = next((tmp_path / WORKSPACE / "projects").glob("*/*.jsonl"))
    broken.write_text(broken.read_text() + "{not json\n")
    report = audit(ClaudeCodeDir(tmp_path))
    assert report.sessions == 1 and len(report.refused) == 1 and f"{broken}:" in report.refused[0]


def test_a_suite_from_the_corpus_alone_agrees_with_the_capture(tmp_path):
    report = build_corpus_suite(ClaudeCodeDir(DATA), tmp_path / "suite", keys={WORKSPACE: bytes.fromhex(KEY)})
    suite = load_suite(tmp_path / "suite")
    assert report.strata == {"known_failure": 1, "verified_action": 2}
    assert [(d.stratum, d.api, d.cluster.split("/")[0]) for d in suite.decisions] == [
        ("known_failure", "messages", WORKSPACE), ("verified_action", "messages", WORKSPACE),
        ("verified_action", "messages", WORKSPACE)]
    failed = suite.decisions[0]
    assert failed.failed_action is not None and failed.failed_action.tool == "mcp__inv__lookup"
    assert failed.failed_action.arguments == {"id": "INV-7"}
    # the captured descriptors of the same calls: the same tools, the same strata where the capture knew the outcome
    lookups = [d for d in captures() if d.chosen_tool == "mcp__inv__lookup"]
    assert [d.outcome for d in lookups][:2] == ["failed", "ok"]
    assert check_privacy(tmp_path / "suite") == []


def test_since_and_until_cut_the_corpus_by_the_time_of_each_call(tmp_path):
    """The window picks calls by the time Claude Code logged them; their strata still come from the whole
    thread (the call before the window failed: the later ones are not a clean trajectory)."""
    session = next(d.session for d in captures() if d.chosen_tool == "mcp__inv__lookup")
    path = next((DATA / WORKSPACE / "projects").glob(f"*/{session}.jsonl"))
    times = sorted(r["timestamp"] for r in map(json.loads, path.read_text().splitlines())
                   if r.get("type") == "api-request")
    keys = {WORKSPACE: bytes.fromhex(KEY)}
    later = build_corpus_suite(ClaudeCodeDir(DATA), tmp_path / "later", keys=keys, since=times[1])
    assert later.strata == {"verified_action": 2} and later.skipped["outside the time window"] == 1
    first = build_corpus_suite(ClaudeCodeDir(DATA), tmp_path / "first", keys=keys, until=times[1])
    assert first.strata == {"known_failure": 1}
    with pytest.raises(SuiteError, match="no decisions to build a suite for"):
        build_corpus_suite(ClaudeCodeDir(DATA), tmp_path / "none", keys=keys, until="2000-01-01T00:00:00Z")


def test_the_cli_audits_and_builds(tmp_path, capsys):
    assert replay_main(["corpus", "audit", str(DATA), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["tool_use"] == plain_counts(DATA)["tool_use"]
    assert replay_main(["suite", "build", "--from-corpus", str(DATA), "--keys", str(keys_file(tmp_path)),
                        "--out", str(tmp_path / "suite")]) == 0
    assert "3 decisions (known_failure 1, verified_action 2)" in capsys.readouterr().out
    assert replay_main(["suite", "build", "--from-corpus", str(DATA), "--transcripts", str(DATA),
                        "--out", str(tmp_path / "s2")]) == 2
    assert "--transcripts goes with --from-capture" in capsys.readouterr().err


def test_a_suite_is_never_written_into_the_corpus(tmp_path):
    shutil.copytree(DATA / WORKSPACE, tmp_path / WORKSPACE)
    with pytest.raises(SuiteError, match="which is only ever read"):
        build_corpus_suite(ClaudeCodeDir(tmp_path), tmp_path / WORKSPACE / "suite", keys={})


def test_a_split_by_cluster_keeps_each_session_on_one_side(tmp_path, capsys):
    from tests.replay.corpus.test_claude_code import SUBAGENTS

    root = tmp_path / "corpus"
    shutil.copytree(DATA / WORKSPACE, root / WORKSPACE)
    shutil.copytree(SUBAGENTS / WORKSPACE, root / WORKSPACE, dirs_exist_ok=True)
    whole = build_corpus_suite(ClaudeCodeDir(root), tmp_path / "whole", keys={WORKSPACE: bytes.fromhex(KEY)})
    clusters = {d.cluster for d in load_suite(tmp_path / "whole").decisions}
    assert len(clusters) == 2
    seed = next(s for s in map(str, range(100))
                if len({in_test_split(0.5, s)(c) for c in clusters}) == 2)  # one session on each side
    assert replay_main(["suite", "build", "--from-corpus", str(root), "--keys", str(keys_file(tmp_path)),
                        "--out", str(tmp_path / "split"), "--test-fraction", "0.5", "--split-seed", seed]) == 0
    sides = {side: load_suite(tmp_path / "split" / side).decisions for side in ("train", "test")}
    assert {d.cluster for d in sides["train"]}.isdisjoint({d.cluster for d in sides["test"]})
    assert sorted(d.id for s in sides.values() for d in s) == sorted(
        d.id for d in load_suite(tmp_path / "whole").decisions)
    assert sum(whole.strata.values()) == sum(len(s) for s in sides.values())
    assert replay_main(["suite", "build", "--from-corpus", str(root), "--keys", str(keys_file(tmp_path)),
                        "--out", str(tmp_path / "bad"), "--test-fraction", "1.5"]) == 2
    assert "the test fraction must be between 0 and 1" in capsys.readouterr().err
    capsys.readouterr()
    one_side = next(s for s in map(str, range(100)) if len({in_test_split(0.5, s)(c) for c in clusters}) == 1)
    assert replay_main(["suite", "build", "--from-corpus", str(root), "--keys", str(keys_file(tmp_path)),
                        "--out", str(tmp_path / "lopsided"), "--test-fraction", "0.5", "--split-seed", one_side]) == 2
    err = capsys.readouterr().err  # the empty side is named with the seeds that split, and neither side is written
    assert f"--split-seed {one_side!r} puts all 2 split group(s)" in err and "nothing written" in err
    assert f"--split-seed {seed}" in err and err.count("\n") == 1  # the first seed that splits is offered
    assert not (tmp_path / "lopsided").exists() or not any((tmp_path / "lopsided").rglob("*.jsonl"))


def test_a_split_keeps_identical_decision_states_on_one_side(tmp_path):
    """Issue 60: a session copied into another workspace (the same records) went to train under one seed and to
    test under another; clusters that share a decision state are split as one."""
    from tests.replay.corpus.test_claude_code import SUBAGENTS

    root = tmp_path / "corpus"
    for workspace in (WORKSPACE, "ws-copy"):  # two sessions, and each again in another workspace
        shutil.copytree(DATA / WORKSPACE, root / workspace)
        shutil.copytree(SUBAGENTS / WORKSPACE, root / workspace, dirs_exist_ok=True)
    keys = keys_file(tmp_path)
    keys.write_text(keys.read_text() + f'"ws-copy" = "{"5a" * 32}"\n')
    split = 0
    for seed in map(str, range(12)):
        out = tmp_path / f"split-{seed}"
        if replay_main(["suite", "build", "--from-corpus", str(root), "--keys", str(keys), "--out", str(out),
                        "--test-fraction", "0.5", "--split-seed", seed]) != 0:
            continue  # both sessions fell on one side: refused as lopsided
        split += 1
        side = {name: {d.session for d in load_suite(out / name).decisions} for name in ("train", "test")}
        assert side["train"] and side["test"] and side["train"].isdisjoint(side["test"]), seed
    assert split >= 3  # the check above ran, on several seeds


def test_every_decision_says_its_thread_and_a_subagents_the_call_that_started_it(tmp_path):
    """A delegating session: its main loop's decisions are `main`; each subagent's carry the subagent's id and
    the main loop's `Agent` call that started it (its `.meta.json`), a `tool_use` id of the main file."""
    from tests.replay.corpus.test_claude_code import SUBAGENTS

    build_corpus_suite(ClaudeCodeDir(SUBAGENTS), tmp_path / "suite", keys={WORKSPACE: bytes.fromhex(KEY)})
    decisions = load_suite(tmp_path / "suite").decisions
    main = next((SUBAGENTS / WORKSPACE / "projects").glob("*/*.jsonl"))
    started = {f"agent-{p.name.removeprefix('agent-').removesuffix('.meta.json')}": json.loads(p.read_text())["toolUseId"]
               for p in main.parent.glob(f"{main.stem}/subagents/*.meta.json")}
    calls = {b["id"] for r in map(json.loads, main.read_text().splitlines()) if r.get("type") == "assistant"
             for b in r["message"]["content"] if b.get("type") == "tool_use"}
    threads = {d.thread for d in decisions}
    assert threads == {"main", *started} and set(started.values()) <= calls
    assert all(d.parent_call == started.get(d.thread) for d in decisions)
    assert all(d.id.split(".")[1] == d.thread for d in decisions)
    line = json.loads((tmp_path / "suite" / "decisions.jsonl").read_text().splitlines()[0])
    old = {k: v for k, v in line.items() if k not in ("thread", "parent_call")}  # a suite written before
    assert Decision.model_validate(old).thread is None
    assert "thread" not in Decision.model_validate(old).model_dump(mode="json", exclude_none=True)
