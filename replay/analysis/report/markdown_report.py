"""`report.md`: the answer first (summary table, plot, one line per gate, lesson verdicts, rule
uptake), then the run's metadata, the paired comparisons, the full gate verdicts and the
discordant decisions."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from core.records import ResultRecord
from replay.analysis.compare import (
    NOISE_COLUMN,
    TAINT_MARK,
    Comparison,
    Tainted,
    arms_of,
    correctness_cells,
    format_overhead,
    is_tainted,
    measure_label,
    noise_cells,
    noise_note,
    repeat_cells,
    repeat_label,
)
from replay.analysis.gates import STATUS_LABEL, Verdict
from replay.analysis.plan import detectable, detectable_note
from replay.analysis.report.drill import discordant_ids
from replay.analysis.report.memory_reads import RETRIEVAL_COLUMNS, Retrieval, retrieval_cells
from replay.analysis.report.plot import PLOT_SVG
from replay.analysis.report.summary import (
    LESSON_COLUMNS,
    SUMMARY_NOTE,
    gate_line,
    lesson_cells,
    lesson_order,
    summary_cells,
    summary_columns,
    summary_rows,
)
from replay.analysis.training_lineage import ArmContamination
from replay.memory.lessons import RuleVerdict
from replay.memory.uptake import UPTAKE_COLUMNS, UPTAKE_NOTE, Uptake, uptake_cells


def render_markdown(
    title: str,
    info: Mapping[str, Any],
    comparisons: Sequence[Comparison],
    verdicts: Sequence[Verdict],
    results: Sequence[ResultRecord],
    tainted: Tainted = (),
    lessons: Sequence[RuleVerdict] | None = None,
    uptake: Sequence[Uptake] | None = None,
    *,
    reference: str,
    retrieval: Retrieval | None = None,
    contamination: Sequence[ArmContamination] = (),
) -> str:
    """`title`: `summary.report_title`; `reference`: the arm the summary counts changed calls against
    (see `summary.reference_arm`)."""
    lines = [f"# {_md(title)}", "", *answer(verdicts, results, lessons, uptake, reference),
             *retrieval_lines(retrieval),
             "## Run", ""]
    lines += [f"- **{_md(key)}**: {_md(value)}" for key, value in summary(info, results)]
    lines += contamination_lines(contamination)
    lines += ["", "## Paired comparisons", ""]
    for c in comparisons:
        lines += [f"### {_md(c.candidate)} against {_md(c.baseline)} ({c.decisions} paired decisions)", ""]
        aa = () if c.noise is None else (NOISE_COLUMN,)
        blank = ("",) * len(aa)
        header = ["Measure", c.baseline, c.candidate, "Discordant pairs", "95% CI (points)", "Points", *aa]
        lines += ["| " + " | ".join(_md(h) for h in header) + " |", "|" + "---|" * len(header)]
        rows = [(measure_label(r), r.tainted_results, (*correctness_cells(r), *noise_cells(c, r)))
                for r in c.correctness]
        rows += [(repeat_label(r), r.tainted_results, (*repeat_cells(r), *blank)) for r in c.repeats]
        rows += [(f"by {c.by}: {measure_label(r)}", r.tainted_results, (*correctness_cells(r), *blank))
                 for r in c.breakdown]
        for label, taint, cells in rows:
            mark = f" {TAINT_MARK}" if taint else ""
            lines.append("| " + " | ".join(_md(x) for x in (label + mark, *cells)) + " |")
        lines += ["", format_overhead(c.overhead), "", tests_note(c)]
        found = detectable(c)
        if found is not None:
            lines += ["", detectable_note(found)]
        if c.noise is not None:
            lines += ["", noise_note(c)]
        if c.tainted_results:
            disputed = ", ".join(c.tainted_rule_ids)
            lines.append(f"{TAINT_MARK} tainted: rests on results that carried disputed rule(s) {_md(disputed)}.")
        wins, losses = discordant_ids(results, c)
        lines += ["", f"Wins ({len(wins)}): {_md(', '.join(wins) or 'none')}", ""]
        lines += [f"Losses ({len(losses)}): {_md(', '.join(losses) or 'none')}", ""]
    lines += ["## Gate verdicts", ""]
    if not verdicts:
        lines += ["No gate was evaluated on this run.", ""]
    for v in verdicts:
        decision = "PASSED" if v.passed else "REJECTED"
        lines += [f"### {_md(v.policy)} v{_md(v.policy_version)}: {_md(v.candidate)} against {_md(v.baseline)}: "
                  f"**{decision}**", ""]
        lines += ["| Condition | Status | Evidence |", "|---|---|---|"]
        for cond in v.conditions:
            label = f"{_md(cond.id)}: {_md(cond.description)}" + (f" {TAINT_MARK}" if cond.tainted_rule_ids else "")
            lines.append(f"| {label} | {STATUS_LABEL[cond.status]} | {_md(cond.reason)} |")
        lines.append("")
    if any(is_tainted(r, tainted) for r in results):
        lines += [f"{TAINT_MARK} Some results carried a disputed rule; the HTML drill-down marks them.", ""]
    return "\n".join(lines)


def answer(verdicts: Sequence[Verdict], results: Sequence[ResultRecord], lessons: Sequence[RuleVerdict] | None,
           uptake: Sequence[Uptake] | None, reference: str) -> list[str]:
    """The report's opening section: what a reader came for."""
    rows = summary_rows(results, arms_of(results), reference=reference)
    lines = ["## Answer", "", SUMMARY_NOTE, "", *_table(summary_columns(rows), [summary_cells(r) for r in rows]), ""]
    lines += [f"![Joint correctness per stratum and arm]({PLOT_SVG})", "", "### Gates", ""]
    lines += [f"- {_md(gate_line(v))}" for v in verdicts] or ["No gate was evaluated on this run."]
    lines.append("")
    if lessons is not None:
        lines += ["### Lesson verdicts", ""]
        cells = [lesson_cells(v) for v in lesson_order(lessons)]
        lines += [*_table(LESSON_COLUMNS, cells), ""] if cells else ["No rule was judged.", ""]
    if uptake is not None:
        lines += ["### Rule uptake", ""]
        lines += [*_table(UPTAKE_COLUMNS, [uptake_cells(u) for u in uptake]), "", UPTAKE_NOTE, ""] if uptake else [
            "No rule with a claim was injected.", ""]
    return lines


