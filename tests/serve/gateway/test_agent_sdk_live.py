"""The platform's runtime itself through the gateway: the Claude Agent SDK (its bundled Claude Code CLI,
offline) runs a tool loop with an in-process MCP tool against the real engine, on a route that forces a
tool call (the 135M model does not call tools unprompted under Claude Code's prompt); the gateway
captures its decisions from what Claude Code sends (session header, `tool_use`, `tool_result`). The session is
`worker-demo agent`'s own (demo/agent.py), which then replays these decisions through the Messages API."""

from __future__ import annotations

import asyncio

import pytest

from core.capture import read_decisions
from demo.agent import WORKSPACE, agent_session
from tests.support.gateway_harness import RunningGateway, write_config

pytestmark = pytest.mark.engine


def test_a_claude_agent_sdk_tool_loop_runs_through_the_gateway_and_is_captured(engine, seeded_adapters,
                                                                             tmp_path):
    config = write_config(tmp_path / "gw", [engine.base_url], seeded_adapters[1].parent,
                          gateway='forced_tool_routes = ["worker"]',
                          extra=f'[capture]\nmode = "full"\nworkspaces = ["{WORKSPACE}"]\nsample_rate = 1.0\n')
    with RunningGateway(config) as gw:
        ran, session = asyncio.run(asyncio.wait_for(agent_session(gw.url, tmp_path), 900))
        gw.gateway.registry.flush()
        logged = gw.ok("GET", "/requests", limit=10)["requests"]
    assert ran and ran[0]["id"] in ("INV-7", "INV-8")  # the SDK executed the model's call
    assert {r["endpoint"] for r in logged} == {"messages"} and all(r["status"] == 200 for r in logged)
    decisions = [d for d in read_decisions(gw.config.capture.db) if d.workspace == WORKSPACE]
    assert len(decisions) == len(logged) >= 2 and {d.session for d in decisions} == {session}
    first, second = decisions[0], decisions[1]
    assert (first.api, first.chosen_tool, first.chosen_keys) == ("messages", "mcp__inv__lookup", ["id"])
    assert first.tool_choice == "required" and "mcp__inv__lookup" in first.tools_offered
    assert first.outcome == "ok"  # labelled by the guard from the next request's tool_result
    assert first.request is not None and isinstance(first.request["system"], list | str)
    assert second.roles[-2:] == ["assistant", "user"]
