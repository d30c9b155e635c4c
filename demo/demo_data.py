"""Deterministic demo: a frozen suite, a disjoint training split and workspace memory.

`write_demo(out_dir, seed)` writes

    out_dir/suite/{suite.toml,decisions.jsonl}   frozen held-out suite + training_sanity
    out_dir/train.jsonl                          training split (`TrainingExample`: full answers)
    out_dir/memory/<workspace>/...               memory files (see demo_memory)

Every draw comes from one `random.Random(seed)`, so the same seed gives the same bytes.
The suite holds 56 held-out decisions (16 verified_recovery, 14 clean_trajectory_action,
14 verified_action — four of those with a recorded no-call under `tool_choice: "auto"` —
and 12 known_failure) plus 24 training_sanity decisions drawn from the training
distribution. No decision state (request, up to tool-call ids) occurs twice across suite and
training split. Training lines carry the stratum their situation would have in a suite and the
full recorded call (`answer`: tool and argument values), which adapters are trained on.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from random import Random
from typing import TypeVar

from core.keyset import sorted_key_set
from core.records import Answer, ChatRequest, Decision, FailedAction, MemoryRef, Target, TrainingExample
from demo.memory import memory_files
from demo.scenarios import KITS, Call, Kit, Messages, Rejection, ScenarioStep, wrap_up
from replay.suite import DECISIONS_JSONL, SUITE_TOML, freeze_suite
from replay.suite_checks import request_hash

TRAIN_JSONL = "train.jsonl"
CREATED = datetime(2026, 8, 1, tzinfo=UTC)
TRAINING_SANITY = 24
TRAIN_SIZE = 96  # with the sanity draws: three cycles over the 40 training situations
RECOVERIES_PER_SITUATION = 2
# Repeats of a rejected call per workspace (one per rejection situation, cycling); ws-support
# gets the most: its memory holds the harmful rule that the lesson gate should catch.
RETRY_FAILURES = {"ws-invoicing": 2, "ws-support": 3, "ws-sales": 2, "ws-files": 1}
# Fresh known failures recorded content-free (only arg_keys kept).
CONTENT_FREE = frozenset({"ws-support", "ws-files"})
NO_CALL_STRATUM = {"ws-invoicing": "clean_trajectory_action", "ws-support": "clean_trajectory_action",
                   "ws-sales": "verified_action", "ws-files": "verified_action"}
_MAX_TRIES = 200
T = TypeVar("T")


class _Builder:
    """Draws decisions with unique states and sequential ids from one RNG."""

    def __init__(self, rng: Random) -> None:
        self.rng = rng
        self.seen: set[str] = set()
        self.count = 0

    def draw(self, make: Callable[[Random], T], kit: Kit, render: Callable[[T], Messages],
             tool_choice: str = "required") -> tuple[T, ChatRequest]:
        """A situation whose request (rendered by `render`) has not been drawn before."""
        for _ in range(_MAX_TRIES):
            situation = make(self.rng)
            request = _request(kit, render(situation), tool_choice)
            state = _state_key(request)
            if state not in self.seen:
                self.seen.add(state)
                return situation, request
        raise RuntimeError(f"{make.__name__}: no unseen state after {_MAX_TRIES} draws")

    def decision(self, prefix: str, stratum: str, kit: Kit, cluster: str, request: ChatRequest, month: int, *,
                 target: Call | None = None, no_call: bool = False, failed: FailedAction | None = None) -> Decision:
        self.count += 1
        start = datetime(2026, month, 1, tzinfo=UTC)
        captured = start + timedelta(seconds=self.rng.randrange(28 * 24 * 3600))
        recorded: Target | None
        if target is not None:
            recorded = Target(tool=target[0], arg_keys=sorted_key_set(target[1]))
        else:
            recorded = Target(tool=None) if no_call else None
        return Decision(
            id=f"{prefix}-{self.count:04d}", stratum=stratum, cluster=cluster, workspace=kit.workspace,
            session=f"s-{kit.workspace.removeprefix('ws-')}-{self.count:04d}", captured_at=captured,
            request=request, target=recorded, failed_action=failed, memory=MemoryRef(workspace=kit.workspace),
        )


def build_demo(seed: int = 0) -> tuple[list[Decision], list[TrainingExample]]:
    """(suite decisions, training examples), deterministic in `seed`."""
    builder = _Builder(Random(seed))
    held_out = [d for kit in KITS for d in _held_out(builder, kit)]
    pool = _training(builder, TRAINING_SANITY + TRAIN_SIZE)
    sanity = [Decision.model_validate(d.model_dump(exclude={"answer"})).model_copy(
                  update={"stratum": "training_sanity", "id": d.id.replace("train-", "sanity-")})
              for d in pool[:TRAINING_SANITY]]
    return held_out + sanity, pool[TRAINING_SANITY:]


def write_demo(out_dir: Path | str, seed: int = 0) -> tuple[Path, Path]:
    """Write the frozen demo suite, `train.jsonl` and memory; returns (suite_dir, memory_root).

    Refuses to write over an existing demo: a frozen suite is never rewritten.
    """
    out = Path(out_dir)
    suite_dir, memory_root, train_path = out / "suite", out / "memory", out / TRAIN_JSONL
    for path in (suite_dir, memory_root, train_path):
        if path.exists():
            raise FileExistsError(f"{path} already exists; write the demo into a new directory")
    suite, train = build_demo(seed)
    suite_dir.mkdir(parents=True)
    (suite_dir / SUITE_TOML).write_text(_manifest(seed), encoding="utf-8")
    (suite_dir / DECISIONS_JSONL).write_text(_jsonl(suite), encoding="utf-8")
    freeze_suite(suite_dir, at=CREATED, synthetic=True)
    train_path.write_text(_jsonl(train), encoding="utf-8")
    for kit in KITS:
        for relative, text in memory_files(kit.workspace).items():
            path = memory_root / kit.workspace / relative
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
    return suite_dir, memory_root


def _held_out(b: _Builder, kit: Kit) -> list[Decision]:
    out = []
    for make_rejection in kit.rejections:
        for _ in range(RECOVERIES_PER_SITUATION):
            rej, request = b.draw(make_rejection, kit, lambda r: r.messages)
            out.append(b.decision("demo", "verified_recovery", kit, rej.cluster, request, 7, target=rej.recovery))
    for make in kit.flows:
        step, request = b.draw(make, kit, lambda s: s.messages)
        out.append(b.decision("demo", "clean_trajectory_action", kit, step.cluster, request, 7, target=step.call))
    for make in kit.actions:
        step, request = b.draw(make, kit, lambda s: s.messages)
        out.append(b.decision("demo", "verified_action", kit, step.cluster, request, 7, target=step.call))
    step, request = b.draw(kit.flows[0], kit, lambda s: wrap_up(b.rng, s), "auto")
    out.append(b.decision("demo", NO_CALL_STRATUM[kit.workspace], kit, step.cluster + "/wrap-up", request, 7,
                          no_call=True))
    for i in range(RETRY_FAILURES[kit.workspace]):
        rej, request = b.draw(kit.rejections[i % len(kit.rejections)], kit, lambda r: r.messages)
        failed = FailedAction(tool=rej.rejected[0], arguments=rej.rejected[1])
        out.append(b.decision("demo", "known_failure", kit, rej.cluster, request, 7, failed=failed))
    for make in kit.fresh_failures:
        step, request = b.draw(make, kit, lambda s: s.messages)
        tool, arguments = step.call
        failed = (FailedAction(tool=tool, arg_keys=sorted_key_set(arguments)) if kit.workspace in CONTENT_FREE
                  else FailedAction(tool=tool, arguments=arguments))
        out.append(b.decision("demo", "known_failure", kit, step.cluster, request, 7, failed=failed))
    return out


def _training(b: _Builder, size: int) -> list[TrainingExample]:
    """Cycles over every situation of every workspace (recoveries twice), each cycle shuffled,
    so any prefix (training_sanity) has its clusters in the rest (the training split)."""
    slots: list[tuple[Kit, str, Callable[[Random], ScenarioStep | Rejection]]] = [
        *((kit, "verified_recovery", make) for kit in KITS for make in kit.rejections for _ in range(2)),
        *((kit, "clean_trajectory_action", make) for kit in KITS for make in kit.flows),
        *((kit, "verified_action", make) for kit in KITS for make in kit.actions),
    ]
    out: list[TrainingExample] = []
    while len(out) < size:
        cycle = list(slots)
        b.rng.shuffle(cycle)
        for kit, stratum, make in cycle[: size - len(out)]:
            situation, request = b.draw(make, kit, lambda s: s.messages)
            target = situation.recovery if isinstance(situation, Rejection) else situation.call
            decision = b.decision("train", stratum, kit, situation.cluster, request, 6, target=target)
            out.append(TrainingExample(**dict(decision), answer=Answer(tool=target[0], arguments=target[1])))
    return out


def _state_key(request: ChatRequest) -> str:
    """A request's identity up to its random tool-call ids: two draws that differ only in
    those ids are the same state, and one of them in training would leak the other."""
    messages = [{k: v for k, v in m.items() if k != "tool_call_id"} for m in request.messages]
    for message in messages:
        if message.get("tool_calls"):
            message["tool_calls"] = [{k: v for k, v in c.items() if k != "id"} for c in message["tool_calls"]]
    return request_hash(request.model_copy(update={"messages": messages}))


def _request(kit: Kit, messages: Messages, tool_choice: str) -> ChatRequest:
    system = {"role": "system", "content": kit.system}
    return ChatRequest(messages=[system, *messages], tools=list(kit.tools), tool_choice=tool_choice)


def _manifest(seed: int) -> str:
    return (
        'name = "demo"\nversion = "1"\n'
        f'description = "Synthetic four-workspace demo suite (seed {seed}); training split in ../train.jsonl"\n'
        f"created = {CREATED.strftime('%Y-%m-%dT%H:%M:%SZ')}\n"
    )


def _jsonl(decisions: Iterable[Decision]) -> str:
    return "".join(json.dumps(d.model_dump(mode="json"), ensure_ascii=False) + "\n" for d in decisions)
