"""The resumable replay runner: every arm × decision through an OpenAI-compatible endpoint.

Sandboxed by construction: it only asks the model for its next action (no tool is ever
executed), talks only to the configured endpoint (`replay.endpoint`: redirects are never followed,
so the loopback-unless-allowed rule holds for every hop), and never writes to the suite or memory
it reads. `results.jsonl` is appended and flushed one result at a time, so a run killed at any
point resumes with exactly one result per (arm, decision).
"""

from __future__ import annotations

import asyncio
import json
import platform
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path
from typing import Any

from core.records import Decision, ResultRecord, Usage
from core.scoring import score_decision
from core.toolcalls import parse_response, request_schemas, transport_error
from replay.config import Arm, RunConfig
from replay.endpoint import Outcome, chat_session, chat_url, check_served, fetch_models, send_chat
from replay.memory.files import WorkspaceMemory, load_workspace_memory, workspace_dir
from replay.memory.inject import ConditionError, inject, parse_condition
from replay.progress import Progress
from replay.rundir import (
    RESULTS,
    RunError,
    check_run_dir,
    config_entries,
    prepare_run_dir,
    read_completed,
    run_lock,
)
from replay.suite import Suite


@dataclass(frozen=True)
class WorkItem:
    arm: Arm
    decision: Decision
    messages: list[dict[str, Any]]
    rule_ids: tuple[str, ...]

    @property
    def prefix_key(self) -> tuple[str, str, str]:
        """Requests with equal keys share a rendered prompt prefix (the cache is per adapter). A replicate
        runs as its own group, as any other arm would, not beside its original's identical requests."""
        tools = json.dumps(self.decision.request.tools, sort_keys=True)
        group = self.arm.name if self.arm.replicate_of else ""
        return self.arm.model, group, tools + json.dumps(self.messages, sort_keys=True)


