"""`curate build` on corpora whose classes, origins, overlaps and proofs are known (tests/support/curation.py):
every boundary's refusals counted, proofs turned into targets that ran, the files trainers read, the same
bytes from the same inputs, and one clear error (nothing written) for each kind of bad input."""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path

import pytest

from core.keyset import key_set
from core.records import DecisionScore, ParsedResponse, ParseOutcome, ResultRecord, ToolCall
from demo.scenario_pack import write_pack
from replay.corpus.claude_code import ClaudeCodeDir
from replay.curation.build import curate, open_inputs
from replay.curation.dataset import MANIFEST_JSON, PROVENANCE_JSONL, TRAIN_JSONL, CurationManifest
from replay.curation.proofs import RunEvidence
from replay.sandbox.pack import load_pack
from replay.suite import freeze_suite
from tests.replay.curation.test_proofs import episode
from tests.support.curation import (
    KEY,
    LOOKUP,
    copy_session_as,
    copy_workspace,
    keys_file,
    plant_final_answer,
    plant_retry_value,
    policy_file,
    session_path,
)
from tests.support.runs import write_sealed
from tests.support.suites import build_corpus_suite

TOOL = "mcp__inv__lookup"
CLEAN = 'size = {size}\nshortfall = "{shortfall}"\nclean_from = ["verified_action"]\n[shares]\nclean = 100\n'
WORKSPACES = ["ws-w", "ws-w2", "ws-c", "ws-u", "ws-r", "ws-l"]


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """ws-w: the worker's own (its third call looks INV-7 up again after the second was answered `paid`: a
    redundant repeat); ws-w2: the same records again (duplicates); ws-c: Claude's answers; ws-u: answers whose
    record names no model; ws-r: the retry after the timeout looked up INV-8 (a correction of INV-7)."""
    root = tmp_path_factory.mktemp("corpus")
    copy_workspace(root, "ws-w")
    copy_workspace(root, "ws-w2")
    copy_workspace(root, "ws-c", model="claude-sonnet-4-5-20250929")
    copy_workspace(root, "ws-u", model=None)
    copy_workspace(root, "ws-r")
    plant_retry_value(session_path(root, "ws-r", LOOKUP), LOOKUP, 1, {"id": "INV-8"})
    return root


def build(tmp_path: Path, corpus: Path, policy: str, *, runs: Sequence[Path] = (), exclude: Sequence[Path] = (),
          shadow: Sequence[Path] = (), out: str = "set") -> CurationManifest:
    inputs = open_inputs([corpus], shadow, keys_file(tmp_path, WORKSPACES), policy_file(tmp_path, policy), exclude,
                         runs)
    return curate(inputs, tmp_path / out)


def rows(out: Path, name: str) -> list[dict]:
    return [json.loads(line) for line in (out / name).read_text().splitlines()]


def test_each_boundary_refuses_and_counts_by_reason(tmp_path: Path, corpus: Path) -> None:
    manifest = build(tmp_path, corpus, CLEAN.format(size=3, shortfall="fail"))
    # ws-w's and ws-w2's third calls repeat the INV-7 lookup the prompt holds `paid` for; ws-w2's second is ws-w's
    assert manifest.refusals == {"claude_origin": 2, "duplicate": 1, "redundant_repeat": 2, "unknown_origin": 2}
    # ws-w's retry after the timeout, ws-r's two verified actions (ws-r's first has ws-w's prompt, another target)
    assert manifest.classes["clean"].model_dump() == {"asked": 3, "got": 3, "candidates": 3}
    assert manifest.unproven_failures == 5 and manifest.examples == 3
    provenance = rows(tmp_path / "set", PROVENANCE_JSONL)
    assert {(p["decision_class"], p["origin_model"]) for p in provenance} == {("verified_action", "worker-base")}
    assert all(p["workspace"].startswith("<WORKSPACE_") for p in provenance)  # a pseudonym, never the name
    examples = rows(tmp_path / "set", TRAIN_JSONL)
    assert len(examples) == 3
    for example in examples:  # no target repeats a call its prompt holds the answer (`paid`) of
        *prompt, target = example["messages"]
        made = {c["id"]: c["function"]["arguments"] for m in prompt for c in m.get("tool_calls") or []}
        answered = [made[m["tool_call_id"]] for m in prompt if m["role"] == "tool" and "paid" in m["content"]]
        assert target["tool_calls"][0]["function"]["arguments"] not in answered


