"""docs/guide.md runs as written: every shell block of the page, in order and in one shell, against the recorded
Claude Code sessions (tests/replay/corpus/data/claude-code, the runtime's own files), the session's real engine,
the real gateway started from configs/gateway.toml, and a real seeded LoRA adapter as the candidate.

The page's two set-up blocks and its second checkout's services are the only ones skipped (each is marked on the
page): the environment it asks the reader to set is set here to the fixtures, the gateway it starts is started
here from the same config file, changed in three values only (the engine's address, the port, the cache
directory), and the second checkout's lines are run as typed with the server that would listen stubbed out. A command on the page that
stops working, or stops writing what the next one reads, fails this test.
"""

from __future__ import annotations

import os
import re
import shlex
from pathlib import Path
from typing import Any

import pytest

from demo.agent import write_memory
from replay.analysis.gates import read_verdict
from replay.run.directory import load_results
from replay.suite import load_suite
from serve.engine.launcher import EngineProcess
from tests.support.guide import CANDIDATE, ROOT, guide_blocks, run_guide

CORPUS = ROOT / "tests" / "replay" / "corpus" / "data" / "claude-code"
CUTOFF = "2026-12-04T00:00:00Z"
"""Before the recorded sessions (2026-12-04T00:04Z): the suite takes every call they hold."""


def test_only_the_set_up_blocks_are_skipped() -> None:
    """What the test leaves out is the environment and the services it provides itself, nothing else."""
    skipped = [block for block, skip in guide_blocks() if skip]
    assert len(skipped) == 3  # the third, a second checkout's services, is started below with its server stubbed
    exported = re.findall(r"^export (\w+)=", skipped[0], re.M)
    assert exported == ["CORPUS", "MEMORY", "CANDIDATE", "CUTOFF", "WORK", "ENGINE", "WORKER_GATEWAY_URL",
                        "WORKER_GATEWAY_ADMIN_TOKEN"]  # each set by the test below
    assert skipped[1].split() == ["worker-serve", "engine", "--config", "configs/engine/cpu-smollm2.toml", "&",
                                  "worker-serve", "gateway", "--config", "configs/gateway.toml", "&"]
    assert len(guide_blocks()) - len(skipped) >= 6


def test_a_second_checkouts_services_start_as_shown(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The page's block for a second checkout, each line as typed ($WORK set): the engine's command parsed (its
    port), and the gateway built on its engine and stores, with the server that would listen stubbed out."""
    from serve.cli import build_parser
    from serve.cli import main as serve_main

    block = [block for block, skip in guide_blocks() if skip][2]
    monkeypatch.chdir(ROOT)
    monkeypatch.setenv("WORK", str(tmp_path))
    monkeypatch.setenv("WORKER_TIER_CACHE", str(tmp_path / "cache"))
    lines = [shlex.split(os.path.expandvars(line)) for line in block.replace("\\\n", " ").splitlines()]
    engine, gateway, exported = lines
    assert engine[:2] == gateway[:1] + ["engine"] and engine[-1] == gateway[-1] == "&"
    assert build_parser().parse_args(engine[1:-1]).port == 8001  # the engine itself is the session's, not started
    started: dict[str, Any] = {}
    monkeypatch.setattr("uvicorn.run", lambda app, **kw: started.update(app=app, **kw))
    assert serve_main(gateway[1:-1]) == 0
    config = started["app"].state.gateway.config
    assert started["port"] == 9001 and [u.url for u in config.upstreams] == ["http://127.0.0.1:8001"]
    assert (config.gateway.state_db, config.capture.db) == (tmp_path / "gateway" / "state.sqlite",
                                                            tmp_path / "gateway" / "capture.sqlite")
    assert config.gateway.state_db.is_file()  # opened where the flag says, before the server would listen
    assert exported == ["export", "ENGINE=http://127.0.0.1:8001", "WORKER_GATEWAY_URL=http://127.0.0.1:9001"]


@pytest.mark.engine
def test_the_guide_runs_from_corpus_to_verdict(engine: EngineProcess, seeded_adapters: dict[int, Path],
                                               tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    work = tmp_path / "work"
    work.mkdir()
    done, adapters = run_guide(engine, tmp_path, {
        "CORPUS": str(CORPUS), "MEMORY": str(write_memory(tmp_path / "memory")), "CANDIDATE": str(seeded_adapters[1]),
        "CUTOFF": CUTOFF, "WORK": str(work)}, monkeypatch)
    assert {row["name"]: row["state"] for row in adapters}[CANDIDATE] == "loaded"
    assert "ws-agent: kept as it is" in done.stdout  # `memory init` leaves a workspace with memory alone

    suite = load_suite(work / "suite")
    assert suite.frozen and suite.decisions
    assert {d.workspace for d in suite.decisions} == {"ws-agent"}
    results = load_results(work / "run")
    arms = ("base", "base+memory", "candidate", "candidate+memory")
    assert sorted((r.arm, r.decision_id) for r in results) == sorted(
        (arm, d.id) for arm in arms for d in suite.decisions)  # every arm answered every decision once
    assert not [r for r in results if r.parsed.error or r.raw_output.get("error")]
    prompt = {(r.arm, r.decision_id): r.usage.prompt_tokens for r in results}
    assert all(prompt[("base+memory", d.id)] > prompt[("base", d.id)] for d in suite.decisions)  # memory injected
    assert "candidate" in done.stdout and "base" in done.stdout
    verdict = read_verdict(next(work.joinpath("run").glob("*corpus-only*candidate*.json")))
    assert verdict.policy == "corpus-only" and len(verdict.conditions) == 5
    assert "every digest matches" in done.stdout  # `verify` on the verdict the gate wrote
    assert (work / "run" / "report.html").is_file() and (work / "run" / "report.md").is_file()
    assert "the longest prompt kept is" in done.stdout  # the engine counted every prompt at build time
    assert "missing now: critical-failures" in done.stdout  # the serious-candidate plan: what a corpus cannot give
