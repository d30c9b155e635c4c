"""What leaves the platform, from real Agent SDK session files (issue 65): a tenant's recorded lookup session whose
tool result carries a person, an e-mail address and a phone number and whose working directory holds the
workspace's name (tests/support/tenant_session.py derives it from the file Claude Code wrote, values only). Neither
survives into a suite's request text (from the corpus, and from descriptors resolved from it), `train.jsonl`,
`provenance.jsonl` or a report; the privacy audit finds nothing in what was written, and refuses a set or a suite
that still holds either (the build that would write it writes nothing)."""

from __future__ import annotations

import json
import shutil
from datetime import UTC, datetime
from pathlib import Path

import pytest

from core.capture_store import CaptureStore
from core.records import Decision, DecisionScore, ParsedResponse, ParseOutcome, ResultRecord
from replay.analysis.report import report_run
from replay.cli import main
from replay.corpus.claude_code import ClaudeCodeDir
from replay.privacy.redact import Pseudonymizer
from replay.suite import load_suite
from tests.support.curation import (
    DATA,
    KEY,
    LOOKUP,
    WORKSPACE,
    keys_file,
    plant_retry_value,
    policy_file,
    session_path,
)
from tests.support.runs import write_sealed
from tests.support.tenant_session import EMAIL, PERSON, PHONE, tenant_captures, tenant_session

TENANT = "acme-billing"
CWD = f"/srv/tenants/{TENANT}/work/loop"
LEFT = (PERSON, EMAIL, PHONE, CWD, "/srv/tenants", TENANT, "Acme-Billing")


def survivors(text: str) -> list[str]:
    return [value for value in LEFT if value.lower() in text.lower()]


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, Path]:
    """The tenant's derived session beside the recorded workspace's other session (a corpus decision's id is its
    session's), its keys file, and its capture store."""
    root = tmp_path_factory.mktemp("corpus")
    target, changed = tenant_session(root / "corpus", TENANT, CWD)
    shutil.copytree(DATA / WORKSPACE, root / "corpus" / WORKSPACE)
    session_path(root / "corpus", WORKSPACE, LOOKUP).unlink()
    store = CaptureStore(root / "capture.sqlite")
    for row in tenant_captures(target, TENANT, changed):
        store.insert(row)
    store.close()
    return root / "corpus", keys_file(root, [TENANT, WORKSPACE]), root / "capture.sqlite"


def request_texts(suite: Path) -> list[str]:
    """Each decision's text: its request and failed action (what a rented evaluator's model reads)."""
    return [json.dumps([d.get("request"), d.get("failed_action")], ensure_ascii=False)
            for d in map(json.loads, (suite / "decisions.jsonl").read_text().splitlines())]