def run_manifest(config: RunConfig, suite: Suite, models: list[str], engine_version: str | None) -> dict[str, Any]:
    """The `run.json` of a run: config and its hash, suite identity, endpoint, models and engine version."""
    return {
        **config_entries(config),
        "suite": {"path": str(suite.path), "name": suite.manifest.name, "version": suite.manifest.version,
                  "sha256": suite.sha256, "decisions": len(suite.decisions)},
        "endpoint": config.endpoint.base_url,
        "models": models,
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
        condition = parse_condition(arm.memory)
        for decision in suite.decisions:
            if (arm.name, decision.id) in done or (
                    arm.workspaces is not None and decision.workspace not in arm.workspaces):
                continue
            memory = decision.memory
            workspace = memory.workspace if memory and memory.workspace else decision.workspace
            if workspace not in memories:
                memories[workspace] = load_workspace_memory(config.memory.root, workspace)
            try:
                injected = inject(decision.request.messages, condition, memories[workspace])
            except ConditionError as exc:
                hint = _memory_hint(config, workspace)
                raise RunError(f"arm {arm.name}, decision {decision.id}: {exc}{hint}") from exc
            items.append(WorkItem(arm, decision, injected.messages, injected.rule_ids))
    return order_items(items, config.runner.order, seed=config.decoding.seed or 0)


def _memory_hint(config: RunConfig, workspace: str) -> str:
    """Where the memory a condition needs was looked for."""
    if config.memory.root is None:
        return " (the run config has no [memory] root: a directory with one sub-directory per workspace)"
    if not workspace_dir(config.memory.root, workspace).is_dir():
        return f" (no directory {config.memory.root / workspace} under [memory] root)"
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
    """The chat request sent for one arm × decision: the frozen request, the arm's model, memory and decoding."""
    decoding = config.decoding_for(item.arm)
    request = item.decision.request.model_dump(exclude={"messages"})
    body = {**request, "model": item.arm.model, "messages": item.messages,
            "temperature": decoding.temperature, "max_tokens": decoding.max_tokens, "top_p": decoding.top_p}
    if decoding.seed is not None:
        body["seed"] = decoding.seed
    if not body.get("tools"):
        body.pop("tools", None)
        body.pop("tool_choice", None)
    return body


def result_record(item: WorkItem, outcome: Outcome) -> ResultRecord:
    """Parse and score one answer (or its transport error) into the result line."""
    tool_names = {t.get("function", {}).get("name") for t in item.decision.request.tools}
    body = outcome.body or {}
    choice = (body.get("choices") or [{}])[0]
    message = choice.get("message") or {}
    if outcome.body is None:
        parsed = transport_error(outcome.error or "no response")
    else:
        parsed = parse_response(message, tool_names=tool_names, schemas=request_schemas(item.decision.request.tools))
    usage = body.get("usage") or {}
    target = item.decision.target
    return ResultRecord(
        arm=item.arm.name, decision_id=item.decision.id, stratum=item.decision.stratum,
        cluster=item.decision.cluster, workspace=item.decision.workspace,
        target_tool=target.tool if target else None, model=item.arm.model, memory=item.arm.memory,
        raw_output={"message": message, "error": outcome.error, "finish_reason": choice.get("finish_reason")},
        parsed=parsed, score=score_decision(item.decision, parsed),
        usage=Usage(prompt_tokens=usage.get("prompt_tokens") or 0,
                    completion_tokens=usage.get("completion_tokens") or 0),
        latency_s=round(outcome.latency_s, 4), injected_rule_ids=list(item.rule_ids),
        attempts=outcome.attempts, finished_at=datetime.now(UTC), served_by=outcome.served_by,
        replicate_of=item.arm.replicate_of,
    )


async def execute(items: Sequence[WorkItem], config: RunConfig, results_path: Path,
                  on_result: Callable[[ResultRecord], None] | None = None, label: str = "replay") -> int:
    """Send every item with bounded concurrency; append each result as soon as it exists."""
    url = chat_url(config)
    queue: asyncio.Queue[WorkItem] = asyncio.Queue()
    for item in items:
        queue.put_nowait(item)
    progress = Progress(len(items), label)
    with results_path.open("a", encoding="utf-8") as out:
        async with chat_session(config) as session:

            async def worker() -> None:
                while not queue.empty():
                    item = queue.get_nowait()
                    headers = {"X-Workspace-Id": item.decision.workspace, "X-Session-Id": item.decision.session,
                               "X-Worker-Replay": "1"}
                    outcome = await send_chat(session, url, request_body(config, item), headers, config)
                    record = result_record(item, outcome)
                    out.write(record.model_dump_json() + "\n")
                    out.flush()
                    progress.advance()
                    if on_result:
                        on_result(record)

            await asyncio.gather(*(worker() for _ in range(min(config.runner.concurrency, len(items)) or 1)))
    progress.close()
    return len(items)


def start_run(suite: Suite, config: RunConfig, run_dir: Path, models: list[str],
              engine_version: str | None) -> list[WorkItem]:
    """Check everything (served models, the run directory, the whole plan), then write run.json.

    Nothing is written when the run cannot start, so a corrected config is a new run, not a
    refused "mix". Call under `run_lock`. Returns the work still to do.
    """
    check_served(config, models)
    manifest = run_manifest(config, suite, models, engine_version)
    check_run_dir(run_dir, manifest)
    items = plan(suite, config, read_completed(run_dir / RESULTS))
    prepare_run_dir(run_dir, manifest)
    return items


def run(suite: Suite, config: RunConfig, run_dir: Path, label: str = "replay") -> tuple[int, int]:
    """Replay everything not yet recorded in `run_dir`. Returns (sent now, already done)."""
    models, engine_version = asyncio.run(fetch_models(config))
    with run_lock(run_dir):
        items = start_run(suite, config, run_dir, models, engine_version)
        done = read_completed(run_dir / RESULTS)
        asyncio.run(execute(items, config, run_dir / RESULTS, label=label))
    return len(items), len(done)
