"""Reviewer against people, exactly (DESIGN §13; `worker-replay qa agree`), pure: labelled runs and verdicts
in, an `AgreementReport` out — the evidence file the `reviewer_agreement` gate condition reads (its format
is `core/evidence.py`'s).

Per reviewer (a role, or `production@<mode>`: replay/qa/labels.py) and per workspace, and over all of them,
on the runs that have both its verdict and a person's disposition:

* the confusion matrix, reviewer verdict (pass, fail, escalate) × disposition (pass, fail);
* the **false-pass rate**: of the runs people failed, the share the reviewer passed — what enforcing it would
  let through unseen (an escalation is no pass: it forces a human) — with its exact Clopper–Pearson interval;
* the **escalation rate**: the share of labelled runs it escalated, with its Clopper–Pearson interval;
* **Cohen's κ** of "the reviewer passes" against "people pass" (an escalation counts as not passing, as it is
  in enforce mode), with the Fleiss–Cohen–Everitt asymptotic interval (replay/stats/binomial.py);

and per pair of reviewers on the labelled runs both judged, the **exact McNemar test**: the runs where exactly
one of the two passed-or-not as people did, two-sided binomial (½) on those (`replay.stats.sign_test`).
A run without a disposition is counted (`reviewed` − `labelled`) and judged by nobody's figures.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from itertools import combinations

from core.evidence import AgreementReport, AgreementRow, Disposition, Matrix, PairRow, ReviewVerdict
from replay.qa.labels import LabelledRun
from replay.qa.verdicts import Verdicts
from replay.stats import DEFAULT_CONFIDENCE, clopper_pearson, cohen_kappa, sign_test


def passed(verdict: ReviewVerdict) -> bool:
    return verdict is ReviewVerdict.PASS


def agreement(runs: Sequence[LabelledRun], verdicts: Verdicts,
              confidence: float = DEFAULT_CONFIDENCE) -> AgreementReport:
    human = {(r.workspace, r.session): r.disposition for r in runs}
    reviewers = sorted({reviewer for reviewer, _, _ in verdicts.by_run})
    rows = []
    for reviewer in reviewers:
        judged = {(w, s): v for (r, w, s), v in verdicts.by_run.items() if r == reviewer}
        for workspace in _scopes({w for w, _ in judged}):
            mine = {run: v for run, v in judged.items() if workspace in (None, run[0])}
            unusable = {run for run in mine if (reviewer, *run) in verdicts.unusable}
            rows.append(_row(reviewer, workspace, mine, unusable, human, confidence))
    pairs = [pair for first, second in combinations(reviewers, 2) for pair in _pairs(first, second, verdicts, human)]
    return AgreementReport(confidence=confidence, runs=len(runs), labelled=sum(d is not None for d in human.values()),
                           unmatched_verdicts=verdicts.unmatched, rows=rows, pairs=pairs)


def _scopes(workspaces: set[str]) -> Iterator[str | None]:
    yield from sorted(workspaces)
    yield None


def _row(reviewer: str, workspace: str | None, judged: dict[tuple[str, str], ReviewVerdict],
         unusable: set[tuple[str, str]], human: dict[tuple[str, str], Disposition | None],
         confidence: float) -> AgreementRow:
    matrix: Matrix = {v: dict.fromkeys(Disposition, 0) for v in ReviewVerdict}
    for run, verdict in judged.items():
        disposition = human.get(run)
        if disposition is not None:
            matrix[verdict][disposition] += 1
    labelled = sum(sum(column.values()) for column in matrix.values())
    false_passes = matrix[ReviewVerdict.PASS][Disposition.FAIL]
    human_fails = sum(column[Disposition.FAIL] for column in matrix.values())
    escalations = sum(matrix[ReviewVerdict.ESCALATE].values())
    kappa = cohen_kappa(_pass_table(matrix), confidence)
    return AgreementRow(
        reviewer=reviewer, workspace=workspace, reviewed=len(judged), labelled=labelled, matrix=matrix,
        false_passes=false_passes, human_fails=human_fails,
        false_pass_rate=false_passes / human_fails if human_fails else None,
        false_pass_ci=clopper_pearson(false_passes, human_fails, confidence), escalations=escalations,
        unusable=sum(human.get(run) is not None for run in unusable),
        escalation_rate=escalations / labelled if labelled else None,
        escalation_ci=clopper_pearson(escalations, labelled, confidence),
        kappa=None if kappa is None else kappa.value, kappa_se=None if kappa is None else kappa.se,
        kappa_ci=None if kappa is None else (kappa.low, kappa.high))


def _pass_table(matrix: Matrix) -> list[list[int]]:
    """Reviewer passes / does not (fail, escalate) × people pass / fail."""
    not_passed = [matrix[ReviewVerdict.FAIL][d] + matrix[ReviewVerdict.ESCALATE][d] for d in Disposition]
    return [[matrix[ReviewVerdict.PASS][d] for d in Disposition], not_passed]


def _pairs(first: str, second: str, verdicts: Verdicts,
           human: dict[tuple[str, str], Disposition | None]) -> Iterator[PairRow]:
    """Per workspace both judged, and over all: the discordant runs and the exact McNemar test."""
    both: list[tuple[str, bool, bool]] = []
    for (workspace, session), disposition in sorted(human.items()):
        a, b = (verdicts.by_run.get((r, workspace, session)) for r in (first, second))
        if disposition is not None and a is not None and b is not None:
            people = disposition is Disposition.PASS
            both.append((workspace, passed(a) == people, passed(b) == people))
    for scope in _scopes({w for w, _, _ in both}):
        mine = [(a, b) for w, a, b in both if scope in (None, w)]
        only_first, only_second = sum(a and not b for a, b in mine), sum(b and not a for a, b in mine)
        yield PairRow(first=first, second=second, workspace=scope, runs=len(mine), only_first_right=only_first,
                      only_second_right=only_second, p_value=sign_test(only_first, only_second))


def _percent(value: float | None) -> str:
    return "—" if value is None else f"{100 * value:.1f}%"


def format_agreement(report: AgreementReport) -> str:
    percent = round(100 * report.confidence)
    lines = [f"qa agree: {report.runs} run(s), {report.labelled} with a person's disposition, "
             f"{report.runs - report.labelled} without (counted, never guessed); "
             f"{report.unmatched_verdicts} verdict(s) on runs not labelled (not used)"]
    table = [("REVIEWER", "WORKSPACE", "REVIEWED", "LABELLED", f"FALSE PASS [{percent}% CP]",
              f"ESCALATION [{percent}% CP]", f"KAPPA [{percent}% FCE]")]
    for r in report.rows:
        kappa = "—" if r.kappa is None or r.kappa_ci is None else \
            f"{r.kappa:.2f} [{r.kappa_ci[0]:.2f}, {r.kappa_ci[1]:.2f}]"
        table.append((r.reviewer, r.workspace or "all", str(r.reviewed), str(r.labelled),
                       f"{r.false_passes}/{r.human_fails} = {_percent(r.false_pass_rate)} "
                       f"[{_percent(r.false_pass_ci[0])}, {_percent(r.false_pass_ci[1])}]",
                       f"{r.escalations}/{r.labelled} = {_percent(r.escalation_rate)} "
                       f"[{_percent(r.escalation_ci[0])}, {_percent(r.escalation_ci[1])}]"
                       + (f", {r.unusable} unusable" if r.unusable else ""), kappa))
    widths = [max(len(row[i]) for row in table) for i in range(len(table[0]))]
    lines += ["  " + "  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip() for row in table]
    if report.pairs:
        lines.append("two reviewers on the same labelled runs (exact McNemar on the runs only one judged as people "
                     "did):")
        lines += [f"  {p.first} vs {p.second}, {p.workspace or 'all'}: {p.runs} run(s), {p.only_first_right} only "
                  f"{p.first} right, {p.only_second_right} only {p.second} right, p = {p.p_value:.4g}"
                  for p in report.pairs]
    return "\n".join(lines)
