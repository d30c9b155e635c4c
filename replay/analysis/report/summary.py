"""The answer a reader came for, in a few lines: per arm, joint correctness on the held-out
positives and per stratum, tool correctness, exact repeats, and how many chosen calls differ
from the baseline's; each gate verdict in one line. Pure: shared by the report and the
console (the demo prints the same tables it writes). Lesson verdicts and rule uptake, too.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from core.names import excerpt
from core.records import KNOWN_FAILURE, ResultRecord
from replay.analysis.compare import ALL_POSITIVE, is_held_out_positive, scope_order
from replay.analysis.gates import Status, Verdict
from replay.memory.lessons import RuleVerdict
from replay.memory.uptake import UPTAKE_COLUMNS, UPTAKE_NOTE, Uptake, choice, uptake_cells
from replay.run.directory import ResultsError

SUMMARY_NOTE = ("Joint correct (the recorded tool with exactly its key set) unless the column says otherwise; "
                "positives are the held-out positive decisions.")
STRATUM_LABELS = {"verified_recovery": "recovery", "clean_trajectory_action": "clean", "verified_action": "action"}


@dataclass(frozen=True)
class Count:
    hits: int
    n: int

    def __str__(self) -> str:
        return f"{self.hits}/{self.n}" if self.n else "—"


@dataclass(frozen=True)
class SummaryRow:
    arm: str
    positives: Count
    """Joint correct over the held-out positive decisions."""
    strata: tuple[tuple[str, Count], ...]
    """Joint correct per held-out positive stratum."""
    tool_correct: Count
    """The recorded tool, whatever the arguments, over the held-out positives."""
    exact_repeats: Count
    """Known failures where the failed call was repeated exactly (arguments known)."""
    changed: Count | None
    """Decisions whose chosen call (tool + key set) differs from the baseline's; None for the baseline."""


def summary_rows(results: Sequence[ResultRecord], arms: Sequence[str], *, reference: str) -> list[SummaryRow]:
    """One row per arm, the reference arm first, then the others in the given order.

    `changed` counts against `reference`: the baseline the comparisons use (or the one the user
    named), never whichever arm happens to come first in the results.
    """
    if reference not in arms:
        raise ResultsError(f"reference arm {excerpt(reference)} is not among the arms ({', '.join(arms) or 'none'})")
    strata = [s for s in scope_order({r.stratum for r in results if is_held_out_positive(r)}) if s != ALL_POSITIVE]
    baseline = {r.decision_id: choice(r.parsed) for r in results if r.arm == reference}
    rows = []
    for arm in [reference, *(a for a in dict.fromkeys(arms) if a != reference)]:
        own = [r for r in results if r.arm == arm]
        positives = [r for r in own if is_held_out_positive(r)]
        failures = [r for r in own if r.stratum == KNOWN_FAILURE and r.score.exact_repeat is not None]
        paired = [r for r in own if r.decision_id in baseline]
        changed = Count(sum(choice(r.parsed) != baseline[r.decision_id] for r in paired), len(paired))
        rows.append(SummaryRow(
            arm, _joint(positives), tuple((s, _joint([r for r in positives if r.stratum == s])) for s in strata),
            Count(sum(bool(r.score.tool_correct) for r in positives), len(positives)),
            Count(sum(bool(r.score.exact_repeat) for r in failures), len(failures)),
            None if arm == reference else changed))
    return rows


def reference_arm(arms: Sequence[str], baselines: Sequence[str], named: str | None = None) -> str:
    """The arm a summary counts changed calls against: the one the user named, else the baseline of
    the comparisons (the first comparison's when they use several), else the first of `arms`
    (callers pass the run config's order)."""
    if named is not None:
        return named
    if baselines:
        return baselines[0]
    if not arms:
        raise ResultsError("no arms to summarise")
    return arms[0]


TITLE_ARMS = 3
"""Arms a title names after the reference; the rest are counted."""