def test_a_class_that_falls_short_fails_or_shrinks_and_is_never_padded(tmp_path: Path, corpus: Path) -> None:
    with pytest.raises(ValueError, match=r"clean: asked 4, got 3 of 3 candidates"):
        build(tmp_path, corpus, CLEAN.format(size=4, shortfall="fail"))
    assert not (tmp_path / "set").exists()
    mixed = 'size = 6\nshortfall = "shrink"\nclean_from = ["verified_action"]\n[shares]\nclean = 50\nnegative = 50\n'
    manifest = build(tmp_path, corpus, mixed)  # negative has none: the set is clean's three, never six clean
    assert manifest.shrunk and manifest.examples == 3
    assert {c: (n.asked, n.got) for c, n in manifest.classes.items()} == {
        "clean": (3, 3), "recovery": (0, 0), "policy": (0, 0), "negative": (3, 0)}
    with pytest.raises(ValueError, match="no example could be drawn.*negative: asked 6, got 0 of 0"):
        build(tmp_path, corpus, 'size = 6\nshortfall = "shrink"\n[shares]\nnegative = 100\n', out="none")


def test_shrink_keeps_the_mix(tmp_path: Path, corpus: Path) -> None:
    """Recovery got 1 of its 2 (one proven correction): clean is cut by the same half, 1 of its 2, where cutting
    the short class alone would give clean 2, recovery 1."""
    run = write_run(tmp_path / "run", [planted_answer("cand", "ws-r", FAILED, "known_failure", {"id": "INV-9"})])
    policy = 'size = 4\nshortfall = "shrink"\nclean_from = ["verified_action"]\n[shares]\nclean = 50\nrecovery = 50\n'
    manifest = build(tmp_path, corpus, policy, runs=[run])
    assert manifest.shrunk and manifest.examples == 2
    assert {c: (n.asked, n.got) for c, n in manifest.classes.items() if n.asked} == {"clean": (2, 1),
                                                                                    "recovery": (2, 1)}
    assert sorted(p["mix_class"] for p in rows(tmp_path / "set", PROVENANCE_JSONL)) == ["clean", "recovery"]


@pytest.mark.parametrize("shortfall", ["fail", "shrink"])
def test_no_tool_is_more_than_its_share_of_the_sets_calls(tmp_path: Path, corpus: Path, shortfall: str) -> None:
    """Every candidate calls the one lookup tool: at a share of 0.5, a set of n calls holds at most
    max(1, int(0.5 n)) of them, so the set shrinks to one (a cap of the size asked, 50, would let all three in)."""
    policy = f'max_tool_share = 0.5\n{CLEAN.format(size=100 if shortfall == "shrink" else 3, shortfall=shortfall)}'
    if shortfall == "fail":
        with pytest.raises(ValueError, match=r"clean: asked 3, got 1 of 3 candidates") as failed:
            build(tmp_path, corpus, policy)
        assert "\n  passed over for the caps: tool 2\n" in str(failed.value)
        return
    manifest = build(tmp_path, corpus, policy)
    targets = [r["messages"][-1]["tool_calls"][0]["function"]["name"] for r in rows(tmp_path / "set", TRAIN_JSONL)]
    assert targets == [TOOL]
    assert manifest.classes["clean"].model_dump() == {"asked": 100, "got": 1, "candidates": 3}


def test_a_failed_build_shows_its_counts_and_the_runs_that_would_prove_a_correction(tmp_path: Path,
                                                                                   corpus: Path) -> None:
    policy = 'size = 4\nclean_from = ["verified_action"]\n[shares]\nclean = 50\nrecovery = 50\n'
    with pytest.raises(ValueError) as failed:
        build(tmp_path, corpus, policy)
    text = str(failed.value)
    assert "recovery: asked 2, got 0 of 0 candidates" in text
    # as a written set's manifest
    assert "\n  refused: claude_origin 2, duplicate 1, redundant_repeat 2, unknown_origin 2\n" in text
    assert "\n  known failures without a proven correction: 5\n" in text
    assert "recovery has no proven correction (no --runs given)" in text
    assert "`worker-replay run`" in text and "`worker-replay sandbox run`" in text
    assert not (tmp_path / "set").exists()


def held_out_suite(tmp_path: Path, name: str = "suite") -> Path:
    """A frozen suite of the recorded workspace's decisions, as `suite build --from-corpus` makes it."""
    held_out = tmp_path / f"held-out-{name}"
    copy_workspace(held_out, "ws-w")
    build_corpus_suite(ClaudeCodeDir(held_out), tmp_path / name, keys={"ws-w": bytes.fromhex(KEY)})
    freeze_suite(tmp_path / name)
    return tmp_path / name


