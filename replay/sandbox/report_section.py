"""The sandbox section of a report: per-arm summary, paired tables, and a trajectory drill-down.

`write_sandbox_report(run_dir, pairs)` writes `RUN_DIR/sandbox-report.html`, self-contained
(no script, no external resource). Every episode is one `<details id="ep-ARM-SCENARIO">`:
its ending, final answer and scores, then one row per step with the call, the tool result
(the guard's kind and the JSON) and what changed in the state (`path: before → after`).
"""

from __future__ import annotations

import html
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from replay.analysis.compare import format_ci, format_p, format_points
from replay.analysis.report.html_report import CSS
from replay.run.directory import read_run_json
from replay.sandbox.gate_evidence import MEASURES, Pairs, paired_tables
from replay.sandbox.runner import SandboxResult
from replay.sandbox.scenario import CATEGORIES

REPORT_HTML = "sandbox-report.html"
EXTRA_CSS = """
details{margin:0.3em 0;border:1px solid #ddd;padding:0.3em 0.6em}
summary{cursor:pointer}
tr[data-ok=false] td.kind{color:#a31515;font-weight:bold}
.completed{color:#176b1c}.failed{color:#a31515}
"""


def _e(value: Any) -> str:
    return html.escape(str(value), quote=True)


def _json(value: Any, limit: int = 600) -> str:
    text = json.dumps(value, ensure_ascii=False, sort_keys=True)
    return text if len(text) <= limit else text[:limit] + " …"


def _summary(results: Sequence[SandboxResult]) -> str:
    arms = list(dict.fromkeys(r.arm for r in results))
    head = ("<tr><th>arm</th><th>model</th><th>memory</th><th>episodes</th><th>completed</th><th>unsupported</th>"
            + "".join(f"<th>critical: {c}</th>" for c in CATEGORIES)
            + "<th>with failed repeats</th><th>tool calls</th></tr>")
    rows = []
    for arm in arms:
        a = [r for r in results if r.arm == arm]
        cells = [arm, a[0].model, a[0].memory, len(a), sum(r.scores.task_completed for r in a),
                 sum(r.scores.unsupported_completion for r in a),
                 *(sum(r.scores.critical[c] for r in a) for c in CATEGORIES),
                 sum(r.scores.failed_repeats > 0 for r in a), sum(r.scores.steps for r in a)]
        rows.append(f'<tr data-arm="{_e(arm)}">' + "".join(f"<td>{_e(c)}</td>" for c in cells) + "</tr>")
    return f'<table id="sandbox-arms"><thead>{head}</thead><tbody>{"".join(rows)}</tbody></table>'


def _paired(pairs: Pairs) -> str:
    out = [(f"<h3>{_e(pairs.baseline)} → {_e(pairs.candidate)} ({len(pairs.items)} scenarios, "
           f"endpoint {_e(pairs.endpoint_kind)})</h3>")]
    for (name, _, higher), rows in zip(MEASURES, paired_tables(pairs).values(), strict=True):
        body = "".join(
            f'<tr data-measure="{_e(name)}" data-scope="{_e(scope)}"><td>{_e(scope)}</td><td class="num">{s.n}</td>'
            f'<td class="num">{s.baseline_correct}</td><td class="num">{s.candidate_correct}</td>'
            f'<td class="num">+{s.wins} / −{s.losses}</td><td class="num">{_e(format_points(s.points))}</td>'
            f"<td>{_e(format_ci(s.ci_low, s.ci_high))}</td><td class=\"num\">{_e(format_p(s.p_value))}</td></tr>"
            for scope, s in rows.items())
        out.append(f"<h4>{_e(name)} ({'higher' if higher else 'lower'} is better)</h4><table><thead><tr><th>scope</th>"
                   "<th>n</th><th>baseline</th><th>candidate</th><th>discordant</th><th>points</th><th>95% CI</th>"
                   f"<th>p</th></tr></thead><tbody>{body}</tbody></table>")
    return "\n".join(out)


