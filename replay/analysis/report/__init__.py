"""Run report: `report.md`, a self-contained `report.html` and `plot.svg` (DESIGN §7).

The HTML needs no network: CSS, the filter script and the SVG plot are inline. Tables carry
stable `id` and `data-*` attributes (raw numbers in `data-value`) so a browser test can read
cell values without parsing formatted text. The plot is drawn here, not by a plotting
library, so the report renders the same on a machine without one.

Both open with the answer (`summary`: per-arm summary table, one line per gate; the lesson
verdicts and rule uptake when given), the plot beside it; the run's metadata, the paired
tables, the full gate verdicts and the drill-down follow.

- `summary.py`: the answer's numbers: per arm, per stratum, changed calls
- `plot.py`: the SVG plot
- `drill.py`: the drill-down: each paired decision a win, a loss or the same
- `memory_reads.py`: each arm's outcome beside the memory its decisions' histories read (pure)
- `markdown_report.py`: `report.md`
- `html_report.py`: `report.html`
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

from core.atomicwrite import write_text_atomic
from core.console import reference_first
from core.names import excerpt
from core.records import Decision, ResultRecord
from replay.analysis.compare import Comparison, Tainted, arms_of, compare
from replay.analysis.gates import Verdict, read_verdict
from replay.analysis.provenance import carried, record_comparison, record_run
from replay.analysis.report.html_report import render_html
from replay.analysis.report.markdown_report import render_markdown
from replay.analysis.report.memory_reads import Retrieval, retrieval_block
from replay.analysis.report.plot import PLOT_SVG, plot_svg
from replay.analysis.report.summary import reference_arm, report_title
from replay.analysis.stages import stage_pairs, staged
from replay.analysis.training_lineage import ArmContamination, check_run
from replay.corpus.retrieval import SessionReads
from replay.memory.ledger import Ledger
from replay.memory.lessons import RuleVerdict
from replay.memory.uptake import Uptake
from replay.run.directory import RESULTS, ResultsError, load_results, read_engine_settings, read_run_json

REPORT_MD = "report.md"
REPORT_HTML = "report.html"

__all__ = ["PLOT_SVG", "REPORT_HTML", "REPORT_MD", "report_run", "write_report"]


def report_run(
    run_dir: str | Path,
    pairs: Sequence[tuple[str, str]] | None = None,
    decisions: Iterable[Decision] = (),
    tainted: Tainted = (),
    baseline: str | None = None,
    reads: Mapping[tuple[str, str], SessionReads] | None = None,
    stages: Mapping[str, str | Path] | None = None,
    ledger: Ledger | None = None,
) -> tuple[Path, Path]:
    """Report on a run directory, with every `gate-*.json` verdict already in it.

    Without `pairs`, the baseline (named, else the run config's first arm, else the first arm in
    the results) is compared with every other arm. The summary's reference is `baseline` when
    named, else the comparisons' baseline. `reads` (what each decision's session read, by workspace
    and session: `replay.corpus.retrieval.decision_reads`) adds the retrieval block. `stages` (stage name → the
    run directory of the same arms on the same suite after it, e.g. `{"quantised": ...}`) puts that run's arms
    beside these (`cand:quantised`) and compares each arm with itself across the stage (`analysis.stages`).
    `ledger`: the run (and each stage's run) and every comparison made are recorded in it."""
    results = load_results(run_dir)
    decisions, tainted = tuple(decisions), tuple(tainted)
    arms = arms_of(results)
    if not arms:
        raise ResultsError(f"{Path(run_dir) / RESULTS}: no results to report on")
    if pairs is None:
        configured = [a.get("name") for a in (read_run_json(Path(run_dir)).get("config") or {}).get("arms", [])]
        ordered = reference_first(arms, configured, baseline)
        pairs = [(ordered[0], arm) for arm in ordered[1:]]
    own = list(pairs)
    for stage, other_dir in (stages or {}).items():
        other = load_results(other_dir)
        pairs = [*pairs, *stage_pairs(own, stage, arms_of(other))]
        results = [*results, *staged(other, stage)]
    comparisons = [compare(results, base, candidate, tainted=tainted) for base, candidate in pairs]
    if ledger is not None:
        for other_dir in (stages or {}).values():
            record_run(ledger, other_dir)
        run_id = record_run(ledger, run_dir)
        for c in comparisons:
            record_comparison(ledger, run_id, c, carried(results, (c.baseline, c.candidate)))
    verdicts = [read_verdict(path) for path in sorted(Path(run_dir).glob("gate-*.json"))]
    retrieval = None if reads is None else retrieval_block(results, decisions, reads)
    return write_report(run_dir, comparisons, verdicts, results, decisions=decisions, tainted=tainted,
                        baseline=baseline, retrieval=retrieval, contamination=check_run(Path(run_dir), arms))


def write_report(
    run_dir: str | Path,
    comparisons: Sequence[Comparison],
    verdicts: Sequence[Verdict],
    results: Sequence[ResultRecord],
    decisions: Iterable[Decision] = (),
    tainted: Tainted = (),
    lessons: Sequence[RuleVerdict] | None = None,
    uptake: Sequence[Uptake] | None = None,
    baseline: str | None = None,
    retrieval: Retrieval | None = None,
    contamination: Sequence[ArmContamination] = (),
) -> tuple[Path, Path]:
    """Write report.md, report.html and plot.svg into the run directory; returns (md, html).

    `lessons` (lesson-gate verdicts), `uptake` (rule uptake rows) and `retrieval` (each arm's outcome by what
    its decisions' sessions read) add their blocks to the answer section; None leaves the block out. The
    summary counts changed calls against `baseline` when given, else against the comparisons' baseline
    (`summary.reference_arm`). `contamination` (each arm's training lineage against the suite,
    `lineage.check_run`) adds its section."""
    run = Path(run_dir)
    tainted = tuple(tainted)
    info = read_run_json(run)
    if (engine := read_engine_settings(run)) is not None:
        info["engine settings"] = engine.line()
    arms = arms_of(results)
    reference = reference_arm(arms, [c.baseline for c in comparisons], baseline)
    if reference not in arms:
        raise ResultsError(f"no results for arm {excerpt(reference)} (arms in these results: {', '.join(arms)})")
    title = report_title(info, arms, reference, run.name)
    svg = plot_svg(results)
    by_id = {d.id: d for d in decisions}
    write_text_atomic(run / PLOT_SVG, svg)
    md_path, html_path = run / REPORT_MD, run / REPORT_HTML
    write_text_atomic(md_path, render_markdown(title, info, comparisons, verdicts, results, tainted, lessons, uptake,
                                               reference=reference, retrieval=retrieval, contamination=contamination))
    write_text_atomic(html_path, render_html(title, info, comparisons, verdicts, results, svg, by_id, tainted, lessons,
                                             uptake, reference=reference, retrieval=retrieval,
                                             contamination=contamination))
    return md_path, html_path