def test_a_frozen_suite_excludes_its_sessions_requests_and_near_copies(tmp_path: Path, corpus: Path) -> None:
    # ws-w's sessions are the suite's; ws-w2 holds the same requests in other sessions; ws-r's first retry
    # starts from the suite's state (its request is one of the suite's decisions); ws-r's second retry is the
    # suite's last decision with one id changed (INV-7 → INV-8): a near-copy (issue 60, case 6); ws-w2's third call
    # is a redundant repeat
    with pytest.raises(ValueError, match=r"no example could be drawn \(clean: asked 1, got 0 of 3 candidates; "
                                         r"refused: claude_origin 2, excluded_suite_near_duplicate 1, "
                                         r"excluded_suite_request 2, excluded_suite_session 2, redundant_repeat 1, "
                                         r"unknown_origin 2\)"):
        build(tmp_path, corpus, CLEAN.format(size=1, shortfall="shrink"), exclude=[held_out_suite(tmp_path)])
    assert not (tmp_path / "set").exists()


def test_a_shadow_leg_is_refused_until_the_policy_approves_its_source(tmp_path: Path) -> None:
    live, shadow = tmp_path / "live", tmp_path / "shadow-legs"
    copy_workspace(live, "ws-w")
    copy_workspace(shadow, "ws-r")
    plant_retry_value(session_path(shadow, "ws-r", LOOKUP), LOOKUP, 1, {"id": "INV-8"})
    refused = build(tmp_path, live, CLEAN.format(size=1, shortfall="fail"), shadow=[shadow])
    assert refused.refusals == {"shadow_unapproved": 2, "redundant_repeat": 1}
    approved = build(tmp_path, live, 'approved_shadow_sources = ["shadow-legs"]\n' + CLEAN.format(size=3, shortfall="fail"),
                     shadow=[shadow], out="b")
    assert approved.examples == 3 and "shadow_unapproved" not in approved.refusals


def planted_answer(arm: str, workspace: str, decision: str, stratum: str, arguments: dict | None, *,
                   memory: str = "withheld", rules: Sequence[str] = (), joint: bool | None = None) -> ResultRecord:
    """A replay answer as the runner records it, planted (no model made it): the call `arguments` name."""
    calls = [ToolCall(tool=TOOL, arguments=arguments, key_set=sorted(key_set(arguments)))] if arguments else []
    return ResultRecord(
        arm=arm, decision_id=decision, stratum=stratum, cluster=f"{workspace}/{LOOKUP}", workspace=workspace,
        target_tool=None if stratum == "known_failure" else TOOL, model="worker-base", memory=memory,
        parsed=ParsedResponse(outcome=ParseOutcome.OK if calls else ParseOutcome.NO_CALL, calls=calls),
        score=DecisionScore(joint_correct=joint) if joint is not None else DecisionScore(
            tool_repeat=bool(calls), shape_repeat=bool(calls)),
        injected_rule_ids=list(rules), finished_at=datetime(2026, 12, 4, tzinfo=UTC))


def write_run(path: Path, records: list[ResultRecord]) -> Path:
    path.mkdir(parents=True)
    write_sealed(path, records)
    return path


FAILED = f"{LOOKUP}.main.0"


def test_a_recorded_correction_trains_the_call_that_ran_never_the_arms_text(tmp_path: Path, corpus: Path) -> None:
    run = write_run(tmp_path / "run", [
        # the arm chose the session's own next call (tool and key set) with other values: INV-9 never ran
        planted_answer("cand", "ws-r", FAILED, "known_failure", {"id": "INV-9"}),
        planted_answer("base", "ws-r", FAILED, "known_failure", None)])
    # on ws-w the next call repeated the failed one exactly: a retry is no correction (the copies share session
    # ids, so ws-w's decision has the same id: another run)
    retry = write_run(tmp_path / "retry", [planted_answer("cand", "ws-w", FAILED, "known_failure", {"id": "INV-7"})])
    policy = 'size = 1\n[shares]\nrecovery = 100\n'
    manifest = build(tmp_path, corpus, policy, runs=[run, retry])
    assert manifest.classes["recovery"].got == 1 and manifest.refusals == {"not_a_correction": 1}
    [example] = rows(tmp_path / "set", TRAIN_JSONL)
    [call] = example["messages"][-1]["tool_calls"]
    assert (call["function"]["name"], json.loads(call["function"]["arguments"])) == (TOOL, {"id": "INV-8"})
    # the prompt is the failed call's state: it ends with the user's turn, before the failed call
    assert not any(m.get("tool_calls") for m in example["messages"][:-1])
    [proof] = rows(tmp_path / "set", PROVENANCE_JSONL)
    assert proof["proof"] == {"kind": "recorded", "run": str(run), "arm": "cand"}
    assert proof["decision"] == FAILED and proof["mix_class"] == "recovery"