def episode_html(result: SandboxResult) -> str:
    t, s = result.trajectory, result.scores
    verdict = "completed" if s.task_completed else "failed"
    claimed = ", ".join([*s.claims_made, *(["success in general"] if s.claims_success else [])])
    flags = [f for f, on in ((f"unsupported completion (claims: {claimed})", s.unsupported_completion),
                             ("critical: " + ", ".join(s.critical_hits), s.critical_failure),
                             (f"{s.failed_repeats} failed repeat(s)", s.failed_repeats > 0)) if on]
    rows = []
    for entry in t.ledger:
        changes = "\n".join(f"{p}: {_json(c.get('before', '(absent)'), 80)} → {_json(c.get('after', '(absent)'), 80)}"
                            for p, c in entry.changes.items()) or "(no change)"
        rows.append(f'<tr data-step="{entry.step}" data-ok="{str(entry.ok).lower()}"><td class="num">{entry.step}</td>'
                    f"<td>{_e(entry.tool)}<pre>{_e(entry.arguments)}</pre></td>"
                    f'<td class="kind">{_e(entry.kind)}</td><td><pre>{_e(_json(entry.result))}</pre></td>'
                    f"<td><pre>{_e(changes)}</pre></td></tr>")
    table = ("<table><thead><tr><th>step</th><th>call</th><th>result</th><th>tool result</th><th>state changes</th>"
             f"</tr></thead><tbody>{''.join(rows)}</tbody></table>") if rows else '<p class="note">No tool call.</p>'
    answer = _e(t.final_answer) if t.final_answer is not None else "(none)"
    why = "; ".join(s.not_completed_because)
    return (f'<details id="ep-{_e(result.arm)}-{_e(result.scenario_id)}" data-arm="{_e(result.arm)}" '
            f'data-scenario="{_e(result.scenario_id)}" data-completed="{str(s.task_completed).lower()}">'
            f'<summary><b>{_e(result.arm)}</b> · {_e(result.scenario_id)} ({_e(result.policy_family)}): '
            f'<span class="{verdict}">{verdict}</span>, ended by {_e(t.ended_by)}, {s.steps} step(s)'
            f"{'; ' + _e('; '.join(flags)) if flags else ''}</summary>"
            f"<p>Final answer: <q>{answer}</q></p>"
            + (f'<p class="note">Not completed: {_e(why)}</p>' if why else "")
            + f'{table}<p class="note">end state sha256 {_e(t.end_state_hash[:16])}…</p></details>')


def render_sandbox_html(run_dir: Path, info: dict[str, Any], results: Sequence[SandboxResult],
                        pairs: Sequence[Pairs]) -> str:
    pack = info.get("pack", {})
    body = [f"<h1>Sandbox report: {_e(run_dir.name)}</h1>",
            (f'<p>pack {_e(pack.get("name"))} v{_e(pack.get("version"))} (sha256 {_e(str(pack.get("sha256"))[:12])}…), '
            f'endpoint kind {_e(info.get("endpoint_kind"))}</p>'),
            '<section id="sandbox-summary"><h2>Arms</h2>', _summary(results), "</section>",
            '<section id="sandbox-paired"><h2>Paired tables</h2>', *(_paired(p) for p in pairs), "</section>",
            '<section id="sandbox-episodes"><h2>Episodes</h2>',
            *(episode_html(r) for r in sorted(results, key=lambda r: (r.scenario_id, r.arm))), "</section>"]
    return ('<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
            f"<title>Sandbox report: {_e(run_dir.name)}</title><style>{CSS}{EXTRA_CSS}</style></head>\n<body>\n"
            + "\n".join(body) + "\n</body></html>\n")


def write_sandbox_report(run_dir: Path, results: Sequence[SandboxResult], pairs: Sequence[Pairs]) -> Path:
    info = read_run_json(run_dir)
    path = run_dir / REPORT_HTML
    tmp = path.with_suffix(".tmp")
    tmp.write_text(render_sandbox_html(run_dir, info, results, pairs), encoding="utf-8")
    tmp.replace(path)
    return path
