"""`worker-demo agent`: the platform's runtime through the gateway, its own session files as the corpus.

One Claude Agent SDK session (its bundled Claude Code, offline) runs a tool loop with an in-process MCP
tool against the real engine behind the real gateway. The tool fails once (`is_error`), as a flaky
service does, then answers. The gateway captures in `descriptor` mode: hashes, no text. Claude Code
keeps the session as it always does, in its config directory — one per workspace, as the platform runs
one container per workspace: `<out>/corpus/<workspace>/projects/<cwd-slug>/<session>.jsonl`. Off the
serving path, that corpus is audited, resolves every captured descriptor (proven by the canonical
hashes), becomes a redacted suite, and the suite is replayed through the same Messages API with the
workspace's memory withheld and injected; the report puts each arm's outcome beside what the sessions read
from memory on demand (replay/corpus/retrieval.py).

What it changes so that there is something to measure: the 135M model does not call tools unprompted
under Claude Code's prompt, so the demo's route is a `forced_tool_routes` route (every request that
offers tools must call one; said in `X-Worker-Tool-Choice: forced`). The loop therefore always calls,
and both replay arms do too: the comparison shows the loop and whether memory moves the call's
arguments, not whether the model decides to call.
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
import secrets
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from core.capture_store import read_decisions
from core.errors import WorkerTierError
from demo.memory import DemoRule, render_memory
from replay.analysis.compare import compare, format_comparison
from replay.analysis.report import report_run
from replay.analysis.report.memory_reads import retrieval_block
from replay.corpus.audit import audit, format_audit
from replay.corpus.capture_suite import build_suite
from replay.corpus.claude_code import ClaudeCodeDir
from replay.corpus.resolve import load_keys
from replay.corpus.retrieval import decision_reads
from replay.run.decisions import run
from replay.run.directory import load_results
from replay.run.run_config import RunConfig
from replay.sandbox.world import Episode
from replay.suite import load_suite

WORKSPACE = "ws-agent"
INVOICE = {"type": "object", "required": ["id"], "additionalProperties": False,
           "properties": {"id": {"type": "string", "enum": ["INV-7", "INV-8"]}}}
RULE = DemoRule(slug="lookup-first", text="Look an invoice up by the id the customer gives before answering about it.",
                role="genuine", evidence="user-explicit", pending=False,
                quote="Always check the invoice itself before you tell me anything about it.")
MAX_TURNS = 3
TIMED_OUT = "error: the invoice service timed out"


def write_memory(root: Path) -> Path:
    """The demo workspace's memory in the memory-system format (DESIGN §5): one authorised standing rule."""
    for relative, text in render_memory(WORKSPACE, "Acme", "Invoices for the agent demo.", "UTC", (RULE,)).items():
        path = root / WORKSPACE / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


@dataclass
class AgentRun:
    """What one SDK session did: its id, and each tool input the SDK executed."""

    session: str = ""
    executed: list[dict[str, Any]] = field(default_factory=list)


async def agent_session(gateway_url: str, home: Path, corpus: Path | None = None, *, fail_first: bool = False,
                        max_turns: int = MAX_TURNS, delegate: bool = False, max_output_tokens: int = 64,
                        world: Episode | None = None) -> AgentRun:
    """One Agent SDK session through the gateway, in workspace `WORKSPACE`. Claude Code writes its session
    files under `corpus/<workspace>` (its config directory) when `corpus` is given, else under `home`.
    With `fail_first` the tool's first call fails (`is_error`), as a timed-out service would. With
    `delegate` the main loop is offered only Claude Code's `Agent` tool, to hand the lookup to a `clerk`
    subagent: the 135M model fills that tool's input at length, so it needs about 1,000 output tokens to
    start one; at 64 its input is cut, and Claude Code keeps it as `__unparsedToolInput`. With `world` the tool is
    that sandbox episode's tool (`worker-demo loop`: the same code and state the sandbox proves corrections on)."""
    from claude_agent_sdk import (
        AgentDefinition,
        ClaudeAgentOptions,
        ResultError,
        SystemMessage,
        create_sdk_mcp_server,
        query,
        tool,
    )

    done = AgentRun()

    @tool("lookup", "Look up one invoice by its id.", INVOICE)
    async def lookup(args: dict[str, Any]) -> dict[str, Any]:
        done.executed.append(args)
        if world is not None:
            result = world.call("mcp__inv__lookup", args)
            return {"content": [{"type": "text", "text": json.dumps(result)}], "is_error": "error" in result}
        if fail_first and len(done.executed) == 1:
            return {"content": [{"type": "text", "text": TIMED_OUT}], "is_error": True}
        return {"content": [{"type": "text", "text": json.dumps({"id": args.get("id"), "status": "paid"})}]}

    home = home.absolute()  # Claude Code runs in `home`: a relative path it is given would be read from there
    env = {"ANTHROPIC_BASE_URL": gateway_url, "ANTHROPIC_AUTH_TOKEN": "demo", "HOME": str(home),
           "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1", "CLAUDE_CODE_MAX_OUTPUT_TOKENS": str(max_output_tokens),
           "ENABLE_TOOL_SEARCH": "false", "ANTHROPIC_CUSTOM_HEADERS": f"X-Workspace-Id: {WORKSPACE}"}
    if corpus is not None:
        env["CLAUDE_CONFIG_DIR"] = str(corpus.absolute() / WORKSPACE)
    tools: dict[str, Any] = {"tools": [], "allowed_tools": ["mcp__inv__lookup"]}
    if delegate:
        clerk = AgentDefinition(description="Looks invoices up.", prompt="You look up invoices with the lookup tool.",
                                tools=["mcp__inv__lookup"], maxTurns=2)
        tools = {"tools": ["Agent"], "agents": {"clerk": clerk}, "allowed_tools": ["Agent", "mcp__inv__lookup"],
                 "disallowed_tools": ["mcp__inv__lookup"]}
    options = ClaudeAgentOptions(
        system_prompt="You look up invoices with the lookup tool.", max_turns=max_turns, model="worker",
        mcp_servers={"inv": create_sdk_mcp_server(name="inv", version="1.0.0", tools=[lookup])},
        cwd=str(home), env=env, **tools)
    try:
        async for message in query(prompt="Look up invoice INV-7.", options=options):
            if isinstance(message, SystemMessage) and message.subtype == "init":
                done.session = str(message.data.get("session_id", ""))
    except ResultError as exc:  # a forced route calls a tool every turn: the loop ends at its turn limit
        if "maximum number of turns" not in str(exc):
            raise WorkerTierError(f"the Agent SDK session failed: {exc}") from exc
    return done


