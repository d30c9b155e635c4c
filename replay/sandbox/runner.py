"""Sandboxed episodes: every arm × scenario of a pack, the candidate driving the tool loop to the end.

The same RUN.toml arms, memory injection (`replay.memory.inject`), endpoint client with its
retries (`replay.run.endpoint`) and tool-call parser (`core.toolcalls`) as `worker-replay run`. An
episode asks the model for its next message; its calls run in the scenario's world and their
results are appended; it ends on a final answer without a call, the world's `done`, or a limit.
Each result holds the whole trajectory (per turn: the messages appended since the last request,
the raw answer, the parsed calls; the action log; the end state and its hash) and its scores.
The executor of `worker-replay run` (`replay.run.executor`) appends `results.jsonl` one episode at a time, so a
run killed at any point resumes with exactly one result per (arm, scenario); a changed config, pack or endpoint
kind is refused with what changed. The run directory is `worker-replay run`'s (`replay.run.directory`): one
writer at a time, and a second line for one (arm, scenario) is an error for every reader.

The endpoint kind is recorded: `engine` (the engine itself) or `gateway`; a run through the
gateway's route with the candidate pinned is *isolated live replay* (DESIGN §8).
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

import aiohttp

from core.guard import tool_text
from core.jsonfile import read_jsonl
from core.names import Name, excerpt
from core.records import ParseOutcome, Strict
from core.toolcalls import parse_response, request_schemas
from replay.memory.files import WorkspaceMemory, load_workspace_memory
from replay.memory.inject import ConditionError, inject
from replay.run.directory import RESULTS, RunError, check_seal, config_entries, read_completed
from replay.run.endpoint import chat_url, send_chat, served_entries
from replay.run.executor import Job, Perform, Served, run_job
from replay.run.run_config import Arm, RunConfig
from replay.sandbox.measures import Scores, score
from replay.sandbox.pack import Pack, oracle_end_state, start_episode, trajectory_of
from replay.sandbox.scenario import SESSION_PREFIX, Call, EndedBy, Scenario, Trajectory, Turn, TurnUsage
from replay.sandbox.world import JSON, World

EndpointKind = Literal["engine", "gateway"]


class SandboxResult(Strict):
    """One line of a sandbox run's `results.jsonl`."""

    arm: str
    scenario_id: str
    world: str
    workspace: Name
    policy_family: str
    model: str
    memory: str
    endpoint_kind: EndpointKind
    injected_rule_ids: list[str]
    trajectory: Trajectory
    scores: Scores
    episode_s: float  # wall time of the episode, model included
    sandbox_s: float  # of which: world execution, action log and scoring
    finished_at: datetime


@dataclass(frozen=True)
class EpisodeItem:
    arm: Arm
    scenario: Scenario
    messages: list[dict[str, Any]]
    rule_ids: tuple[str, ...]


def sandbox_manifest(config: RunConfig, pack: Pack, served: Mapping[str, list[str]], engine_version: str | None,
                     endpoint_kind: EndpointKind) -> dict[str, Any]:
    """The `run.json` of a sandbox run: as `worker-replay run`'s, with the pack instead of the suite."""
    return {
        "kind": "sandbox",
        **config_entries(config),
        "pack": {"path": str(pack.path.resolve()), "name": pack.manifest.name, "version": pack.manifest.version,
                 "sha256": pack.sha256, "scenarios": len(pack.scenarios)},
        **served_entries(config, served),
        "endpoint_kind": endpoint_kind,
        "versions": {"engine": engine_version},
        "started_at": datetime.now(UTC).isoformat(),
    }


def plan_episodes(pack: Pack, config: RunConfig, done: set[tuple[str, str]]) -> list[EpisodeItem]:
    """The episodes not yet recorded, memory injected per arm as in `worker-replay run`."""
    memories: dict[str, WorkspaceMemory | None] = {}
    items = []
    for arm in config.arms:
        condition = arm.condition
        for scenario in pack.scenarios:
            if (arm.name, scenario.id) in done or (arm.workspaces is not None
                                                    and scenario.workspace not in arm.workspaces):
                continue
            if scenario.workspace not in memories:
                memories[scenario.workspace] = load_workspace_memory(config.memory.root, scenario.workspace)
            try:
                injected = inject(scenario.messages, condition, memories[scenario.workspace])
            except ConditionError as exc:
                raise RunError(f"arm {arm.name}, scenario {scenario.id}: {exc}") from None
            items.append(EpisodeItem(arm, scenario, injected.messages, injected.rule_ids))
    return items