def audit(directory: Path, keys: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    code = main(["privacy", "audit", str(directory), "--keys", str(keys)])
    return code, capsys.readouterr().out


@pytest.mark.parametrize("source", ["corpus", "capture"])
def test_a_suite_keeps_neither_the_person_nor_the_workspace_in_its_request_text(corpus, tmp_path, capsys, source):
    root, keys, db = corpus
    build = ["--from-corpus", str(root)] if source == "corpus" else \
        ["--from-capture", str(db), "--transcripts", str(root)]
    assert main(["suite", "build", *build, "--keys", str(keys), "--out", str(tmp_path / "suite")]) == 0
    printed = capsys.readouterr().out
    assert "privacy check: clean (the audit of what was written, with 2 registered workspace name(s))" in printed
    if source == "capture":
        assert "descriptors: 2 resolved (2 by request hash" in printed  # the derived captures prove the derived file
    suite = load_suite(tmp_path / "suite")
    texts = [t for d, t in zip(suite.decisions, request_texts(tmp_path / "suite"), strict=True) if d.workspace == TENANT]
    assert texts and [survivors(t) for t in texts] == [[]] * len(texts)
    p = Pseudonymizer(bytes.fromhex(KEY))
    assert all(f"Primary working directory: {p.pseudonym('PATH', CWD)}" in t for t in texts)
    # the customer's result is in the third call's request; the gateway captured that call without an outcome
    # (no next turn), so only the corpus, which reads the outcome from the record, makes a decision of it
    assert any(f'\\"customer\\": \\"{p.pseudonym("PERSON", PERSON)}, {p.pseudonym("EMAIL", EMAIL)}\\"' in t
               and p.pseudonym("PHONE", PHONE) in t for t in texts) is (source == "corpus")
    # the identifiers replay and curation join on keep the name (DESIGN §9: they stay inside)
    assert {d.workspace for d in suite.decisions} >= {TENANT}
    code, report = audit(tmp_path / "suite", keys, capsys)
    assert code == 0 and "privacy audit: clean" in report and "2 registered workspace name(s) looked for" in report
    counted = ("EMAIL", "PATH", "PERSON", "PHONE") if source == "corpus" else ("PATH",)
    assert all(f"{kind} " in report.split("pseudonyms: ")[1].split(";")[0] for kind in counted)
    assert main(["suite", "freeze", str(tmp_path / "suite"), "--keys", str(keys)]) == 0


def last_result(decision: Decision) -> str:
    """The text of the last tool result a decision's request holds."""
    blocks = [b for m in decision.turn if isinstance(m.get("content"), list) for b in m["content"]
              if isinstance(b, dict) and b.get("type") == "tool_result"]
    content = blocks[-1]["content"] if blocks else ""
    return content if isinstance(content, str) else " ".join(part.get("text", "") for part in content)


def test_a_report_shows_the_request_text_without_them(corpus, tmp_path, capsys):
    """A report shows each decision's last user turn and each arm's raw output — here an answer that repeats the
    last tool result (the customer's), as a model may. Only its identifier labels (cluster, workspace) name the
    workspace, as the suite's identifiers do."""
    root, keys, _ = corpus
    assert main(["suite", "build", "--from-corpus", str(root), "--keys", str(keys), "--out", str(tmp_path / "s")]) == 0
    decisions = [d for d in load_suite(tmp_path / "s").decisions if d.workspace == TENANT]
    results = [ResultRecord(arm=arm, decision_id=d.id, stratum=d.stratum, cluster=d.cluster, workspace=d.workspace,
                            model="m", memory="withheld", parsed=ParsedResponse(outcome=ParseOutcome.NO_CALL),
                            raw_output={"message": {"role": "assistant", "content": f"Found: {last_result(d)}"}},
                            score=DecisionScore(), finished_at=datetime(2026, 12, 4, tzinfo=UTC))
               for d in decisions for arm in ("base", "candidate")]
    run = write_sealed(tmp_path / "run", results)
    md, html = report_run(run, decisions=decisions)
    shown = html.read_text()
    assert "&lt;PERSON_" in shown  # the tool result is shown, redacted
    labels = {label for d in decisions for label in (d.cluster, f" · {d.workspace}")}
    for text in (md.read_text(), shown):
        for label in labels:
            text = text.replace(label, "")
        assert survivors(text) == []


def test_a_curated_set_keeps_neither_in_train_or_provenance(corpus, tmp_path, capsys):
    fixture, keys, _ = corpus
    # the third call looks up another invoice: not a repeat of the lookup its prompt holds the answer (and the
    # customer's name) of, so it is an example
    root = tmp_path / "corpus"
    shutil.copytree(fixture, root)
    plant_retry_value(session_path(root, TENANT, LOOKUP), LOOKUP, 2, {"id": "INV-8"})
    policy = policy_file(tmp_path, 'size = 2\nshortfall = "fail"\nclean_from = ["verified_action"]\n[shares]\n'
                                   "clean = 100\n")
    assert main(["curate", "build", str(root), "--keys", str(keys), "--policy", str(policy),
                 "--out", str(tmp_path / "set")]) == 0
    capsys.readouterr()
    train = (tmp_path / "set" / "train.jsonl").read_text()
    provenance = (tmp_path / "set" / "provenance.jsonl").read_text()
    assert survivors(train) == [] and survivors(provenance) == []
    p = Pseudonymizer(bytes.fromhex(KEY))
    assert p.pseudonym("PERSON", PERSON) in train and p.pseudonym("PATH", CWD) in train
    assert p.pseudonym("WORKSPACE", TENANT) in provenance
    code, report = audit(tmp_path / "set", keys, capsys)
    assert code == 0 and "privacy audit: clean" in report


def test_the_audit_refuses_a_set_and_a_suite_that_still_hold_either(corpus, tmp_path, capsys):
    """What a build that did not redact would have written: the audit names file, line and type, never the
    value; freeze refuses in one line and writes nothing."""
    root, keys, db = corpus
    assert main(["suite", "build", "--from-corpus", str(root), "--keys", str(keys), "--out", str(tmp_path / "s")]) == 0
    decisions = tmp_path / "s" / "decisions.jsonl"
    lines = decisions.read_text().splitlines()
    p = Pseudonymizer(bytes.fromhex(KEY))
    spoiled = [line.replace(p.pseudonym("PERSON", PERSON), PERSON).replace(p.pseudonym("PATH", CWD), CWD)
               for line in lines]
    assert spoiled != lines
    decisions.write_text("\n".join(spoiled) + "\n")
    capsys.readouterr()
    code, report = audit(tmp_path / "s", keys, capsys)
    assert code == 1 and "privacy audit:" in report and survivors(report.replace(str(tmp_path), "")) == []
    found = [line.strip() for line in report.splitlines() if line.startswith("  ")]
    # the environment block's path is a PATH; the invoice's file under it names the workspace
    assert {f.split(": ")[1].split(" at ")[0] for f in found} == {"PATH", "PERSON", "WORKSPACE"}
    assert all(f.startswith(f"{decisions}:") and " at $.request." in f for f in found)
    toml = (tmp_path / "s" / "suite.toml").read_text()
    assert main(["suite", "freeze", str(tmp_path / "s"), "--keys", str(keys)]) == 2
    error = capsys.readouterr().err
    assert error.count("\n") == 1 and error.startswith("error: refusing to freeze suite")
    assert "PERSON at $.request." in error and survivors(error.replace(str(tmp_path), "")) == []
    assert (tmp_path / "s" / "suite.toml").read_text() == toml
    # a workspace name alone is found only with the registered names
    (tmp_path / "set").mkdir()
    (tmp_path / "set" / "provenance.jsonl").write_text(json.dumps({"workspace": TENANT, "example": 1}) + "\n")
    assert main(["privacy", "audit", str(tmp_path / "set")]) == 0
    assert "workspace names not looked for" in capsys.readouterr().out
    code, report = audit(tmp_path / "set", keys, capsys)
    assert code == 1 and f"{tmp_path / 'set' / 'provenance.jsonl'}:1: WORKSPACE at $.workspace" in report


def test_a_build_whose_output_would_name_the_workspace_refuses_and_writes_nothing(corpus, tmp_path, capsys):
    """The corpus read from a directory named after the tenant: the suite's manifest and the set's provenance and
    manifest record where it was read, so the audit of what each build would write finds the name; each build
    refuses in one line naming file, line and type, and writes nothing."""
    root, keys, _ = corpus
    moved = tmp_path / f"{TENANT}-exports" / "corpus"
    shutil.copytree(root, moved)
    assert main(["suite", "build", "--from-corpus", str(moved), "--keys", str(keys),
                 "--out", str(tmp_path / "suite")]) == 2
    error = capsys.readouterr().err
    assert error.count("\n") == 1 and f"{tmp_path / 'suite' / 'suite.toml'}:3: WORKSPACE" in error
    assert not (tmp_path / "suite").exists()
    # size 1: of the session's two verified actions, the second repeats a lookup its prompt holds the answer of
    policy = policy_file(tmp_path, 'size = 1\nshortfall = "fail"\nclean_from = ["verified_action"]\n[shares]\n'
                                   "clean = 100\n")
    assert main(["curate", "build", str(moved), "--keys", str(keys), "--policy", str(policy),
                 "--out", str(tmp_path / "set")]) == 2
    error = capsys.readouterr().err
    assert error.count("\n") == 1 and f"{tmp_path / 'set' / 'provenance.jsonl'}:1: WORKSPACE at $.corpus" in error
    assert "manifest.json" in error and survivors(error.replace(str(tmp_path), "")) == []
    assert not (tmp_path / "set").exists()


def test_a_path_a_subagent_ran_in_is_one_of_its_whole_sessions(tmp_path):
    """The recorded subagent session, one subagent's `cwd` moved (a worktree of its own): every file of the
    session, the main loop's too (it reads the subagent's output), knows both paths."""
    source = DATA.parent / "claude-code-subagents"
    shutil.copytree(source / WORKSPACE, tmp_path / WORKSPACE)
    agent = sorted((tmp_path / WORKSPACE).rglob("agent-*.jsonl"))[0]
    lines = [json.loads(line) for line in agent.read_text().splitlines()]
    for line in lines:
        if "cwd" in line:
            line["cwd"] = "/tmp/live/sub1/worktree-a"
    agent.write_text("".join(json.dumps(line, separators=(",", ":")) + "\n" for line in lines))
    corpus = ClaudeCodeDir(tmp_path)
    [(workspace, session, main_file)] = list(corpus.sessions([]))
    files = corpus.read_with_subagents(workspace, session, main_file)
    assert len(files) == 3 and all(f.paths == {"/tmp/live/sub1/home", "/tmp/live/sub1/worktree-a"} for f in files)
