"""The platform's runtime itself through the gateway: the Claude Agent SDK (its bundled Claude Code CLI,
offline) runs a tool loop with an in-process MCP tool against the real engine, on a route that forces a
tool call (the 135M model does not call tools unprompted under Claude Code's prompt); the gateway
captures its decisions from what Claude Code sends (session header, `tool_use`, `tool_result`)."""

from __future__ import annotations

import asyncio
import json

import pytest

from core.capture import read_decisions
from tests.support.gateway_harness import RunningGateway, write_config

pytestmark = pytest.mark.engine

INVOICE = {"type": "object", "required": ["id"], "additionalProperties": False,
           "properties": {"id": {"type": "string", "enum": ["INV-7", "INV-8"]}}}


async def agent_session(gateway_url: str, home: str) -> tuple[list[dict], list[object]]:
    """One Claude Agent SDK session: (the tool's inputs as the SDK ran them, the SDK's messages)."""
    from claude_agent_sdk import ClaudeAgentOptions, ResultError, create_sdk_mcp_server, query, tool

    ran: list[dict] = []

    @tool("lookup", "Look up one invoice by its id.", INVOICE)
    async def lookup(args: dict) -> dict:
        ran.append(args)
        return {"content": [{"type": "text", "text": json.dumps({"id": args.get("id"), "status": "paid"})}]}

    options = ClaudeAgentOptions(
        system_prompt="You look up invoices with the lookup tool.", tools=[], max_turns=2, model="worker",
        mcp_servers={"inv": create_sdk_mcp_server(name="inv", version="1.0.0", tools=[lookup])},
        allowed_tools=["mcp__inv__lookup"], cwd=home,
        env={"ANTHROPIC_BASE_URL": gateway_url, "ANTHROPIC_AUTH_TOKEN": "not-checked", "HOME": home,
             "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1", "CLAUDE_CODE_MAX_OUTPUT_TOKENS": "64",
             "ENABLE_TOOL_SEARCH": "false",  # tools sent whole, not deferred behind a placeholder tool
             "ANTHROPIC_CUSTOM_HEADERS": "X-Workspace-Id: ws-agent"})
    messages: list[object] = []
    try:
        async for message in query(prompt="Look up invoice INV-7.", options=options):
            messages.append(message)
    except ResultError as exc:  # the forced route calls a tool every turn, so the loop ends at max_turns
        assert "maximum number of turns" in str(exc), exc
    return ran, messages


def test_a_claude_agent_sdk_tool_loop_runs_through_the_gateway_and_is_captured(engine, seeded_adapters,
                                                                             tmp_path):
    config = write_config(tmp_path / "gw", [engine.base_url], seeded_adapters[1].parent,
                          gateway='forced_tool_routes = ["worker"]',
                          extra='[capture]\nmode = "full"\nworkspaces = ["ws-agent"]\nsample_rate = 1.0\n')
    with RunningGateway(config) as gw:
        ran, messages = asyncio.run(asyncio.wait_for(agent_session(gw.url, str(tmp_path)), 900))
        gw.gateway.registry.flush()
        logged = gw.ok("GET", "/requests", limit=10)["requests"]
    session = next(m.data["session_id"] for m in messages if type(m).__name__ == "SystemMessage")
    assert ran and ran[0]["id"] in ("INV-7", "INV-8"), messages  # the SDK executed the model's call
    assert {r["endpoint"] for r in logged} == {"messages"} and all(r["status"] == 200 for r in logged)
    decisions = [d for d in read_decisions(gw.config.capture.db) if d.workspace == "ws-agent"]
    assert len(decisions) == len(logged) >= 2 and {d.session for d in decisions} == {session}
    first, second = decisions[0], decisions[1]
    assert (first.api, first.chosen_tool, first.chosen_keys) == ("messages", "mcp__inv__lookup", ["id"])
    assert first.tool_choice == "required" and "mcp__inv__lookup" in first.tools_offered
    assert first.outcome == "ok"  # labelled by the guard from the next request's tool_result
    assert first.request is not None and isinstance(first.request["system"], list | str)
    assert second.roles[-2:] == ["assistant", "user"]
