"""`worker-demo agent`: the platform's runtime through the gateway, end to end on the embedded default.

One Claude Agent SDK session (its bundled Claude Code, offline) runs a tool loop with an in-process MCP
tool against the real engine behind the real gateway, with capture in `full` mode for its workspace.
Its captured decisions (Messages API: `tool_use` in, `tool_result` out, labelled by the guard) become a
suite, replayed through the same API with the workspace's memory withheld and injected.

What it changes so that there is something to measure: the 135M model does not call tools unprompted
under Claude Code's prompt, so the demo's route is a `forced_tool_routes` route (every request that
offers tools must call one; said in `X-Worker-Tool-Choice: forced`). The loop therefore always calls,
and both replay arms do too: the comparison shows the loop and whether memory moves the call's
arguments, not whether the model decides to call.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

from core.capture import read_decisions
from core.errors import WorkerTierError
from demo.memory import DemoRule, render_memory
from replay.analysis.compare import compare, format_comparison, load_results
from replay.capture_suite import build_suite
from replay.config import RunConfig
from replay.runner import run
from replay.suite import load_suite

WORKSPACE = "ws-agent"
INVOICE = {"type": "object", "required": ["id"], "additionalProperties": False,
           "properties": {"id": {"type": "string", "enum": ["INV-7", "INV-8"]}}}
RULE = DemoRule(slug="lookup-first", text="Look an invoice up by the id the customer gives before answering about it.",
                role="genuine", evidence="user-explicit", pending=False,
                quote="Always check the invoice itself before you tell me anything about it.")
MAX_TURNS = 2


def write_memory(root: Path) -> Path:
    """The demo workspace's memory in the memory-system format (DESIGN §5): one authorised standing rule."""
    for relative, text in render_memory(WORKSPACE, "Acme", "Invoices for the agent demo.", "UTC", (RULE,)).items():
        path = root / WORKSPACE / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


async def agent_session(gateway_url: str, home: Path) -> tuple[list[dict[str, Any]], str]:
    """One Agent SDK session through the gateway: (the tool inputs the SDK executed, its session id)."""
    from claude_agent_sdk import ClaudeAgentOptions, ResultError, SystemMessage, create_sdk_mcp_server, query, tool

    executed: list[dict[str, Any]] = []

    @tool("lookup", "Look up one invoice by its id.", INVOICE)
    async def lookup(args: dict[str, Any]) -> dict[str, Any]:
        executed.append(args)
        return {"content": [{"type": "text", "text": json.dumps({"id": args.get("id"), "status": "paid"})}]}

    options = ClaudeAgentOptions(
        system_prompt="You look up invoices with the lookup tool.", tools=[], max_turns=MAX_TURNS, model="worker",
        mcp_servers={"inv": create_sdk_mcp_server(name="inv", version="1.0.0", tools=[lookup])},
        allowed_tools=["mcp__inv__lookup"], cwd=str(home),
        env={"ANTHROPIC_BASE_URL": gateway_url, "ANTHROPIC_AUTH_TOKEN": "demo", "HOME": str(home),
             "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1", "CLAUDE_CODE_MAX_OUTPUT_TOKENS": "64",
             "ENABLE_TOOL_SEARCH": "false", "ANTHROPIC_CUSTOM_HEADERS": f"X-Workspace-Id: {WORKSPACE}"})
    session = ""
    try:
        async for message in query(prompt="Look up invoice INV-7.", options=options):
            if isinstance(message, SystemMessage) and message.subtype == "init":
                session = str(message.data.get("session_id", ""))
    except ResultError as exc:  # a forced route calls a tool every turn: the loop ends at its turn limit
        if "maximum number of turns" not in str(exc):
            raise WorkerTierError(f"the Agent SDK session failed: {exc}") from exc
    return executed, session


def run_agent(out: Path) -> int:
    from demo.run import say, serving

    if out.exists() and any(out.iterdir()):
        raise WorkerTierError(f"{out} is not empty: the agent demo starts from a fresh directory")
    db = out / "gateway" / "capture.sqlite"
    extra = (f'[capture]\nmode = "full"\nworkspaces = ["{WORKSPACE}"]\nsample_rate = 1.0\ndb = "{db}"\n')
    home = out / "agent-home"
    home.mkdir(parents=True)
    with serving(out, {}, extra, gateway_keys='forced_tool_routes = ["worker"]\n') as (gateway_url, _):
        say("running one Claude Agent SDK session through the gateway (Messages API, forced tool route)")
        executed, session = asyncio.run(agent_session(gateway_url, home))
        say(f"the SDK executed {len(executed)} tool call(s): {executed}")
        decisions = [d for d in read_decisions(db) if d.workspace == WORKSPACE]
        for d in decisions:
            say(f"captured {d.api} decision {d.id}: {d.chosen_tool} keys {d.chosen_keys} outcome {d.outcome}")
        if not executed or not decisions:
            raise WorkerTierError("the agent session produced no tool call or no captured decision")
        report = build_suite(db, out / "suite", name="agent", version="1")
        print(report)
        suite = load_suite(out / "suite")
        config = RunConfig.model_validate({
            "endpoint": {"base_url": f"{gateway_url}/v1", "api_key_env": None},
            "decoding": {"temperature": 0.0, "seed": 0, "max_tokens": 64},
            "memory": {"root": str(write_memory(out / "memory"))},
            "arms": [{"name": "withheld", "model": "worker", "memory": "withheld"},
                     {"name": "memory", "model": "worker", "memory": "workspace"}]})
        run(suite, config, out / "run", label="[agent] replay")
    print(f"session {session}: {len(decisions)} decisions captured, {len(suite.decisions)} in the suite")
    print(format_comparison(compare(load_results(out / "run"), "withheld", "memory")))
    return 0