def run_agent(out: Path) -> int:
    from demo.serving import fresh_out, say, serving

    fresh_out(out, "the agent demo")
    if importlib.util.find_spec("claude_agent_sdk") is None:
        raise WorkerTierError("the agent demo drives the Claude Agent SDK, which `make demo` does not install: "
                              "`make test` does (the `dev` extra), or `.venv/bin/pip install -e '.[cpu,dev]'`")
    db, corpus, home = (out / "gateway" / "capture.sqlite").absolute(), out / "corpus", out / "agent-home"
    extra = f'[capture]\nmode = "descriptor"\nworkspaces = ["{WORKSPACE}"]\nsample_rate = 1.0\ndb = "{db}"\n'
    home.mkdir(parents=True)
    keys = out / "keys.toml"
    keys.write_text(f'[keys]\n"{WORKSPACE}" = "{secrets.token_hex(32)}"\n')
    keys.chmod(0o600)
    with serving(out, {}, extra, gateway_keys='forced_tool_routes = ["worker"]\n') as (gateway_url, _):
        say("running one Claude Agent SDK session through the gateway (Messages API, forced tool route, "
            "capture: descriptor)")
        session = asyncio.run(agent_session(gateway_url, home, corpus, fail_first=True))
        say(f"the SDK executed {len(session.executed)} tool call(s): {session.executed}")
        decisions = [d for d in read_decisions(db) if d.workspace == WORKSPACE]
        for d in decisions:
            say(f"captured {d.api} descriptor {d.id}: {d.chosen_tool} keys {d.chosen_keys} outcome {d.outcome}")
        if not session.executed or not decisions:
            raise WorkerTierError("the agent session produced no tool call or no captured decision")
        source = ClaudeCodeDir(corpus)
        print(format_audit(audit(source)))
        report = build_suite(db, out / "suite", name="agent", version="1", transcripts=source, keys=load_keys(keys))
        print(report)
        suite = load_suite(out / "suite")
        config = RunConfig.model_validate({
            "endpoint": {"base_url": f"{gateway_url}/v1", "api_key_env": None},
            "decoding": {"temperature": 0.0, "seed": 0, "max_tokens": 64},
            "memory": {"root": str(write_memory(out / "memory"))},
            "arms": [{"name": "withheld", "model": "worker", "memory": "withheld"},
                     {"name": "memory", "model": "worker", "memory": "workspace"}]})
        run(suite, config, out / "run", label="[agent] replay")
    print(f"session {session.session}: {len(decisions)} decisions captured, {report.resolved} resolved from Claude "
          f"Code's own session file, {len(suite.decisions)} in the suite")
    results = load_results(out / "run")
    print(format_comparison(compare(results, "withheld", "memory")))
    reads = decision_reads(source, suite.decisions, [])
    print(f"retrieval: {retrieval_block(results, suite.decisions, reads).note}")
    _, html = report_run(out / "run", decisions=suite.decisions, reads=reads)
    print(f"report: {html}")
    return 0
