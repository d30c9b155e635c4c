"""The slow loop's sandbox world (`worker-demo loop`): the agent demo's invoice lookup, with a failure planted.

The Agent SDK session's MCP tool `lookup` (Claude Code names it `mcp__inv__lookup`) is this world's tool, so
the corpus the session writes and the sandbox that proves a correction run the very same code on the very
same state. Planted: invoice INV-7 was merged into INV-8, so looking INV-7 up is refused with that reason, and
looking INV-8 up succeeds. A known failure's state becomes a scenario (`scenario_for`): its messages are the
decision's request as chat, its world is this state, and it names the decision, so an episode that completes
it proves the correction `executed` (replay/curation/proofs.py).
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

from pydantic import Field

from core.records import Strict
from replay.sandbox.pack import PACK_TOML, SCENARIOS_JSONL, freeze_pack
from replay.sandbox.scenario import Scenario
from replay.sandbox.world import Args, Context, ToolFailureError, World, tool

TOOL = "mcp__inv__lookup"
CREATED = datetime(2026, 12, 1, tzinfo=UTC)


class LoopInvoice(Strict):
    status: Literal["paid", "open"]
    merged_into: str | None = None


class LoopState(Strict):
    invoices: dict[str, LoopInvoice]
    viewed: dict[str, bool] = Field(default_factory=dict)
    """Invoices looked up successfully: what a lookup task changes, so completing it shows in the state."""


PLANTED: dict[str, Any] = {"invoices": {"INV-7": {"status": "open", "merged_into": "INV-8"},
                                        "INV-8": {"status": "paid"}}}


class LookupArgs(Args):
    id: Literal["INV-7", "INV-8"]


@tool("Look up one invoice by its id.")
def mcp__inv__lookup(state: LoopState, args: LookupArgs, ctx: Context) -> dict[str, Any]:
    invoice = state.invoices[args.id]
    if invoice.merged_into is not None:
        raise ToolFailureError("merged",
                               f"{args.id} was merged into {invoice.merged_into}: look up {invoice.merged_into}")
    state.viewed[args.id] = True
    ctx.done = True  # the task is the lookup: an episode ends once an invoice is found
    return {"id": args.id, "status": invoice.status}


# The world's name in the scenarios the loop writes: kept from before the module was named for the loop, so the
# files the loop writes (its pack's scenarios.jsonl and the digests that name it) did not change.
LOOP_WORLD = World("ledger", LoopState, {TOOL: mcp__inv__lookup})
WORLDS = {LOOP_WORLD.name: LOOP_WORLD}


def scenario_for(decision: str, workspace: str, messages: list[dict[str, Any]], failed: dict[str, Any],
                 corrected: dict[str, Any]) -> Scenario:
    """The state before a known failure as a scenario: the planted world, the decision's messages; the oracle
    is the corrected call, the broken variant the failed one."""
    invoice = str(corrected.get("id"))
    return Scenario.model_validate({
        "id": f"loop-{decision}"[:100].replace(".", "-"), "world": LOOP_WORLD.name, "workspace": workspace,
        "policy_family": "recover-after-rejection", "clock": CREATED, "seed": 0, "initial_state": PLANTED,
        "messages": messages, "tools": [TOOL], "decision": decision,
        "oracle": [{"tool": TOOL, "arguments": corrected}], "broken": [{"tool": TOOL, "arguments": failed}],
        "oracle_answer": f"{invoice} is {PLANTED['invoices'].get(invoice, {}).get('status', 'unknown')}.",
        "broken_answer": "I could not look the invoice up.",
        "success": {"assert": [{"path": f"viewed.{invoice}", "op": "equals", "value": True}],
                    "may_change": ["viewed"]}})


def write_loop_pack(out_dir: Path, scenarios: list[Scenario]) -> Path:
    """A frozen pack of the loop's scenarios (its worlds: this module's)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / PACK_TOML).write_text(
        f'name = "loop-ledger"\nversion = "1"\ndescription = "Known failures of the loop\'s corpus, on the planted '
        f'ledger"\ncreated = {CREATED.strftime("%Y-%m-%dT%H:%M:%SZ")}\nworlds = "{__name__}"\n', encoding="utf-8")
    (out_dir / SCENARIOS_JSONL).write_text("".join(json.dumps(s.model_dump(mode="json", by_alias=True)) + "\n"
                                                   for s in scenarios), encoding="utf-8")
    freeze_pack(out_dir, at=CREATED)
    return out_dir
