"""Replay-proven corrections and the lesson gate's kept rules, read from run directories (DESIGN §12).

A `known_failure` decision is corrected when replay proved, on the same state, an action that succeeds:

* `executed` — a sandbox episode of a scenario that reproduces the decision (`Scenario.decision`) completed
  with no critical failure and no unsupported completion; the target is the first call the world accepted,
  with the values it ran with, and its origin is the arm's served model;
* `recorded` — a replay arm chose, joint-correct, the session's own next call on that state (tool and key
  set), and the guard classed that call's result ok; the target is that recorded call with its values, and
  its origin is the model its record names.

An arm's answer is never the target: the text it wrote did not run. Executed outranks recorded; among proofs
of one kind the first arm by name is kept, so the same runs give the same proofs.

A rule the causal lesson gate promoted (replay/memory/lessons.py) gives `policy` examples: the decisions
where the arm carrying it was right and its ablation (`workspace-minus:<id>`) was not; the target is the
decision's own recorded call, and the prompt goes without the memory block.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Any

from core.records import KNOWN_FAILURE, ResultRecord, Strict
from replay.curation.errors import CurationError
from replay.memory.inject import Workspace, WorkspaceMinus, parse_condition
from replay.memory.lessons import AblationEvidence, LessonVerdict, acceptable, causal_verdicts, trials_from_results
from replay.run.directory import load_results, read_run_json
from replay.sandbox.pack import load_pack
from replay.sandbox.runner import SandboxResult, load_sandbox_results


class ProofKind(StrEnum):
    EXECUTED = "executed"
    RECORDED = "recorded"
    LESSON = "lesson"


class Proof(Strict):
    """What made an example: the run, the arm, and the episode (executed) or the rule (lesson)."""

    kind: ProofKind
    run: str
    arm: str
    episode: str | None = None
    rule: str | None = None


@dataclass(frozen=True)
class Correction:
    """A proven action for a decision's state: the tool and values that ran, whose answer it was."""

    tool: str
    arguments: dict[str, Any]
    model: str | None
    proof: Proof


Key = tuple[str, str]
"""A corpus decision: (workspace, decision id)."""


@dataclass(frozen=True)
class NextCall:
    """The session's own next call after a known failure, as the pool read it."""

    tool: str | None
    keys: frozenset[str]
    arguments: dict[str, Any] | None
    ok: bool
    model: str | None


@dataclass
class RunEvidence:
    """What the runs given to a build hold: replay results, sandbox episodes (with their scenarios' links)."""

    replays: dict[str, list[ResultRecord]]
    episodes: dict[str, list[tuple[SandboxResult, str | None]]]

    def decisions(self) -> Iterable[tuple[str, Key]]:
        """Every corpus decision a run names, with the run (to check they are this corpus's)."""
        for run, records in self.replays.items():
            yield from ((run, (r.workspace, r.decision_id)) for r in records)
        for run, episodes in self.episodes.items():
            yield from ((run, (e.workspace, d)) for e, d in episodes if d is not None)


def read_runs(run_dirs: Sequence[Path]) -> RunEvidence:
    """Every run's results; a directory that is not a run is a CurationError naming it."""
    evidence = RunEvidence({}, {})
    for run_dir in run_dirs:
        if not (run_dir / "results.jsonl").is_file():
            raise CurationError(f"{run_dir}: not a run directory (no results.jsonl)")
        info = read_run_json(run_dir)
        if info.get("kind") == "sandbox":
            pack = (info.get("pack") or {}).get("path")
            if not isinstance(pack, str) or not Path(pack).is_dir():
                raise CurationError(f"{run_dir}/run.json: the sandbox run's pack {pack!r} is not a directory here")
            links = {s.id: s.decision for s in load_pack(pack).scenarios}
            evidence.episodes[str(run_dir)] = [(r, links.get(r.scenario_id)) for r in load_sandbox_results(run_dir)]
        else:
            evidence.replays[str(run_dir)] = load_results(run_dir)
    return evidence


def executed_corrections(evidence: RunEvidence) -> dict[Key, Correction]:
    """Per decision, the first completed episode's first accepted call."""
    found: dict[Key, Correction] = {}
    for run, episodes in sorted(evidence.episodes.items()):
        for result, decision in sorted(episodes, key=lambda e: (e[0].arm, e[0].scenario_id)):
            scores = result.scores
            if decision is None or not scores.task_completed or scores.critical_failure \
                    or scores.unsupported_completion:
                continue
            first = next((e for e in result.trajectory.ledger if e.allowed and e.ok), None)
            if first is not None:
                found.setdefault((result.workspace, decision), Correction(
                    first.tool, json.loads(first.arguments), result.model,
                    Proof(kind=ProofKind.EXECUTED, run=run, arm=result.arm, episode=result.scenario_id)))
    return found


def known_failure_answers(evidence: RunEvidence) -> dict[Key, list[tuple[str, ResultRecord]]]:
    """Every replay answer on a known failure, by decision, in (run, arm) order."""
    found: dict[Key, list[tuple[str, ResultRecord]]] = {}
    for run, records in sorted(evidence.replays.items()):
        for r in sorted(records, key=lambda r: r.arm):
            if r.stratum == KNOWN_FAILURE:
                found.setdefault((r.workspace, r.decision_id), []).append((run, r))
    return found


def recorded_correction(answers: Sequence[tuple[str, ResultRecord]], after: NextCall | None) -> Correction | None:
    """The first answer that chose the session's own next call, when that call ran ok."""
    if after is None or not after.ok or after.tool is None or after.arguments is None:
        return None
    for run, r in answers:
        chosen = r.parsed.calls[0] if r.parsed.calls else None
        if chosen is not None and chosen.tool == after.tool and frozenset(chosen.key_set) == after.keys:
            return Correction(after.tool, after.arguments, after.model,
                              Proof(kind=ProofKind.RECORDED, run=run, arm=r.arm))
    return None


def lesson_wins(evidence: RunEvidence) -> dict[Key, Proof]:
    """Decisions a promoted rule won: the arm with it right, its ablation wrong (one proof per decision)."""
    found: dict[Key, Proof] = {}
    for run, records in sorted(evidence.replays.items()):
        promoted = {(v.evidence.model, v.workspace, v.rule_id) for v in causal_verdicts(trials_from_results(records))
                    if v.verdict is LessonVerdict.PROMOTE and isinstance(v.evidence, AblationEvidence)}
        full = {(r.model, r.decision_id): r for r in records if isinstance(parse_condition(r.memory), Workspace)}
        for r in sorted(records, key=lambda r: (r.arm, r.decision_id)):
            condition = parse_condition(r.memory)
            with_rule = full.get((r.model, r.decision_id))
            if not isinstance(condition, WorkspaceMinus) or with_rule is None or r.target_tool is None \
                    or (r.model, r.workspace, condition.rule_id) not in promoted \
                    or condition.rule_id not in with_rule.injected_rule_ids:
                continue
            if acceptable(with_rule) is True and acceptable(r) is False:
                found.setdefault((r.workspace, r.decision_id),
                                 Proof(kind=ProofKind.LESSON, run=run, arm=with_rule.arm, rule=condition.rule_id))
    return found
