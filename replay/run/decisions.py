"""The decision replay (`worker-replay run`): every arm × decision through an OpenAI-compatible endpoint.

Each decision is sent through the API it was captured on (its `api`, else the run's
`[endpoint] api`): chat to `/chat/completions`, Anthropic Messages to `/messages` (memory in the
`system` field), Responses to `/responses` (memory in `instructions`), so the engine renders the
prompt the model saw; every answer is read into one neutral form before it is scored.

Sandboxed by construction: it only asks the model for its next action (no tool is ever
executed), talks only to the configured endpoint (`replay.run.endpoint`: redirects are never followed,
so the loopback-unless-allowed rule holds for every hop), and never writes to the suite or memory
it reads. The executor (`replay.run.executor`) appends and flushes `results.jsonl` one result at a time, so a
run killed at any point resumes with exactly one result per (arm, decision).
"""

from __future__ import annotations

import asyncio
import json
import platform
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path
from typing import Any

import aiohttp
from pydantic import ValidationError

from core.jsonfile import schema_errors
from core.records import REQUESTS, Decision, Request, ResultRecord, Usage, request_api
from core.scoring import score_decision
from core.toolcalls import parse_response, request_schemas, transport_error
from core.wire import WIRES, BadAnswerError, DecisionApi
from replay.memory.files import WorkspaceMemory, load_workspace_memory, workspace_dir
from replay.memory.inject import ConditionError, inject, inject_system
from replay.run.directory import RESULTS, RunError, config_entries, read_completed
from replay.run.endpoint import Outcome, api_url, check_served, send_chat, served_entries
from replay.run.executor import Job, Perform, Served, open_run, run_job
from replay.run.run_config import Arm, RunConfig
from replay.suite import Suite


@dataclass(frozen=True)
class WorkItem:
    arm: Arm
    decision: Decision
    messages: list[dict[str, Any]]
    """The request's turn (chat: memory injected as the system message; Responses: `input`)."""
    rule_ids: tuple[str, ...]
    api: DecisionApi = "chat"
    """The API it is sent through: the decision's own, else the run's `[endpoint] api`."""
    request: Request | None = None
    """The decision's request read in `api`'s shape (None: `decision.request` as it is)."""
    system: Any = None
    """Messages `system` / Responses `instructions` with memory injected (None: absent)."""

    @property
    def prefix_key(self) -> tuple[str, str, str]:
        """Requests with equal keys share a rendered prompt prefix (the cache is per adapter). A replicate
        runs as its own group, as any other arm would, not beside its original's identical requests."""
        tools = json.dumps(self.decision.request.tools, sort_keys=True)
        system = "" if self.system is None else json.dumps(self.system, sort_keys=True)
        group = self.arm.name if self.arm.replicate_of else ""
        return self.arm.model, group, tools + system + json.dumps(self.messages, sort_keys=True)


def run_manifest(config: RunConfig, suite: Suite, served: Mapping[str, list[str]],
                 engine_version: str | None) -> dict[str, Any]:
    """The `run.json` of a run: config and its hash, suite identity, endpoint, models and engine version (an
    arm's own endpoint and what it serves under `arm_endpoints`)."""
    return {
        **config_entries(config),
        "suite": {"path": str(suite.path), "name": suite.manifest.name, "version": suite.manifest.version,
                  "sha256": suite.sha256, "decisions": len(suite.decisions)},
        **served_entries(config, served),
        "versions": {"worker_tier": _version("worker-tier"), "python": platform.python_version(),
                     "engine": engine_version},
        "started_at": datetime.now(UTC).isoformat(),
    }


def _version(dist: str) -> str | None:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None


def plan(suite: Suite, config: RunConfig, done: set[tuple[str, str]]) -> list[WorkItem]:
    """The remaining work, memory injected per arm, in the configured order."""
    memories: dict[str, WorkspaceMemory | None] = {}
    items: list[WorkItem] = []
    for arm in config.arms:
        condition = arm.condition
        for decision in suite.decisions:
            if (arm.name, decision.id) in done or (
                    arm.workspaces is not None and decision.workspace not in arm.workspaces):
                continue
            memory = decision.memory
            workspace = memory.workspace if memory and memory.workspace else decision.workspace
            if workspace not in memories:
                memories[workspace] = load_workspace_memory(config.memory.root, workspace)
            api = decision.api or config.endpoint.api
            request, wire = request_in(decision, api), WIRES[api]
            try:
                if wire.system_field is None:  # the API keeps its system prompt in the turn: memory goes there
                    injected = inject(decision.turn, condition, memories[workspace])
                    items.append(WorkItem(arm, decision, injected.messages, injected.rule_ids, api, request))
                    continue
                system, added = inject_system(getattr(request, wire.system_field), condition, memories[workspace])
            except ConditionError as exc:
                hint = _memory_hint(config, workspace)
                raise RunError(f"arm {arm.name}, decision {decision.id}: {exc}{hint}") from exc
            items.append(WorkItem(arm, decision, list(getattr(request, wire.turn_field)), added.rule_ids, api,
                                  request, system))
    return order_items(items, config.runner.order, seed=config.decoding.seed or 0)


def request_in(decision: Decision, api: DecisionApi) -> Request:
    """The decision's request read in the shape of the API it is sent through (a decision without an
    `api` is read as the run's `[endpoint] api`); RunError when it is not that API's request."""
    if request_api(decision.request) == api:
        return decision.request
    try:
        return REQUESTS[api].model_validate(decision.request.model_dump(exclude_unset=True))
    except ValidationError as exc:
        reasons = "; ".join(schema_errors(exc))
        raise RunError(f"decision {decision.id}: its request is not a {api} request, which this run's "
                       f"[endpoint] api sends it as ({reasons})") from None


