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
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from demo.agent import write_memory
from replay.analysis.gates import read_verdict
from replay.run.directory import load_results
from replay.suite import load_suite
from serve.engine.launcher import EngineProcess
from tests.support.docblocks import shell_blocks
from tests.support.gateway_harness import TOKEN, RunningGateway
from tests.support.live import free_port

ROOT = Path(__file__).resolve().parents[1]
GUIDE = ROOT / "docs" / "guide.md"
CORPUS = ROOT / "tests" / "replay" / "corpus" / "data" / "claude-code"
CUTOFF = "2026-12-04T00:00:00Z"
"""Before the recorded sessions (2026-12-04T00:04Z): the suite takes every call they hold."""


def guide_blocks() -> list[tuple[str, bool]]:
    """Each shell block of the page and whether the page marks it as skipped by this test."""
    return shell_blocks(GUIDE, "<!-- guide-test: skipped")


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


def gateway_config(engine_url: str, port: int, cache: Path, out: Path) -> Path:
    """configs/gateway.toml with the engine's address, the port and the cache directory changed, nothing else."""
    text = (ROOT / "configs" / "gateway.toml").read_text(encoding="utf-8")
    for old, new in (('url = "http://127.0.0.1:8000"', f'url = "{engine_url}"'), ("port = 9000", f"port = {port}")):
        assert text.count(old) == 1, old
        text = text.replace(old, new)
    assert "{cache}" in text
    out.write_text(text.replace("{cache}", str(cache)), encoding="utf-8")
    return out


@pytest.mark.engine
def test_the_guide_runs_from_corpus_to_verdict(engine: EngineProcess, seeded_adapters: dict[int, Path],
                                               tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    work, cache = tmp_path / "work", tmp_path / "cache"
    work.mkdir()
    monkeypatch.setenv("WORKER_GATEWAY_ADMIN_TOKEN", TOKEN)  # configs/gateway.toml reads the token from there
    config = gateway_config(engine.base_url, free_port(), cache, tmp_path / "gateway.toml")
    script = "\n".join(f"echo '### guide block {n}' >&2\n{block}"
                       for n, (block, skip) in enumerate(guide_blocks(), 1) if not skip)
    with RunningGateway(config) as gateway:
        env = {**os.environ, "CORPUS": str(CORPUS), "MEMORY": str(write_memory(tmp_path / "memory")),
               "CANDIDATE": str(seeded_adapters[1]), "CUTOFF": CUTOFF, "WORK": str(work), "ENGINE": engine.base_url,
               "WORKER_GATEWAY_URL": gateway.url, "WORKER_GATEWAY_ADMIN_TOKEN": TOKEN,
               "WORKER_TIER_CACHE": str(cache), "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"}
        done = subprocess.run(["bash", "-euo", "pipefail", "-c", script], cwd=ROOT, env=env, capture_output=True,
                              text=True, timeout=1200)
        assert done.returncode == 0, f"{done.stderr[-4000:]}\n--- stdout ---\n{done.stdout[-4000:]}"
        loaded = {row["name"]: row for row in gateway.ok("GET", "/state")["adapters"]}
    assert loaded["candidate-v1"]["state"] == "loaded"

    suite = load_suite(work / "suite")
    assert suite.frozen and suite.decisions
    assert {d.workspace for d in suite.decisions} == {"ws-agent"}
    results = load_results(work / "run")
    arms = ("base", "base+memory", "candidate", "candidate+memory")
    assert sorted((r.arm, r.decision_id) for r in results) == sorted(
        (arm, d.id) for arm in arms for d in suite.decisions)  # every arm answered every decision once
    assert not [r for r in results if r.parsed.error or r.raw_output.get("error")]
    assert "candidate" in done.stdout and "base" in done.stdout
    verdict = read_verdict(next(work.joinpath("run").glob("*corpus-only*candidate*.json")))
    assert verdict.policy == "corpus-only" and len(verdict.conditions) == 5
    assert "every digest matches" in done.stdout  # `verify` on the verdict the gate wrote
    assert (work / "run" / "report.html").is_file() and (work / "run" / "report.md").is_file()
    assert "the longest prompt kept is" in done.stdout  # the engine counted every prompt at build time
    assert "missing now: critical-failures" in done.stdout  # the serious-candidate plan: what a corpus cannot give