def report_title(info: Mapping[str, Any], arms: Sequence[str], reference: str, directory: str) -> str:
    """What tells one report from another in a browser tab: the suite (name and version, from run.json)
    and the arms, the reference first. The run directory's name stands in only when run.json names no
    suite: every demo run lives in a directory called `run`. Each part is clipped, so the title stays short."""
    suite = info.get("suite")
    name = suite.get("name") if isinstance(suite, Mapping) else None
    version = suite.get("version") if isinstance(suite, Mapping) else None
    if isinstance(name, str | int) and str(name):
        subject = clip(str(name), 60) + (f" v{clip(str(version), 20)}" if isinstance(version, str | int) else "")
    else:
        subject = clip(directory, 60)
    others = [a for a in arms if a != reference]
    named = ", ".join(clip(a, 40) for a in others[:TITLE_ARMS])
    rest = f" (+{len(others) - TITLE_ARMS} more)" if len(others) > TITLE_ARMS else ""
    compared = f"{clip(reference, 40)} vs {named}{rest}" if others else clip(reference, 40)
    return f"Replay report: {subject} · {compared}"


def clip(text: str, limit: int) -> str:
    """`text` cut to at most `limit` characters, an ellipsis marking the cut."""
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _joint(rows: Sequence[ResultRecord]) -> Count:
    return Count(sum(bool(r.score.joint_correct) for r in rows), len(rows))


def summary_columns(rows: Sequence[SummaryRow]) -> list[str]:
    baseline = next((r.arm for r in rows if r.changed is None), "baseline")
    strata = [STRATUM_LABELS.get(s, s) for s, _ in rows[0].strata] if rows else []
    return ["arm", "all positives", *strata, "tool correct", "exact repeats", f"calls changed vs {baseline}"]


def summary_cells(row: SummaryRow) -> list[str]:
    """Text cells in `summary_columns` order."""
    return [row.arm, str(row.positives), *(str(c) for _, c in row.strata), str(row.tool_correct),
            str(row.exact_repeats), "—" if row.changed is None else str(row.changed)]


def text_table(rows: Sequence[Sequence[str]], left: int = 1) -> list[str]:
    """Rows (the first is the header) as aligned text under a rule; the first `left` columns
    are left-aligned, the others (counts) right-aligned."""
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(c.ljust(w) if i < left else c.rjust(w) for i, (c, w) in enumerate(zip(row, widths, strict=True)))
             for row in rows]
    return [lines[0], "-" * len(lines[0]), *lines[1:]]


def format_summary(rows: Sequence[SummaryRow]) -> str:
    """The summary as a plain-text table under its note."""
    return "\n".join([SUMMARY_NOTE, *text_table([summary_columns(rows), *(summary_cells(r) for r in rows)])])


def format_uptake(uptakes: Sequence[Uptake]) -> str:
    """Rule uptake as a plain-text table, one row per rule and pair of arms."""
    if not uptakes:
        return "Rule uptake: no rule with a claim was injected."
    lines = [*text_table([UPTAKE_COLUMNS, *(uptake_cells(u) for u in uptakes)], left=3), UPTAKE_NOTE]
    unanswered = [f"{u.claim.rule_id} ({u.with_arm}): {u.unanswered}" for u in uptakes if u.unanswered]
    if unanswered:
        lines.append("Pairs left out for a transport error: " + ", ".join(unanswered) + ".")
    return "\n".join(lines)


def gate_line(verdict: Verdict) -> str:
    """One gate verdict: candidate, decision and the conditions that kept it from passing."""
    failed = [c.id for c in verdict.conditions if c.status is Status.FAIL]
    not_run = [c.id for c in verdict.conditions if c.status is Status.NOT_RUN]
    decision = "PASS" if verdict.passed else "REJECT"
    why = "; ".join(f"{label}: {', '.join(ids)}" for label, ids in
                    (("failed", failed), ("not run", not_run), ("disputed rule(s)", verdict.tainted_rule_ids)) if ids)
    return (f"{verdict.candidate} against {verdict.baseline} ({verdict.policy} v{verdict.policy_version}): {decision}"
            + (f" ({why})" if why else ""))


LESSON_COLUMNS = ("workspace", "rule", "method", "verdict", "reason", "evidence")


def lesson_order(verdicts: Sequence[RuleVerdict]) -> list[RuleVerdict]:
    """Causal verdicts first, then leave-one-out, each in the given order."""
    return sorted(verdicts, key=lambda v: v.method != "ablation")


def lesson_cells(verdict: RuleVerdict) -> tuple[str, ...]:
    """Text cells in `LESSON_COLUMNS` order."""
    method = "causal (ablation)" if verdict.method == "ablation" else verdict.method
    outcome = verdict.verdict.value + (" (forced at max trials)" if verdict.forced else "")
    return (verdict.workspace, verdict.rule_id, method, outcome, verdict.reason, verdict.evidence.summary())
