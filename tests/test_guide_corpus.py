"""docs/guide.md run as typed against a corpus unlike the recorded one (issue 63): several workspaces, sessions
answered by the worker and by Claude, one workspace a copy of another, a tenant's session with other values, and
no memory tree. The corpus is made here from the recorded Claude Code files (tests/replay/corpus/data/claude-code,
written by the runtime itself): copied under other workspace names, the answering model renamed, a session's
values changed with the request log's hashes recomputed (tests/support/curation.py, tenant_session.py). Nothing
is written by hand.

The candidate is curated and trained, as the page's set-up asks: `curate build` on copies of the recorded
sessions under two other workspaces (one with its retry corrected), `adapter train` on the set it wrote.

What only the page on the engine shows is asserted: `memory init` gives every workspace an empty tree, and each
`+memory` arm then sends the very prompt its plain arm sends (the engine counts the same prompt tokens and answers
alike), so the memory comparison is empty; the copied workspace's decisions are kept once; every arm answers
every decision; the gate writes a verdict its digests verify.
"""

from __future__ import annotations

import shutil
from collections import Counter
from pathlib import Path

import pytest

from replay.analysis.gates import read_verdict
from replay.curation.build import curate, open_inputs
from replay.run.directory import load_results
from replay.suite import load_suite
from serve.cli import main as serve_main
from serve.engine.launcher import EngineProcess
from tests.support.curation import LOOKUP, copy_workspace, keys_file, plant_retry_value, policy_file, session_path
from tests.support.guide import CANDIDATE, run_guide
from tests.support.tenant_session import tenant_session

CUTOFF = "2026-12-04T00:00:00Z"
"""Before the recorded sessions (2026-12-04T00:04Z): the suite takes every call they hold."""
WORKSPACES = ("ws-claude", "ws-copy", "ws-tenant", "ws-worker")
TENANT_SESSION = "0c5e61d2-3f0a-4b7e-9d51-6a2f8e4b7c10"


def unlike_corpus(root: Path) -> Path:
    """Four workspaces from the recorded sessions: the worker's as recorded, the same answered by Claude, a copy
    of the worker's workspace, and a tenant's lookup session run elsewhere, with a customer in its lookup's result
    and another invoice asked for when it retried."""
    corpus = root / "corpus"
    copy_workspace(corpus, "ws-worker")
    copy_workspace(corpus, "ws-claude", model="claude-sonnet-4-5")
    shutil.copytree(corpus / "ws-worker", corpus / "ws-copy")
    recorded, _ = tenant_session(corpus, "ws-tenant", "/home/acme/ws-tenant")
    tenant = recorded.with_name(f"{TENANT_SESSION}.jsonl")  # its own session, not the recorded one's id
    tenant.write_text(recorded.read_text().replace(LOOKUP, TENANT_SESSION))
    recorded.unlink()
    plant_retry_value(tenant, TENANT_SESSION, 1, {"id": "INV-8"})
    return corpus


@pytest.fixture(scope="module")
def trained_candidate(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A LoRA adapter trained on a curated set: the recorded sessions copied under two workspaces of their own
    (one with its retried lookup given another value, so the retry corrects the failed call), built by the
    curation policy and trained on by `adapter train`."""
    root = tmp_path_factory.mktemp("candidate")
    copy_workspace(root / "corpus", "ws-w")
    copy_workspace(root / "corpus", "ws-r")
    plant_retry_value(session_path(root / "corpus", "ws-r", LOOKUP), LOOKUP, 1, {"id": "INV-8"})
    policy = policy_file(root, 'size = 3\nclean_from = ["verified_action"]\n[shares]\nclean = 100\n')
    curate(open_inputs([root / "corpus"], [], keys_file(root, ["ws-w", "ws-r"]), policy, [], []), root / "set")
    assert serve_main(["adapter", "train", "--data", str(root / "set"), "--seed", "0", "--examples", "2",
                       str(root / "adapter")]) == 0
    return root / "adapter"


@pytest.mark.engine
def test_the_guide_runs_on_a_corpus_unlike_the_recorded_one(engine: EngineProcess, trained_candidate: Path,
                                                            tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    corpus, memory, work = unlike_corpus(tmp_path), tmp_path / "memory", tmp_path / "work"
    work.mkdir()
    done, adapters = run_guide(engine, tmp_path, {
        "CORPUS": str(corpus), "MEMORY": str(memory), "CANDIDATE": str(trained_candidate), "CUTOFF": CUTOFF,
        "WORK": str(work)}, monkeypatch)
    assert {row["name"]: row["state"] for row in adapters}[CANDIDATE] == "loaded"

    made = [line.split(":")[0] for line in done.stdout.splitlines() if line.endswith("sends what `withheld` sends)")]
    assert made == list(WORKSPACES) and sorted(p.name for p in memory.iterdir()) == list(WORKSPACES)
    assert "a cluster is one task" in done.stdout  # the audit says what its clusters are

    suite = load_suite(work / "suite")
    assert suite.frozen and suite.decisions
    counts = Counter(d.workspace for d in suite.decisions)
    copies = {workspace: n for workspace, n in counts.items() if workspace != "ws-tenant"}
    assert len(copies) == 1 and set(copies) <= {"ws-claude", "ws-copy", "ws-worker"}  # one workspace, three copies
    assert list(copies.values()) == [counts["ws-tenant"]] == [3]  # its decisions once; the tenant's own values too

    results = {(r.arm, r.decision_id): r for r in load_results(work / "run")}
    arms = ("base", "base+memory", "candidate", "candidate+memory")
    assert sorted(results) == sorted((arm, d.id) for arm in arms for d in suite.decisions)
    assert not [r for r in results.values() if r.parsed.error or r.raw_output.get("error")]
    for d in suite.decisions:  # an empty tree injects nothing: the engine got the same prompt and answered alike
        for model in ("base", "candidate"):
            plain, memory_arm = results[(model, d.id)], results[(f"{model}+memory", d.id)]
            assert memory_arm.injected_rule_ids == [] and memory_arm.usage.prompt_tokens == plain.usage.prompt_tokens
            assert memory_arm.parsed == plain.parsed

    verdict = read_verdict(next(work.joinpath("run").glob("*corpus-only*candidate*.json")))
    assert verdict.policy == "corpus-only" and len(verdict.conditions) == 5
    assert "every digest matches" in done.stdout
    assert (work / "run" / "report.html").is_file()
