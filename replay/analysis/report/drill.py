"""The drill-down: each paired decision of a comparison as a win, a loss or the same for the candidate."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from core.records import ResultRecord
from replay.analysis.compare import Comparison


@dataclass(frozen=True)
class DrillRow:
    decision_id: str
    stratum: str
    outcome: str  # win | loss | same
    baseline: ResultRecord
    candidate: ResultRecord


def drill_rows(results: Sequence[ResultRecord], comparison: Comparison) -> list[DrillRow]:
    """Every decision of a comparison with whether the candidate won, lost or matched.

    Positive decisions compare joint correctness; failed-action states compare exact repeats
    (tool repeats where the arguments were withheld), where not repeating is the win.
    """
    base = {r.decision_id: r for r in results if r.arm == comparison.baseline}
    cand = {r.decision_id: r for r in results if r.arm == comparison.candidate}
    rows = []
    for decision_id, b in base.items():
        c = cand.get(decision_id)
        if c is not None:
            rows.append(DrillRow(decision_id, b.stratum, _outcome(b, c), b, c))
    return rows


def _outcome(b: ResultRecord, c: ResultRecord) -> str:
    if b.score.joint_correct is not None:
        good_b, good_c = bool(b.score.joint_correct), bool(c.score.joint_correct)
    else:
        level = "exact_repeat" if b.score.exact_repeat is not None else "tool_repeat"
        good_b, good_c = not getattr(b.score, level), not getattr(c.score, level)
    return "same" if good_b == good_c else ("win" if good_c else "loss")


def discordant_ids(results: Sequence[ResultRecord], comparison: Comparison) -> tuple[list[str], list[str]]:
    """The decision ids the candidate won and lost (the discordant pairs)."""
    rows = drill_rows(results, comparison)
    return [r.decision_id for r in rows if r.outcome == "win"], [r.decision_id for r in rows if r.outcome == "loss"]