def _body(config: RunConfig, arm: Arm, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> dict[str, Any]:
    decoding = config.decoding_for(arm)
    body: dict[str, Any] = {"model": arm.model, "messages": messages, "tools": tools, "tool_choice": "auto",
                            "temperature": decoding.temperature, "max_tokens": decoding.max_tokens,
                            "top_p": decoding.top_p}
    if decoding.seed is not None:
        body["seed"] = decoding.seed
    return body


async def run_episode(session: aiohttp.ClientSession, url: str, config: RunConfig, item: EpisodeItem, world: World,
                      oracle_end: JSON, endpoint_kind: EndpointKind) -> SandboxResult:
    scenario, arm = item.scenario, item.arm
    began = time.perf_counter()
    sandbox_s = 0.0
    tick = time.perf_counter()
    episode = start_episode(world, scenario)
    start = episode.snapshot()
    tools = world.schemas(scenario.tools)
    sandbox_s += time.perf_counter() - tick
    headers = {"X-Workspace-Id": scenario.workspace, "X-Session-Id": f"{SESSION_PREFIX}{scenario.id}",
               "X-Worker-Replay": "1"}
    messages, sent = list(item.messages), 0
    turns: list[Turn] = []
    final: str | None = None
    ended_by: EndedBy = "max_turns"
    for turn_no in range(scenario.limits.max_steps + 2):
        delta, sent = messages[sent:], len(messages)
        outcome = await send_chat(session, url, _body(config, arm, messages, tools), headers, config)
        if outcome.body is None:
            turns.append(Turn(request_delta=delta, outcome=ParseOutcome.TRANSPORT_ERROR.value, error=outcome.error,
                              latency_s=round(outcome.latency_s, 4)))
            ended_by = "transport_error"
            break
        choice = (outcome.body.get("choices") or [{}])[0]
        message = choice.get("message") or {}
        parsed = parse_response(message, tool_names=scenario.tools, schemas=request_schemas(tools))
        usage = outcome.body.get("usage") or {}
        turns.append(Turn(
            request_delta=delta, message=message, finish_reason=choice.get("finish_reason"),
            outcome=parsed.outcome.value, calls=[Call(tool=c.tool, arguments=c.arguments) for c in parsed.calls],
            error=parsed.error, latency_s=round(outcome.latency_s, 4),
            usage=TurnUsage(prompt_tokens=usage.get("prompt_tokens") or 0,
                            completion_tokens=usage.get("completion_tokens") or 0)))
        if parsed.outcome is ParseOutcome.NO_CALL:
            final, ended_by = tool_text(message.get("content")), "final_answer"
            break
        if not parsed.calls:
            ended_by = "no_answer"
            break
        ids = [f"call_{turn_no}_{i}" for i in range(len(parsed.calls))]
        messages.append({"role": "assistant", "content": None, "tool_calls": [
            {"id": call_id, "type": "function", "function": {"name": c.tool, "arguments": json.dumps(c.arguments)}}
            for call_id, c in zip(ids, parsed.calls, strict=True)]})
        tick = time.perf_counter()
        stop: EndedBy | None = None
        for call_id, call in zip(ids, parsed.calls, strict=True):
            if len(episode.actions) >= scenario.limits.max_steps:
                stop = "max_steps"
                break
            result = episode.call(call.tool, call.arguments)
            messages.append({"role": "tool", "tool_call_id": call_id, "content": json.dumps(result)})
        errors = sum(1 for e in episode.actions if not e.ok)
        sandbox_s += time.perf_counter() - tick
        if stop is None and episode.ctx.done:
            stop = "done"
        if stop is None and errors > scenario.limits.max_errors:
            stop = "max_errors"
        if stop is not None:
            ended_by = stop
            break
    tick = time.perf_counter()
    trajectory = trajectory_of(episode, start, final, ended_by, turns)
    scores = score(scenario, trajectory, oracle_end, world.prose_fields)
    sandbox_s += time.perf_counter() - tick
    return SandboxResult(
        arm=arm.name, scenario_id=scenario.id, world=scenario.world, workspace=scenario.workspace,
        policy_family=scenario.policy_family, model=arm.model, memory=arm.memory, endpoint_kind=endpoint_kind,
        injected_rule_ids=list(item.rule_ids), trajectory=trajectory, scores=scores,
        episode_s=round(time.perf_counter() - began, 4), sandbox_s=round(sandbox_s, 6), finished_at=datetime.now(UTC))


def perform(pack: Pack, config: RunConfig, endpoint_kind: EndpointKind) -> Perform[EpisodeItem]:
    """One episode to its result line: the executor's unit of work. An episode holds an engine slot for its whole
    life (the executor's `slots`): its turns go one after another, and each turn queued behind other work would
    lengthen it by a queue's wait, so the longest episode, not the engine, would set the pace."""
    oracle_ends: dict[str, JSON] = {}

    async def episode(session: aiohttp.ClientSession, item: EpisodeItem) -> SandboxResult:
        scenario = item.scenario
        if scenario.id not in oracle_ends:
            oracle_ends[scenario.id] = oracle_end_state(pack.world(scenario), scenario)
        return await run_episode(session, chat_url(config, item.arm), config, item, pack.world(scenario),
                                 oracle_ends[scenario.id], endpoint_kind)

    return episode


def sandbox_job(pack: Pack, config: RunConfig, served: Served, engine_version: str | None,
                endpoint_kind: EndpointKind) -> Job[EpisodeItem]:
    """`worker-replay sandbox run` as the executor runs it: one line per (arm, scenario) in `results.jsonl`."""
    return Job(label="sandbox", results=RESULTS,
               manifest=sandbox_manifest(config, pack, served, engine_version, endpoint_kind),
               completed=lambda path: read_completed(path, key="scenario_id"),
               plan=lambda done: plan_episodes(pack, config, done), perform=perform(pack, config, endpoint_kind))


def run_sandbox(pack: Pack, config: RunConfig, run_dir: Path,
                endpoint_kind: EndpointKind = "engine") -> tuple[int, int]:
    """Run every episode not yet recorded in `run_dir`. Returns (run now, already done)."""
    return asyncio.run(run_sandbox_async(pack, config, run_dir, endpoint_kind))


async def run_sandbox_async(pack: Pack, config: RunConfig, run_dir: Path, endpoint_kind: EndpointKind = "engine",
                            slots: asyncio.Semaphore | None = None) -> tuple[int, int]:
    """`run_sandbox` in a running event loop, beside other work that shares the engine's `slots`."""
    executed = await run_job(config, run_dir, lambda served, version: sandbox_job(
        pack, config, served, version, endpoint_kind), slots)
    return executed.planned, len(executed.done_before)


def load_sandbox_results(run_dir: Path) -> list[SandboxResult]:
    """Every result of a run; a bad line or a second line for one (arm, scenario) is an error with file:line."""
    path = run_dir / RESULTS
    if not path.is_file():
        raise RunError(f"{run_dir} holds no {RESULTS}")
    check_seal(run_dir, RESULTS, RunError)
    rows = []
    seen: dict[tuple[str, str], int] = {}
    for line in read_jsonl(path, SandboxResult, "a sandbox result"):
        row = line.value
        if row is None:
            raise RunError(f"{path}:{line.number}: not a sandbox result: {'; '.join(line.problems)}")
        key = (row.arm, row.scenario_id)
        if key in seen:
            raise RunError(f"{path}:{line.number}: second result for arm {excerpt(row.arm)} scenario "
                           f"{excerpt(row.scenario_id)} (first at line {seen[key]}); a run has one line per "
                           "arm × scenario")
        seen[key] = line.number
        rows.append(row)
    return rows


def rescore(pack: Pack, results: Sequence[SandboxResult]) -> list[tuple[SandboxResult, Scores]]:
    """Every stored trajectory scored again (pure): what `sandbox score` compares byte for byte."""
    scenarios = {s.id: s for s in pack.scenarios}
    ends: dict[str, JSON] = {}
    out = []
    for result in results:
        scenario = scenarios.get(result.scenario_id)
        if scenario is None:
            raise RunError(f"scenario {result.scenario_id!r} is not in the pack {pack.path}")
        world = pack.world(scenario)
        if scenario.id not in ends:
            ends[scenario.id] = oracle_end_state(world, scenario)
        out.append((result, score(scenario, result.trajectory, ends[scenario.id], world.prose_fields)))
    return out