def _memory_hint(config: RunConfig, workspace: str) -> str:
    """Where the memory a condition needs was looked for, and the command that makes an empty one for a workspace
    recorded without memory (or the arms that need none)."""
    root = config.memory.root
    fix = (f"; a workspace with no memory: `worker-replay memory init {root or 'ROOT'} {workspace}` (or --corpus DIR) "
           "makes an empty one, or run `withheld` arms only")
    if root is None:
        return f" (the run config has no [memory] root: a directory with one sub-directory per workspace{fix})"
    if not workspace_dir(root, workspace).is_dir():
        return f" (no directory {root / workspace} under [memory] root{fix})"
    return ""


def order_items(items: list[WorkItem], order: str, seed: int = 0) -> list[WorkItem]:
    """The work in the configured order (`Runner.order`)."""
    if order == "prefix":
        return sorted(items, key=lambda item: item.prefix_key)
    if order == "shuffled":
        shuffled = list(items)
        random.Random(seed).shuffle(shuffled)
        return shuffled
    return list(items)


def request_body(config: RunConfig, item: WorkItem) -> dict[str, Any]:
    """The request sent for one arm × decision, in its API's shape: the frozen request, the arm's model,
    memory and decoding (the Messages API requires `max_tokens`; Responses names it `max_output_tokens`)."""
    decoding = config.decoding_for(item.arm)
    wire = WIRES[item.api]
    request = item.request or item.decision.request
    fields = request.model_dump(exclude_none=True,
                                exclude={wire.turn_field, wire.system_field or wire.turn_field})
    if item.system is not None and wire.system_field is not None:
        fields[wire.system_field] = item.system
    body = {**fields, "model": item.arm.model, wire.turn_field: item.messages,
            "temperature": decoding.temperature, wire.limit_field: decoding.max_tokens, "top_p": decoding.top_p}
    if decoding.seed is not None:
        body["seed"] = decoding.seed
    if not body.get("tools"):
        body.pop("tools", None)
        body.pop("tool_choice", None)
    return body


def result_record(item: WorkItem, outcome: Outcome) -> ResultRecord:
    """Parse and score one answer (or its transport error) into the result line. Whatever the API, the
    answer is read as the gateway reads it (core/wire.py: content blocks or output items as a chat
    message with `tool_calls`), against the tools the request offered."""
    wire = WIRES[item.api]
    tools = wire.tools((item.request or item.decision.request).tools)
    body = outcome.body or {}
    try:
        message = wire.answer(body) if outcome.body is not None else {}
    except BadAnswerError:
        message = {}
    if outcome.body is None:
        parsed = transport_error(outcome.error or "no response")
    else:
        parsed = parse_response(message, tool_names={t["function"]["name"] for t in tools},
                                schemas=request_schemas(tools))
    prompt_tokens, completion_tokens = wire.usage(body)
    target = item.decision.target
    return ResultRecord(
        arm=item.arm.name, decision_id=item.decision.id, stratum=item.decision.stratum,
        cluster=item.decision.cluster, workspace=item.decision.workspace,
        target_tool=target.tool if target else None, model=item.arm.model, memory=item.arm.memory,
        raw_output={"message": message, "error": outcome.error, "finish_reason": wire.finish(body)},
        parsed=parsed, score=score_decision(item.decision, parsed),
        usage=Usage(prompt_tokens=prompt_tokens, completion_tokens=completion_tokens),
        latency_s=round(outcome.latency_s, 4), injected_rule_ids=list(item.rule_ids),
        attempts=outcome.attempts, finished_at=datetime.now(UTC), served_by=outcome.served_by,
        replicate_of=item.arm.replicate_of, thread=item.decision.thread,
    )


def perform(config: RunConfig) -> Perform[WorkItem]:
    """One arm × decision sent through its API and scored: the executor's unit of work."""

    async def send(session: aiohttp.ClientSession, item: WorkItem) -> ResultRecord:
        headers = {"X-Workspace-Id": item.decision.workspace, "X-Session-Id": item.decision.session,
                   "X-Worker-Replay": "1"}
        outcome = await send_chat(session, api_url(config, item.api, item.arm), request_body(config, item), headers,
                                  config)
        return result_record(item, outcome)

    return send


def decision_job(suite: Suite, config: RunConfig, served: Served, engine_version: str | None,
                 label: str = "replay") -> Job[WorkItem]:
    """`worker-replay run` as the executor runs it: one line per (arm, decision) in `results.jsonl`."""
    return Job(label=label, results=RESULTS, manifest=run_manifest(config, suite, served, engine_version),
               completed=read_completed, plan=lambda done: plan(suite, config, done), perform=perform(config))


def start_run(suite: Suite, config: RunConfig, run_dir: Path, served: Served,
              engine_version: str | None) -> Sequence[WorkItem]:
    """Check everything (served models, the run directory, the whole plan), then write run.json. Nothing is
    written when the run cannot start. Call under `run_lock`. Returns the work still to do."""
    check_served(config, served)
    items, _ = open_run(decision_job(suite, config, served, engine_version), run_dir)
    return items


def run(suite: Suite, config: RunConfig, run_dir: Path, label: str = "replay") -> tuple[int, int]:
    """Replay everything not yet recorded in `run_dir`. Returns (sent now, already done)."""
    return asyncio.run(run_async(suite, config, run_dir, label))


async def run_async(suite: Suite, config: RunConfig, run_dir: Path, label: str = "replay",
                    slots: asyncio.Semaphore | None = None) -> tuple[int, int]:
    """`run` in a running event loop, beside other work that shares the engine's `slots`
    (`replay.run.executor.execute`)."""
    executed = await run_job(config, run_dir, lambda served, version: decision_job(
        suite, config, served, version, label), slots)
    return executed.planned, len(executed.done_before)
