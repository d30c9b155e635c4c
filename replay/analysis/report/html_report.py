"""`report.html`: one self-contained page (inline CSS, filter script and SVG) whose tables carry `id` and
`data-*` attributes with the raw numbers, so a browser test reads values without parsing text."""

from __future__ import annotations

import html
import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

from core.records import Decision, ResultRecord
from replay.analysis.compare import (
    NOISE_COLUMN,
    TAINT_MARK,
    Comparison,
    CorrectnessRow,
    RepeatRow,
    Tainted,
    arms_of,
    correctness_cells,
    format_overhead,
    format_p,
    is_tainted,
    measure_label,
    noise_cells,
    noise_note,
    plural,
    repeat_cells,
    repeat_label,
)
from replay.analysis.gates import STATUS_LABEL, Verdict
from replay.analysis.plan import detectable, detectable_note
from replay.analysis.report.drill import DrillRow, drill_rows
from replay.analysis.report.markdown_report import summary, tests_note
from replay.analysis.report.memory_reads import RETRIEVAL_COLUMNS, Retrieval, retrieval_cells
from replay.analysis.report.summary import (
    LESSON_COLUMNS,
    SUMMARY_NOTE,
    SummaryRow,
    clip,
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

RAW_OUTPUT_LIMIT = 2400


def slug(text: str) -> str:
    """A stable HTML id fragment."""
    return re.sub(r"[^A-Za-z0-9_-]", "_", text)


def comparison_id(comparison: Comparison) -> str:
    return f"cmp-{slug(comparison.baseline)}-vs-{slug(comparison.candidate)}"


# The page never scrolls sideways: a table wider than the page scrolls in its own box (a block as
# wide as its rows, at most the page: GitHub's Markdown tables do the same), a flex item may shrink
# below its table's width, and a long word breaks outside a table and in the drill-down's answers
# (one argument with no break in it, a path or base64, would give a table of hundreds of rows a
# scroll bar at its far end; their width is bounded so the other columns keep whole words).
CSS = """
body{font-family:system-ui,sans-serif;margin:2em;color:#222;max-width:1800px;overflow-wrap:break-word}
table{border-collapse:collapse;margin:0.5em 0 1.5em;display:block;width:max-content;max-width:100%;overflow-x:auto}
th,td{border:1px solid #ccc;padding:3px 8px;text-align:left;vertical-align:top}
thead th{background:#f3f3f3}
td.num{text-align:right;font-variant-numeric:tabular-nums}
tr.tainted{background:#fff4e0}
.status-pass{color:#176b1c;font-weight:bold}
.status-fail{color:#a31515;font-weight:bold}
.status-not_run{color:#8a6d00;font-weight:bold}
.verdict-passed{color:#176b1c}
.verdict-rejected{color:#a31515}
pre{white-space:pre-wrap;word-break:break-word;margin:0;font-size:12px;max-width:480px}
tr[data-outcome=win] td.outcome{color:#176b1c}
tr[data-outcome=loss] td.outcome{color:#a31515}
table.drilldown td[data-field$=answer]{overflow-wrap:anywhere;min-width:16em;max-width:40em}
.note{color:#555;font-size:90%}
.answer-top{display:flex;flex-wrap:wrap;gap:2em;align-items:flex-start}
.answer-top>div{min-width:0}
.answer-top figure{margin:0;flex:1 1 360px;min-width:360px}
.answer-top figure svg{width:100%;height:auto}
.answer-top .note{max-width:70ch}
ul.gates li.passed{color:#176b1c}
ul.gates li.rejected{color:#a31515}
"""

SCRIPT = """
(function(){
  function apply(){
    var chosen=document.querySelector('input[name="drill-filter"]:checked').value;
    document.querySelectorAll('table.drilldown').forEach(function(table){
      var shown=0,total=0;
      table.querySelectorAll('tbody tr').forEach(function(tr){
        total++;
        var visible=chosen==='all'||tr.getAttribute('data-outcome')===chosen;
        tr.hidden=!visible; if(visible){shown++;}
      });
      var counter=document.getElementById(table.id+'-count');
      if(counter){counter.textContent='showing '+shown+' of '+total;}
    });
  }
  document.querySelectorAll('input[name="drill-filter"]').forEach(function(input){
    input.addEventListener('change',apply);
  });
  var linked=/filter=([a-z_]+)/.exec(location.hash);
  var start=linked&&document.querySelector('input[name="drill-filter"][value="'+linked[1]+'"]');
  if(start){start.checked=true;}
  apply();
})();
"""


def _e(value: Any) -> str:
    return html.escape(str(value), quote=True)


def _cell(text: str, field: str, value: Any = None, css: str = "num", **data: Any) -> str:
    attrs = f' data-field="{_e(field)}"'
    if value is not None:
        attrs += f' data-value="{_e(value)}"'
    attrs += "".join(f' data-{_e(k.replace("_", "-"))}="{_e(v)}"' for k, v in data.items() if v is not None)
    return f'<td class="{css}"{attrs}>{_e(text)}</td>'


def render_html(
    title: str,
    info: Mapping[str, Any],
    comparisons: Sequence[Comparison],
    verdicts: Sequence[Verdict],
    results: Sequence[ResultRecord],
    svg: str,
    decisions: Mapping[str, Decision],
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
    body = [
        f"<h1>{_e(title)}</h1>",
        _answer_section(verdicts, results, svg, lessons, uptake, reference),
        _retrieval_section(retrieval),
        '<section id="summary"><h2>Run</h2>',
        _summary_table(info, results),
        "</section>",
        _contamination_section(contamination),
        '<section id="comparisons"><h2>Paired comparisons</h2>',
        *(_comparison_table(c) for c in comparisons),
        "</section>",
        '<section id="gates"><h2>Gate verdicts</h2>',
        *(_verdict_table(v) for v in verdicts),
        "" if verdicts else '<p class="note">No gate was evaluated on this run.</p>',
        "</section>",
        _drilldown(comparisons, results, decisions, tainted),
    ]
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f"<title>{_e(title)}</title><style>{CSS}</style></head>\n<body>\n"
        + "\n".join(body)
        + f"\n<script>{SCRIPT}</script>\n</body></html>\n"
    )


def _contamination_section(checks: Sequence[ArmContamination]) -> str:
    """Each arm's training data against the suite (`lineage.ArmContamination`), one item an arm."""
    if not checks:
        return ""
    items = "".join(f'<li data-arm="{_e(c.arm)}" data-checked="{str(c.checked).lower()}" '
                    f'data-contaminated="{len(c.contaminated)}">{_e(c.line())}</li>' for c in checks)
    return ('<section id="contamination"><h2>Training contamination</h2>'
            f'<ul>{items}</ul><p class="note">A gate leaves the decisions its candidate\'s training data reaches out '
            "of its comparison.</p></section>")


def _answer_section(verdicts: Sequence[Verdict], results: Sequence[ResultRecord], svg: str,
                    lessons: Sequence[RuleVerdict] | None, uptake: Sequence[Uptake] | None, reference: str) -> str:
    """The opening section: the summary table with the plot beside it, one line per gate, the
    lesson verdicts and rule uptake (each block only when given)."""
    rows = summary_rows(results, arms_of(results), reference=reference)
    gates = "".join(
        f'<li class="{"passed" if v.passed else "rejected"}" data-policy="{_e(v.policy)}" '
        f'data-candidate="{_e(v.candidate)}" data-passed="{str(v.passed).lower()}">{_e(gate_line(v))}</li>'
        for v in verdicts)
    parts = [
        '<section id="answer"><h2>Answer</h2><div class="answer-top">',
        f'<div><p class="note">{_e(SUMMARY_NOTE)}</p>{_answer_summary(rows)}</div>',
        '<figure id="plot">', svg,
        '<figcaption class="note">Joint correctness per stratum and arm with 95% Wilson intervals; known-failure '
        "states are judged by repeats and appear in the tables only.</figcaption></figure></div>",
        "<h3>Gates</h3>",
        f'<ul class="gates" id="gate-lines">{gates}</ul>' if verdicts else
        '<p class="note">No gate was evaluated on this run.</p>',
    ]
    if lessons is not None:
        cells = [lesson_cells(v) for v in lesson_order(lessons)]
        parts += ["<h3>Lesson verdicts</h3>",
                  _text_table("lesson-verdicts", LESSON_COLUMNS, cells) if cells else
                  '<p class="note">No rule was judged.</p>']
    if uptake is not None:
        parts += ["<h3>Rule uptake</h3>",
                  _uptake_table(uptake) + f'<p class="note">{_e(UPTAKE_NOTE)}</p>' if uptake else
                  '<p class="note">No rule with a claim was injected.</p>']
    parts.append("</section>")
    return "\n".join(parts)


def _retrieval_section(retrieval: Retrieval | None) -> str:
    if retrieval is None:
        return ""
    return ('<section id="retrieval-section"><h3>Retrieval</h3>'
            + _text_table("retrieval", RETRIEVAL_COLUMNS, [retrieval_cells(r) for r in retrieval.rows])
            + f'<p class="note">{_e(retrieval.note)}</p></section>')


def _answer_summary(rows: Sequence[SummaryRow]) -> str:
    head = "".join(f"<th>{_e(h)}</th>" for h in summary_columns(rows))
    body = []
    for row in rows:
        counts = [("positives", row.positives), *row.strata, ("tool-correct", row.tool_correct),
                  ("exact-repeats", row.exact_repeats), ("changed", row.changed)]
        cells = "".join(_cell(text, field, None, hits=count.hits if count else None, n=count.n if count else None)
                        for text, (field, count) in zip(summary_cells(row)[1:], counts, strict=True))
        body.append(f'<tr data-arm="{_e(row.arm)}"><th>{_e(row.arm)}</th>{cells}</tr>')
    return f'<table id="answer-summary"><thead><tr>{head}</tr></thead><tbody>{"".join(body)}</tbody></table>'


def _text_table(table_id: str, columns: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    head = "".join(f"<th>{_e(h)}</th>" for h in columns)
    body = "".join("<tr>" + "".join(_cell(c, col, css="") for c, col in zip(row, columns, strict=True)) + "</tr>"
                   for row in rows)
    return f'<table id="{_e(table_id)}"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>'


def _uptake_table(uptake: Sequence[Uptake]) -> str:
    head = "".join(f"<th>{_e(h)}</th>" for h in UPTAKE_COLUMNS)
    body = []
    for u in uptake:
        counts = (u.n, u.moved_to, u.moved_elsewhere, u.away, u.already, u.unchanged)
        fields = ("n", "moved-to", "moved-elsewhere", "away", "already", "unchanged")
        text = uptake_cells(u)
        cells = "".join(_cell(c, col, css="") for c, col in zip(text[:3], ("rule", "says", "arms"), strict=True))
        cells += "".join(_cell(c, f, v) for c, f, v in zip(text[3:-1], fields, counts, strict=True))
        cells += _cell(text[-1], "uptake", None, moved_to=u.moved_to, open=u.open)
        body.append(f'<tr data-rule="{_e(u.claim.rule_id)}" data-without="{_e(u.without_arm)}" '
                    f'data-with="{_e(u.with_arm)}">{cells}</tr>')
    return f'<table id="rule-uptake"><thead><tr>{head}</tr></thead><tbody>{"".join(body)}</tbody></table>'


def _summary_table(info: Mapping[str, Any], results: Sequence[ResultRecord]) -> str:
    rows = []
    for key, value in summary(info, results):
        if isinstance(value, str | int | float):
            cell = f"<pre>{_e(clip(str(value), 2000))}</pre>"
        else:  # nested values (the whole run config) fold away so the tables come first
            text = json.dumps(value, indent=1, default=str)
            cell = f"<details><summary>show</summary><pre>{_e(clip(text, 20000))}</pre></details>"
        rows.append(f'<tr data-key="{_e(key)}"><th>{_e(key)}</th><td>{cell}</td></tr>')
    return f'<table id="run-summary"><tbody>{"".join(rows)}</tbody></table>'


def _comparison_table(c: Comparison) -> str:
    table_id = comparison_id(c)
    aa = () if c.noise is None else (NOISE_COLUMN,)
    columns = ("Measure", c.baseline, c.candidate, "Discordant pairs", "p", "95% CI (points)", "Points", *aa)
    head = "".join(f"<th>{_e(h)}</th>" for h in columns)
    blank = "<td></td>" * len(aa)
    rows = [_correctness_tr(r, "correctness", _noise_td(c, r)) for r in c.correctness]
    rows += [_repeat_tr(r, blank) for r in c.repeats]
    rows += [_correctness_tr(r, f"by-{c.by}", blank) for r in c.breakdown]
    notes = [format_overhead(c.overhead), tests_note(c), *([noise_note(c)] if c.noise is not None else [])]
    if c.tainted_results:
        notes.append(f"{TAINT_MARK} tainted: rests on {c.tainted_results} result(s) that carried disputed rule(s) "
                     f"{', '.join(c.tainted_rule_ids)}; re-run before relying on it.")
    return (
        f"<h3>{_e(c.candidate)} against {_e(c.baseline)} ({c.decisions} paired decisions)</h3>"
        f'<table class="comparison" id="{table_id}" {_arm_attrs(c)} data-decisions="{c.decisions}" '
        f'data-comparisons-made="{c.comparisons_made}" '
        f'data-tainted="{str(bool(c.tainted_results)).lower()}">'
        f"<thead><tr>{head}</tr></thead><tbody>{''.join(rows)}</tbody></table>"
        + "".join(f'<p class="note">{_e(n)}</p>' for n in notes)
        + _detectable(c, table_id)
    )


def _detectable(c: Comparison, table_id: str) -> str:
    found = detectable(c)
    if found is None:
        return ""
    value = "" if found.mde_points is None else f' data-mde="{found.mde_points!r}"'
    return (f'<p class="note mde" id="mde-{table_id}" data-scope="{_e(found.scope)}" data-power="{found.power}" '
            f'data-alpha="{found.alpha}"{value}>{_e(detectable_note(found))}</p>')


def _arm_attrs(c: Comparison) -> str:
    return f'data-baseline="{_e(c.baseline)}" data-candidate="{_e(c.candidate)}"'


def _taint_attrs(count: int) -> tuple[str, str, str]:
    tainted = bool(count)
    return (' class="tainted"' if tainted else "", str(tainted).lower(), f" {TAINT_MARK}" if tainted else "")


def _noise_td(c: Comparison, row: CorrectnessRow) -> str:
    """The row's A/A cell: its scope's discordant pairs with nothing changed (none without a noise floor)."""
    aa = None if c.noise is None else c.noise.row(row.measure, row.scope)
    if c.noise is None:
        return ""
    if aa is None:
        return _cell("n/a", "noise")
    return _cell(noise_cells(c, row)[0], "noise", aa.discordant, n=aa.stats.n, replicate=c.noise.replicate)


def _correctness_tr(row: CorrectnessRow, kind: str, extra: str = "") -> str:
    s = row.stats
    css, flag, mark = _taint_attrs(row.tainted_results)
    label = measure_label(row) + mark
    cells = correctness_cells(row)
    return (
        f'<tr{css} data-kind="{_e(kind)}" data-measure="{_e(row.measure)}" data-scope="{_e(row.scope)}" data-n="{s.n}" '
        f'data-tainted="{flag}"><th>{_e(label)}</th>'
        + _cell(str(s.baseline_correct), "baseline", s.baseline_correct)
        + _cell(str(s.candidate_correct), "candidate", s.candidate_correct)
        + _cell(f"+{s.wins} / −{s.losses}", "discordant", None, wins=s.wins, losses=s.losses)
        + _cell(format_p(s.p_value), "p", repr(s.p_value))
        + _cell(cells[3], "ci", None, low=_num(s.ci_low), high=_num(s.ci_high))
        + _cell(cells[4], "points", _num(s.points))
        + extra
        + "</tr>"
    )


def _repeat_tr(row: RepeatRow, extra: str = "") -> str:
    s = row.stats
    css, flag, mark = _taint_attrs(row.tainted_results)
    cells = repeat_cells(row)
    discordant = f"{plural(s.fixes, 'fix', 'fixes')} / {plural(s.regressions, 'regression')}"
    return (
        f'<tr{css} data-kind="repeat" data-level="{_e(row.level)}" data-scope="{_e(row.stratum)}" data-n="{s.n}" '
        f'data-tainted="{flag}"><th>{_e(repeat_label(row) + mark)}</th>'
        + _cell(cells[0], "baseline", s.baseline_repeats)
        + _cell(cells[1], "candidate", s.candidate_repeats)
        + _cell(discordant, "discordant", None, fixes=s.fixes, regressions=s.regressions)
        + _cell(format_p(s.p_value), "p", repr(s.p_value))
        + _cell(cells[3], "ci", None, low=_num(s.ci_low), high=_num(s.ci_high))
        + _cell(cells[4], "points", _num(s.points), relative_reduction=_num(s.relative_reduction))
        + extra
        + "</tr>"
    )


def _num(value: float | None) -> str | None:
    return None if value is None else repr(value)


def _verdict_table(v: Verdict) -> str:
    decision = "passed" if v.passed else "rejected"
    rows = []
    for c in v.conditions:
        mark = f" {TAINT_MARK}" if c.tainted_rule_ids else ""
        rows.append(
            f'<tr data-condition="{_e(c.id)}" data-kind="{_e(c.kind)}" data-status="{_e(c.status.value)}" '
            f'data-tainted="{str(bool(c.tainted_rule_ids)).lower()}"><th>{_e(c.id)}</th>'
            f'<td class="status-{_e(c.status.value)}" data-field="status" data-value="{_e(c.status.value)}">'
            f"{_e(STATUS_LABEL[c.status])}</td>"
            f'<td data-field="description">{_e(c.description + mark)}</td>'
            f'<td data-field="reason">{_e(c.reason)}</td></tr>'
        )
    return (
        f'<h3>{_e(v.policy)} v{_e(v.policy_version)}: {_e(v.candidate)} against {_e(v.baseline)}: '
        f'<span class="verdict-{decision}">{decision.upper()}</span></h3>'
        f'<table class="verdict" id="gate-{slug(v.policy)}-{slug(v.candidate)}" data-policy="{_e(v.policy)}" '
        f'data-candidate="{_e(v.candidate)}" data-baseline="{_e(v.baseline)}" data-passed="{str(v.passed).lower()}">'
        "<thead><tr><th>Condition</th><th>Status</th><th>Description</th><th>Evidence</th></tr></thead>"
        f"<tbody>{''.join(rows)}</tbody></table>"
    )


def _drilldown(
    comparisons: Sequence[Comparison],
    results: Sequence[ResultRecord],
    decisions: Mapping[str, Decision],
    tainted: Tainted,
) -> str:
    filters = "".join(
        f'<label><input type="radio" name="drill-filter" value="{value}"{" checked" if value == "all" else ""}> '
        f"{label}</label> "
        for value, label in (("all", "all"), ("win", "wins"), ("loss", "losses"))
    )
    parts = ['<section id="drilldown"><h2>Per-decision drill-down</h2>', f'<form id="drill-filters">{filters}</form>']
    if not decisions:
        parts.append('<p class="note">Requests and target key sets are shown when the report is given the suite.</p>')
    for c in comparisons:
        table_id = f"drill-{slug(c.baseline)}-vs-{slug(c.candidate)}"
        rows = [_drill_tr(row, decisions.get(row.decision_id), tainted) for row in drill_rows(results, c)]
        parts.append(
            f"<h3>{_e(c.candidate)} against {_e(c.baseline)}</h3>"
            f'<p class="note" id="{table_id}-count"></p>'
            f'<table class="drilldown" id="{table_id}" {_arm_attrs(c)}>'
            "<thead><tr><th>Decision</th><th>Outcome</th><th>Request</th>"
            f"<th>{_e(c.baseline)}</th><th>{_e(c.candidate)}</th><th>Key-set differences</th></tr></thead>"
            f"<tbody>{''.join(rows)}</tbody></table>"
        )
    parts.append("</section>")
    return "".join(parts)


def _drill_tr(row: DrillRow, decision: Decision | None, tainted: Tainted) -> str:
    taint = [r.arm for r in (row.baseline, row.candidate) if is_tainted(r, tainted)]
    css = ' class="tainted"' if taint else ""
    mark = f" {TAINT_MARK} disputed rule in {', '.join(taint)}" if taint else ""
    b = row.baseline
    where = f"{b.stratum} · {b.cluster} · {b.workspace}"
    return (
        f'<tr{css} data-decision="{_e(row.decision_id)}" data-outcome="{_e(row.outcome)}" '
        f'data-stratum="{_e(row.stratum)}" data-tainted="{str(bool(taint)).lower()}">'
        f"<th>{_e(row.decision_id)}<br><span class=\"note\">{_e(where)}{_e(mark)}</span></th>"
        f'<td class="outcome" data-field="outcome">{_e(row.outcome)}</td>'
        f'<td data-field="request">{_request_summary(b, decision)}</td>'
        f'<td data-field="baseline-answer">{_answer(row.baseline)}</td>'
        f'<td data-field="candidate-answer">{_answer(row.candidate)}</td>'
        f'<td data-field="keys">{_key_diff(row, decision)}</td></tr>'
    )


def _request_summary(record: ResultRecord, decision: Decision | None) -> str:
    target = f"target tool: {record.target_tool}" if record.score.joint_correct is not None else "failed-action state"
    lines = [target]
    if decision is not None:
        request = decision.request
        last_user = next((m for m in reversed(decision.turn) if m.get("role") == "user"), None)
        choice = json.dumps(request.tool_choice)
        lines.append(f"{len(decision.turn)} messages, {len(request.tools)} tools, tool_choice {choice}")
        if last_user is not None:
            lines.append("last user turn: " + clip(_content_text(last_user.get("content")), 300))
        if decision.failed_action is not None:
            lines.append(f"failed action: {decision.failed_action.tool}")
    return "<br>".join(_e(line) for line in lines)


def _content_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return " ".join(str(part.get("text", "")) for part in content if isinstance(part, dict))
    return json.dumps(content, default=str)


def _answer(record: ResultRecord) -> str:
    parsed = record.parsed
    call = parsed.first
    head = f"{parsed.outcome.value}"
    if call is not None:
        head += f": {call.tool}({clip(json.dumps(call.arguments, sort_keys=True), 300)})"
    if len(parsed.calls) > 1:
        head += f" (+{len(parsed.calls) - 1} more call(s))"
    flags = f"<br><span class=\"note\">flags: {_e(', '.join(record.score.flags))}</span>" if record.score.flags else ""
    raw = clip(json.dumps(record.raw_output, indent=1, default=str), RAW_OUTPUT_LIMIT)
    return f"{_e(head)}{flags}<details><summary>raw output</summary><pre>{_e(raw)}</pre></details>"


def _key_diff(row: DrillRow, decision: Decision | None) -> str:
    """Key sets of the two answers against each other, and against the target when known."""
    calls = [(r.arm, r.parsed.first) for r in (row.baseline, row.candidate)]
    keys = {arm: set(call.key_set) for arm, call in calls if call is not None}
    lines = []
    if len(keys) == 2:
        (arm_b, keys_b), (arm_c, keys_c) = keys.items()
        if keys_b != keys_c:
            only_b, only_c = ", ".join(sorted(keys_b - keys_c)) or "—", ", ".join(sorted(keys_c - keys_b)) or "—"
            lines.append(f"only {arm_b}: {only_b}; only {arm_c}: {only_c}")
        else:
            lines.append("same key set")
    if decision is not None and decision.target is not None and decision.target.tool is not None:
        target = set(decision.target.arg_keys)
        for arm, answer in keys.items():
            missing, extra = ", ".join(sorted(target - answer)) or "—", ", ".join(sorted(answer - target)) or "—"
            if target != answer:
                lines.append(f"{arm} vs target: missing {missing}; extra {extra}")
    return "<br>".join(_e(line) for line in lines) or "—"