def contamination_lines(checks: Sequence[ArmContamination]) -> list[str]:
    """Each arm's training data against the suite: what it reaches (left out of gates), or why it was not
    checked."""
    if not checks:
        return []
    return ["", "## Training contamination", "", *(f"- {_md(check.line())}" for check in checks), "",
            "A gate leaves the decisions its candidate's training data reaches out of its comparison."]


def retrieval_lines(retrieval: Retrieval | None) -> list[str]:
    if retrieval is None:
        return []
    return ["### Retrieval", "", *_table(RETRIEVAL_COLUMNS, [retrieval_cells(r) for r in retrieval.rows]), "",
            retrieval.note, ""]


def _table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    return ["| " + " | ".join(_md(h) for h in header) + " |", "|" + "---|" * len(header),
            *("| " + " | ".join(_md(c) for c in row) + " |" for row in rows)]


_MD_ESCAPES = str.maketrans({"&": "&amp;", "<": "&lt;", ">": "&gt;", "|": "\\|", "[": "\\[", "]": "\\]",
                             "`": "\\`", "\\": "\\\\", "\n": " ", "\r": " "})


def _md(value: Any) -> str:
    """A value as inline Markdown text: never raw HTML, a link, code or a table cell break."""
    text = value if isinstance(value, str) else json.dumps(value, default=str)
    return text.translate(_MD_ESCAPES)


def tests_note(c: Comparison) -> str:
    return (f"{c.comparisons_made} paired tests (exact two-sided sign tests on discordant pairs, Newcombe "
            "hybrid score 95% CIs), uncorrected for multiple comparisons.")


def summary(info: Mapping[str, Any], results: Sequence[ResultRecord]) -> list[tuple[str, Any]]:
    rows: list[tuple[str, Any]] = [(key, info[key]) for key in info]
    arms = arms_of(results)
    decisions = len({r.decision_id for r in results})
    rows += [("arms", ", ".join(arms)), ("results", len(results)), ("decisions", decisions)]
    return rows
