"""The platform's runtime end to end, with its own session files as the corpus (DESIGN §9, §11).

The Claude Agent SDK (its bundled Claude Code CLI, offline) runs a tool loop with an in-process MCP
tool against the real engine behind the real gateway; the tool fails once (`is_error`). The route
forces a tool call (the 135M model does not call tools unprompted under Claude Code's prompt). The
gateway captures in `descriptor` mode: no text. Claude Code writes its session file as it always does,
in the workspace's config directory. Then: every captured decision resolves from that file alone,
proven by the canonical hashes; the suite built from them is replayed through the gateway's
`/v1/messages`, and what replay sends hashes to what the runtime sent. The session is
`worker-demo agent`'s own (demo/agent.py).
"""

from __future__ import annotations

import asyncio
import json

import pytest

from core.canonical import message_digest
from core.capture_store import read_decisions
from demo.agent import WORKSPACE, agent_session
from replay.corpus.capture_suite import build_suite
from replay.corpus.claude_code import ClaudeCodeDir
from replay.corpus.resolve import Resolved, resolve
from replay.run.decisions import run
from replay.run.run_config import RunConfig
from replay.suite import load_suite
from tests.support.gateway_harness import RunningGateway, wait_for, write_config

pytestmark = pytest.mark.engine


def test_a_claude_code_session_resolves_from_its_own_files_and_replays_the_same_prompt(engine, tmp_path):
    (tmp_path / "adapters").mkdir()
    config = write_config(tmp_path / "gw", [engine.base_url], tmp_path / "adapters",
                          gateway='forced_tool_routes = ["worker"]',
                          extra=f'[capture]\nmode = "descriptor"\nworkspaces = ["{WORKSPACE}"]\nsample_rate = 1.0\n')
    corpus, home = tmp_path / "corpus", tmp_path / "home"
    home.mkdir()
    with RunningGateway(config) as gw:
        session = asyncio.run(asyncio.wait_for(agent_session(gw.url, home, corpus, fail_first=True), 900))
        db = gw.config.capture.db
        captured = wait_for(lambda: (rows := read_decisions(db)) and len(rows) == 3 and rows, "three captures", 30)
        logged = gw.ok("GET", "/requests", limit=10)["requests"]
        assert {r["endpoint"] for r in logged} == {"messages"} and all(r["status"] == 200 for r in logged)
        assert len(session.executed) == 3 and {d.session for d in captured} == {session.session}
        first = captured[0]
        assert (first.api, first.chosen_tool, first.chosen_keys, first.tool_choice, first.forced) == (
            "messages", "mcp__inv__lookup", ["id"], "required", True)
        assert [d.outcome for d in captured] == ["failed", "ok", None]  # labelled from the next tool_result
        assert len({d.thread for d in captured}) == 1
        raw = b"".join(p.read_bytes() for p in db.parent.glob(db.name + "*"))
        assert b"Look up invoice" not in raw and b"You look up invoices" not in raw  # descriptors: no text

        # off the serving path: the runtime's own file proves every descriptor
        source = ClaudeCodeDir(corpus)
        resolved = [resolve(d, source) for d in captured]
        assert all(isinstance(r, Resolved) and r.request_verified for r in resolved), resolved
        keys = {WORKSPACE: bytes.fromhex("4b" * 32)}
        report = build_suite(db, tmp_path / "suite", transcripts=source, keys=keys)
        assert (report.resolved, report.request_verified, report.refused) == (2, 2, {})
        assert report.skipped == {"no verdict from its outcome": 1}  # the last call: no next turn labelled it
        suite = load_suite(tmp_path / "suite")
        assert [d.stratum for d in suite.decisions] == ["known_failure", "verified_action"]

        # replayed through the gateway's Messages API: the replay's own descriptors carry the same messages
        run_config = RunConfig.model_validate({
            "endpoint": {"base_url": f"{gw.url}/v1", "api_key_env": None},
            "decoding": {"temperature": 0.0, "seed": 0, "max_tokens": 32},
            "arms": [{"name": "withheld", "model": "worker", "memory": "withheld"}]})
        run(suite, run_config, tmp_path / "run")
        replayed = wait_for(lambda: (rows := read_decisions(db)[3:]) and len(rows) == 2 and rows, "replay captures", 30)
    # the replay sends the suite's messages as frozen; they are the captured prompt but for the session's runtime
    # paths (its working directory), which leave only as the tenant's pseudonyms (issue 65)
    frozen = {len(d.request.messages): d.request.messages for d in suite.decisions}
    assert [d.message_hashes for d in replayed] == [
        [message_digest("messages", m) for m in frozen[len(d.message_hashes)]] for d in replayed]
    assert sorted(len(d.message_hashes) for d in replayed) == [2, 4]
    for first in (d for d in captured if len(d.message_hashes) in frozen):
        messages = frozen[len(first.message_hashes)]
        changed = [m for m, h in zip(messages, first.message_hashes, strict=True) if message_digest("messages", m) != h]
        assert all("<PATH_" in json.dumps(m) for m in changed), changed
    results = [json.loads(line) for line in (tmp_path / "run" / "results.jsonl").read_text().splitlines()]
    assert {r["parsed"]["outcome"] for r in results} <= {"ok", "malformed_call"}