def test_an_executed_correction_proves_a_known_failure_only(tmp_path: Path) -> None:
    """An episode of a scenario naming a decision that is no failure (the session's last answer, made a text with
    no call) corrects nothing there: the answer is a `negative` example of its own text, not the episode's call
    labelled negative."""
    corpus = tmp_path / "corpus"
    copy_workspace(corpus, "ws-w")
    plant_final_answer(session_path(corpus, "ws-w", LOOKUP), "INV-7 is paid.")
    pack = load_pack(write_pack(tmp_path / "pack", seed=0, per_family=1))
    scenario = next(s for s in pack.scenarios if s.policy_family == "recover-after-rejection")
    completed = episode(pack, scenario, scenario.oracle, scenario.oracle_answer, "cand")
    first, *rest = completed.trajectory.ledger
    assert completed.scores.task_completed and first.allowed and first.ok
    # planted: the episode's first accepted call made the lookup the session's prompt offers
    ledger = [first.model_copy(update={"tool": TOOL, "arguments": '{"id": "INV-8"}'}), *rest]
    completed = completed.model_copy(update={"workspace": "ws-w", "trajectory": completed.trajectory.model_copy(
        update={"ledger": ledger})})
    inputs = open_inputs([corpus], [], keys_file(tmp_path, ["ws-w"]),
                         policy_file(tmp_path, 'size = 1\n[shares]\nnegative = 100\n'), [], [])
    inputs.runs = RunEvidence({}, {"planted": [(completed, f"{LOOKUP}.main.2")]})
    curate(inputs, tmp_path / "set")
    [example] = rows(tmp_path / "set", TRAIN_JSONL)
    assert example["messages"][-1] == {"role": "assistant", "content": "INV-7 is paid."}
    [line] = rows(tmp_path / "set", PROVENANCE_JSONL)
    assert (line["decision"], line["mix_class"], line.get("proof")) == (f"{LOOKUP}.main.2", "negative", None)


def test_a_rule_the_lesson_gate_kept_gives_policy_examples_without_memory(tmp_path: Path) -> None:
    corpus = tmp_path / "corpus"
    sessions = [f"{LOOKUP[:-2]}{n:02d}" for n in range(3)]
    for session in sessions:
        copy_session_as(corpus, "ws-l", session)
    decisions = [f"{s}.main.{n}" for s in sessions for n in (1, 2)]
    records = [planted_answer(arm, "ws-l", d, "verified_action", {"id": "INV-7"}, memory=memory, rules=["lc:x"],
                              joint=joint)
               for d in decisions for arm, memory, joint in (("mem", "workspace", True),
                                                             ("minus", "workspace-minus:lc:x", False))]
    for r in records:
        if r.memory.startswith("workspace-minus"):
            r.injected_rule_ids.clear()
    run = write_run(tmp_path / "run", records)
    manifest = build(tmp_path, corpus, 'size = 1\n[shares]\npolicy = 100\n', runs=[run])
    # six wins, none lost: the rule is promoted (p = 1/32); the three sessions hold the same two requests, and the
    # second repeats the lookup the prompt holds `paid` for (a win of the rule, refused all the same)
    assert manifest.classes["policy"].model_dump() == {"asked": 1, "got": 1, "candidates": 1}
    assert manifest.refusals == {"duplicate": 2, "redundant_repeat": 3}
    assert {p["proof"]["rule"] for p in rows(tmp_path / "set", PROVENANCE_JSONL)} == {"lc:x"}


def test_the_same_inputs_and_seed_give_the_same_bytes(tmp_path: Path, corpus: Path) -> None:
    for out in ("a", "b"):
        build(tmp_path, corpus, CLEAN.format(size=2, shortfall="fail"), out=out)
    for name in (TRAIN_JSONL, PROVENANCE_JSONL, MANIFEST_JSON):
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes()
    drawn = set()
    for seed in range(6):
        build(tmp_path, corpus, f"seed = {seed}\n" + CLEAN.format(size=2, shortfall="fail"), out=f"seed{seed}")
        drawn.add(tuple((p["workspace"], p["decision"]) for p in rows(tmp_path / f"seed{seed}", PROVENANCE_JSONL)))
    assert len(drawn) > 1  # the seed decides which two of the three are drawn


def test_every_line_renders_through_the_embedded_models_chat_template(tmp_path: Path, corpus: Path) -> None:
    from transformers import AutoTokenizer

    from serve.engine.modelbuild import default_model_dir
    from serve.engine.train import DEFAULT_TEMPLATE

    build(tmp_path, corpus, CLEAN.format(size=3, shortfall="fail"))
    tokenizer = AutoTokenizer.from_pretrained(default_model_dir())
    template = DEFAULT_TEMPLATE.read_text()
    for example in rows(tmp_path / "set", TRAIN_JSONL):
        text = tokenizer.apply_chat_template(example["messages"], tools=example["tools"], chat_template=template,
                                             tokenize=False)
        [call] = example["messages"][-1]["tool_calls"]
        assert call["function"]["name"] in text and '"id": "INV-' in text
        assert [t["function"]["name"] for t in example["tools"]] and all(
            "parameters" in t["function"] for t in example["tools"])
