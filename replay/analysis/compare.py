"""Paired comparison of two arms of one run, from `results.jsonl` alone (DESIGN §4, §7).

Per stratum and over all positive decisions (every scored stratum except `HELD_OUT_EXCLUDED`
and `known_failure`: 001's "264 held-out positives"), joint and tool-only correctness;
repeat levels on known-failure states; token/latency overhead; optional breakdowns by
workspace, cluster, target tool or thread (`main`, `subagent`: a delegating session makes most of its
decisions in subagents' loops, which are not the same task; `unknown` for decisions whose suite does
not say). Every row is its own uncorrected test, so the comparison
reports how many were made. Rows that rest on a result which carried a disputed rule are
counted as tainted so no table shows them as clean.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Collection, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, get_args

from pydantic import BaseModel, ConfigDict

from core.names import excerpt
from core.records import HELD_OUT_EXCLUDED, KNOWN_FAILURE, MAIN_THREAD, POSITIVE_STRATA, ResultRecord
from replay.memory.ledger import RuleRef
from replay.run.directory import ResultsError, load_results
from replay.stats import (
    Overhead,
    PairedComparison,
    RepeatComparison,
    overhead,
    paired_comparison,
    repeat_comparison,
)
from replay.suite import NO_CALL

ALL_POSITIVE = "all_positive"
BY_FIELDS = ("workspace", "cluster", "tool", "thread")
Measure = Literal["joint", "tool"]
RepeatLevel = Literal["tool", "shape", "exact"]
REPEAT_LEVELS: tuple[RepeatLevel, ...] = ("tool", "shape", "exact")
By = Literal["workspace", "cluster", "tool", "thread"]
Tainted = Iterable[str | RuleRef]


class CorrectnessRow(BaseModel):
    """One paired correctness test. `scope` is a stratum, `all_positive`, or a breakdown group."""

    model_config = ConfigDict(frozen=True)
    measure: Measure
    scope: str
    stats: PairedComparison
    tainted_results: int = 0
    tainted_rule_ids: list[str] = []


class RepeatRow(BaseModel):
    """One paired repeat test on a stratum's failed-action states (lower is better)."""

    model_config = ConfigDict(frozen=True)
    level: RepeatLevel
    stratum: str
    stats: RepeatComparison
    tainted_results: int = 0
    tainted_rule_ids: list[str] = []


class NoiseRow(BaseModel):
    """The A/A test of one correctness scope: an arm against its replicate, nothing changed."""

    model_config = ConfigDict(frozen=True)
    measure: Measure
    scope: str
    stats: PairedComparison

    @property
    def discordant(self) -> int:
        return self.stats.wins + self.stats.losses


class NoiseFloor(BaseModel):
    """What changes with nothing changed: `arm` against its replicate on the comparison's decisions.

    The sign test stays valid under this noise (it is symmetric under the null), but every noise
    pair is a discordant pair the candidate's effect has to stand out from."""

    model_config = ConfigDict(frozen=True)
    arm: str
    replicate: str
    decisions: int
    rows: list[NoiseRow]

    def row(self, measure: Measure, scope: str) -> NoiseRow | None:
        return next((r for r in self.rows if r.measure == measure and r.scope == scope), None)


class Comparison(BaseModel):
    """Candidate against baseline on the decisions both arms answered (`--json` output)."""

    baseline: str
    candidate: str
    decisions: int
    correctness: list[CorrectnessRow]
    repeats: list[RepeatRow]
    overhead: Overhead
    by: By | None = None
    breakdown: list[CorrectnessRow] = []
    comparisons_made: int
    tainted_rule_ids: list[str] = []
    tainted_results: int = 0
    noise: NoiseFloor | None = None
    """The A/A discordance of the baseline (else the candidate) against its replicate, where the run has one."""

    def row(self, measure: Measure, scope: str) -> CorrectnessRow:
        """The correctness row of a stratum or `all_positive`; KeyError names what exists."""
        for row in self.correctness:
            if row.measure == measure and row.scope == scope:
                return row
        scopes = sorted({r.scope for r in self.correctness})
        raise KeyError(f"no {measure} row for {scope!r} (rows exist for: {', '.join(scopes) or 'none'})")

    def repeat(self, level: RepeatLevel, stratum: str = KNOWN_FAILURE) -> RepeatRow:
        """The repeat row of one level on one stratum; KeyError names what exists."""
        for row in self.repeats:
            if row.level == level and row.stratum == stratum:
                return row
        raise KeyError(f"no {level}-repeat row for stratum {stratum!r}")


def arms_of(results: Iterable[ResultRecord]) -> list[str]:
    """Arm names in the order they first appear."""
    return list(dict.fromkeys(r.arm for r in results))


def compare_run(
    run_dir: str | Path, baseline: str, candidate: str, by: By | None = None, tainted: Tainted = ()
) -> Comparison:
    """`compare` on the results of one run directory."""
    return compare(load_results(run_dir), baseline, candidate, by=by, tainted=tainted)


@dataclass(frozen=True)
class _Pair:
    baseline: ResultRecord
    candidate: ResultRecord
    tainted: int  # how many of the two results carried a disputed rule
    disputed: frozenset[str]  # which disputed rules they carried


def compare(
    results: Iterable[ResultRecord], baseline: str, candidate: str, by: By | None = None, tainted: Tainted = (),
    excluded: Collection[str] = (),
) -> Comparison:
    """Pair the two arms on the same decisions and compute every row (see the module doc); the decisions
    `excluded` names (those the candidate's training data reaches: `analysis.training_lineage`) are left out."""
    records = list(results)
    if by is not None and by not in BY_FIELDS:
        raise ResultsError(f"unknown breakdown {by!r}: choose one of {', '.join(BY_FIELDS)}")
    disputed = _Disputed.of(tainted)
    pairs = [p for p in _pair(records, baseline, candidate, disputed) if p.baseline.decision_id not in excluded]
    correctness = [
        _correctness_row(measure, scope, members)
        for measure in ("joint", "tool")
        for scope, members in _correctness_scopes(pairs)
    ]
    repeats = [
        row
        for stratum, members in _group(pairs, lambda p: p.baseline.stratum).items()
        for level in REPEAT_LEVELS
        if (row := _repeat_row(level, stratum, members)).stats.n
    ]
    breakdown: list[CorrectnessRow] = []
    if by is not None:
        held_out = [p for p in pairs if _held_out_positive(p)]
        groups = _group(held_out, lambda p: _group_key(p.baseline, by))
        breakdown = [
            _correctness_row(measure, group, groups[group]) for measure in ("joint", "tool") for group in sorted(groups)
        ]
    cost = overhead(
        [p.baseline.usage.completion_tokens for p in pairs],
        [p.candidate.usage.completion_tokens for p in pairs],
        [p.baseline.latency_s for p in pairs],
        [p.candidate.latency_s for p in pairs],
    )
    return Comparison(
        baseline=baseline,
        candidate=candidate,
        decisions=len(pairs),
        correctness=correctness,
        repeats=repeats,
        overhead=cost,
        by=by,
        breakdown=breakdown,
        comparisons_made=len(correctness) + len(repeats) + len(breakdown),
        tainted_rule_ids=_disputed_ids(pairs),
        tainted_results=sum(p.tainted for p in pairs),
        noise=noise_floor(records, baseline, candidate, {p.baseline.decision_id for p in pairs}),
    )


def replicates(results: Iterable[ResultRecord]) -> dict[str, str]:
    """Each replicate arm in the results and the arm it replicates."""
    return {r.arm: r.replicate_of for r in results if r.replicate_of is not None}


def noise_floor(records: list[ResultRecord], baseline: str, candidate: str,
                decisions: set[str]) -> NoiseFloor | None:
    """The baseline's A/A comparison (else the candidate's) on `decisions`; None when neither arm has a
    replicate, or when the comparison is itself an arm against its replicate."""
    twins = replicates(records)
    if twins.get(candidate) == baseline or twins.get(baseline) == candidate:
        return None
    for arm in (baseline, candidate):
        replicate = next((r for r, of in twins.items() if of == arm), None)
        if replicate is None:
            continue
        shared = decisions & {r.decision_id for r in records if r.arm == replicate}
        if not shared:
            continue
        pairs = _pair([r for r in records if r.arm in (arm, replicate) and r.decision_id in shared], arm, replicate,
                      _Disputed.of(()))
        rows = []
        for measure in get_args(Measure):
            for scope, members in _correctness_scopes(pairs):
                stats = _correctness_row(measure, scope, members).stats
                rows.append(NoiseRow(measure=measure, scope=scope, stats=stats))
        return NoiseFloor(arm=arm, replicate=replicate, decisions=len(pairs), rows=rows)
    return None


@dataclass(frozen=True)
class _Disputed:
    """Disputed rules: a bare id in any workspace, a RuleRef in its own workspace."""

    anywhere: frozenset[str]
    scoped: frozenset[tuple[str, str]]

    @classmethod
    def of(cls, tainted: Tainted) -> _Disputed:
        items = list(tainted)
        return cls(
            frozenset(t for t in items if isinstance(t, str)),
            frozenset((t.workspace, t.rule_id) for t in items if isinstance(t, RuleRef)),
        )

    def carried(self, record: ResultRecord) -> list[str]:
        return [
            rule
            for rule in record.injected_rule_ids
            if rule in self.anywhere or (record.workspace, rule) in self.scoped
        ]


def is_tainted(record: ResultRecord, tainted: Tainted) -> bool:
    """Whether the result's request carried a disputed rule."""
    return bool(_Disputed.of(tainted).carried(record))


def _one_version(arm: str, records: Iterable[ResultRecord]) -> None:
    """An arm is one served version: results a route answered with several (it moved while a
    run was resumed) are not one arm's, and comparing them would credit a mix."""
    versions = Counter(r.served_by for r in records if r.served_by is not None)
    if len(versions) > 1:
        counts = ", ".join(f"{version} ({n})" for version, n in sorted(versions.items()))
        raise ResultsError(f"arm {arm!r} was served by {len(versions)} versions: {counts}; its route moved during "
                           "the run. Replay into a new run directory, or pin the version as the arm's model")


def _pair(records: list[ResultRecord], baseline: str, candidate: str, disputed: _Disputed) -> list[_Pair]:
    by_arm: dict[str, dict[str, ResultRecord]] = {}
    for record in records:
        by_arm.setdefault(record.arm, {})[record.decision_id] = record
    for arm in (baseline, candidate):
        if arm not in by_arm:
            known = ", ".join(by_arm) or "none"
            raise ResultsError(f"no results for arm {excerpt(arm)} (arms in these results: {known})")
    if baseline == candidate:
        raise ResultsError(f"baseline and candidate are the same arm {baseline!r}")
    for arm in (baseline, candidate):
        _one_version(arm, by_arm[arm].values())
    base, cand = by_arm[baseline], by_arm[candidate]
    only_base, only_cand = sorted(base.keys() - cand.keys()), sorted(cand.keys() - base.keys())
    if only_base or only_cand:
        raise ResultsError(
            f"arms {baseline!r} and {candidate!r} answered different decisions: "
            f"missing from {candidate!r}: {_ids(only_base)}; missing from {baseline!r}: {_ids(only_cand)}"
        )
    pairs = []
    for decision_id in base:
        b, c = base[decision_id], cand[decision_id]
        if b.stratum != c.stratum:
            raise ResultsError(
                f"decision {decision_id!r} is {b.stratum!r} in {baseline!r} but {c.stratum!r} in {candidate!r}"
            )
        if (b.score.joint_correct is None) != (c.score.joint_correct is None):
            raise ResultsError(f"decision {decision_id!r} is scored for correctness in one arm only")
        carried_b, carried_c = disputed.carried(b), disputed.carried(c)
        pairs.append(_Pair(b, c, bool(carried_b) + bool(carried_c), frozenset(carried_b + carried_c)))
    return pairs


def _ids(ids: list[str], shown: int = 10) -> str:
    if not ids:
        return "none"
    more = f" … and {len(ids) - shown} more" if len(ids) > shown else ""
    return ", ".join(ids[:shown]) + more


def is_held_out_positive(record: ResultRecord) -> bool:
    """Whether a result counts among "all positive decisions" (scored, not excluded, not known-failure)."""
    stratum = record.stratum
    return record.score.joint_correct is not None and stratum not in HELD_OUT_EXCLUDED and stratum != KNOWN_FAILURE


def scope_order(strata: Iterable[str]) -> list[str]:
    """Correctness scopes in table order: held-out strata (built-in order, then a suite's own),
    `all_positive`, then the excluded strata (001's Table 1 order)."""
    present = set(strata)
    held_out = [s for s in POSITIVE_STRATA if s in present and s not in HELD_OUT_EXCLUDED]
    held_out += sorted(present - {*POSITIVE_STRATA, KNOWN_FAILURE})
    excluded = [s for s in (*HELD_OUT_EXCLUDED, KNOWN_FAILURE) if s in present]
    return [*held_out, *([ALL_POSITIVE] if held_out else []), *excluded]


def _held_out_positive(pair: _Pair) -> bool:
    return is_held_out_positive(pair.baseline)


def _correctness_scopes(pairs: list[_Pair]) -> Iterator[tuple[str, list[_Pair]]]:
    scored = _group([p for p in pairs if p.baseline.score.joint_correct is not None], lambda p: p.baseline.stratum)
    held_out = [p for p in pairs if _held_out_positive(p)]
    for scope in scope_order(scored):
        yield scope, held_out if scope == ALL_POSITIVE else scored[scope]


def _group(pairs: Iterable[_Pair], key: Callable[[_Pair], str]) -> dict[str, list[_Pair]]:
    groups: dict[str, list[_Pair]] = {}
    for pair in pairs:
        groups.setdefault(key(pair), []).append(pair)
    return groups


def _group_key(record: ResultRecord, by: By) -> str:
    if by == "tool":
        return record.target_tool or NO_CALL
    if by == "thread":
        return "unknown" if record.thread is None else "main" if record.thread == MAIN_THREAD else "subagent"
    value: str = getattr(record, by)
    return value


def _correctness_row(measure: Measure, scope: str, pairs: list[_Pair]) -> CorrectnessRow:
    field = "joint_correct" if measure == "joint" else "tool_correct"
    stats = paired_comparison(
        (bool(getattr(p.baseline.score, field)), bool(getattr(p.candidate.score, field))) for p in pairs
    )
    return CorrectnessRow(
        measure=measure, scope=scope, stats=stats, tainted_results=sum(p.tainted for p in pairs),
        tainted_rule_ids=_disputed_ids(pairs),
    )


def _repeat_row(level: RepeatLevel, stratum: str, pairs: list[_Pair]) -> RepeatRow:
    field = f"{level}_repeat"
    scored = [p for p in pairs if None not in (getattr(p.baseline.score, field), getattr(p.candidate.score, field))]
    stats = repeat_comparison(
        (bool(getattr(p.baseline.score, field)), bool(getattr(p.candidate.score, field))) for p in scored
    )
    return RepeatRow(
        level=level, stratum=stratum, stats=stats, tainted_results=sum(p.tainted for p in scored),
        tainted_rule_ids=_disputed_ids(scored),
    )


def _disputed_ids(pairs: Iterable[_Pair]) -> list[str]:
    return sorted({rule for p in pairs for rule in p.disputed})


# ── text output ─────────────────────────────────────────────────────────────

TAINT_MARK = "†"


def format_p(p: float) -> str:
    """p-values as 001 prints them, to four decimals (exact values are in the JSON)."""
    return f"{p:.4f}" if p >= 0.0001 else f"{p:.1e}"


def plural(count: int, word: str, words: str | None = None) -> str:
    return f"{count} {word if count == 1 else (words or word + 's')}"


def format_points(value: float | None, digits: int = 2) -> str:
    return "n/a" if value is None else f"{value:+.{digits}f}".replace("-", "−")


def format_ci(low: float | None, high: float | None) -> str:
    return "n/a" if low is None or high is None else f"[{format_points(low, 1)}, {format_points(high, 1)}]"


def measure_label(row: CorrectnessRow) -> str:
    scope = "all positives" if row.scope == ALL_POSITIVE else row.scope
    return f"{scope}, {row.measure} ({row.stats.n})"


def repeat_label(row: RepeatRow) -> str:
    return f"{row.stratum}, {row.level} repeats ({row.stats.n})"


def correctness_cells(row: CorrectnessRow) -> tuple[str, str, str, str, str]:
    s = row.stats
    pairs = f"+{s.wins} / −{s.losses}, p = {format_p(s.p_value)}"
    ci = format_ci(s.ci_low, s.ci_high)
    return str(s.baseline_correct), str(s.candidate_correct), pairs, ci, format_points(s.points)


def repeat_cells(row: RepeatRow) -> tuple[str, str, str, str, str]:
    s = row.stats
    rate = (lambda k: f"{k} ({100 * k / s.n:.0f}%)") if s.n else str
    pairs = f"{plural(s.fixes, 'fix', 'fixes')} / {plural(s.regressions, 'regression')}, p = {format_p(s.p_value)}"
    ci, points = format_ci(s.ci_low, s.ci_high), format_points(s.points) + relative_change(s.relative_reduction)
    return rate(s.baseline_repeats), rate(s.candidate_repeats), pairs, ci, points


def relative_change(reduction: float | None) -> str:
    """A relative reduction of repeats in words: "(40% fewer)", "(167% more)" where the candidate repeats more
    (a negative reduction is not "-167% fewer"), "(as many)", "(<1% more)"; empty when the baseline never repeated."""
    if reduction is None:
        return ""
    if reduction == 0:
        return " (as many)"
    percent = round(100 * abs(reduction))
    return f" ({percent or '<1'}% {'fewer' if reduction > 0 else 'more'})"


def format_comparison(comparison: Comparison) -> str:
    """The paired tables as text, in the layout of 001's Table 1."""
    c = comparison
    aa = () if c.noise is None else (NOISE_COLUMN,)
    header = ("Measure", c.baseline, c.candidate, "Discordant pairs", "95% CI (points)", "Points", *aa)
    rows: list[tuple[str, ...]] = [header]
    rows += [(_mark(measure_label(r), r.tainted_results), *correctness_cells(r), *noise_cells(c, r))
             for r in c.correctness]
    rows += [(_mark(repeat_label(r), r.tainted_results), *repeat_cells(r), *("",) * len(aa)) for r in c.repeats]
    if c.breakdown:
        rows.append((f"by {c.by}:", "", "", "", "", "", *("",) * len(aa)))
        rows += [(_mark("  " + measure_label(r), r.tainted_results), *correctness_cells(r), *("",) * len(aa))
                 for r in c.breakdown]
    widths = [max(len(row[i]) for row in rows) for i in range(len(header))]
    lines = [f"{c.candidate} against {c.baseline}: {c.decisions} paired decisions", ""]
    for index, row in enumerate(rows):
        lines.append("  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip())
        if index == 0:
            lines.append("  ".join("-" * width for width in widths))
    lines += ["", format_overhead(c.overhead)]
    if c.noise is not None:
        lines.append(noise_note(c))
    lines.append(
        f"{c.comparisons_made} paired tests (exact two-sided sign tests on discordant pairs, Newcombe hybrid "
        "score 95% CIs), uncorrected for multiple comparisons."
    )
    if c.tainted_results:
        lines.append(
            f"{TAINT_MARK} rests on {c.tainted_results} result(s) that carried disputed rule(s) "
            f"{', '.join(c.tainted_rule_ids)}: re-run before relying on it."
        )
    return "\n".join(lines)


NOISE_COLUMN = "A/A discordant"


def noise_cells(c: Comparison, row: CorrectnessRow) -> tuple[str, ...]:
    """The A/A discordance of the row's scope, as `K of N` (none when the comparison has no noise floor)."""
    if c.noise is None:
        return ()
    aa = c.noise.row(row.measure, row.scope)
    return ("n/a",) if aa is None else (f"{aa.discordant} of {aa.stats.n}",)


def noise_note(c: Comparison, measure: Measure = "joint", scope: str = ALL_POSITIVE) -> str:
    """One sentence: the noise floor over `scope`, and the candidate's discordant pairs beside it."""
    noise = c.noise
    if noise is None:
        return ""
    aa, row = noise.row(measure, scope), next((r for r in c.correctness if r.measure == measure and r.scope == scope),
                                              None)
    where = "all positives" if scope == ALL_POSITIVE else scope
    if aa is None or row is None:
        return f"Noise floor ({noise.replicate} replicates {noise.arm}): no {measure}-scored {where} decisions."
    return (f"Noise floor: {aa.discordant} of {aa.stats.n} decisions change with nothing changed ({noise.replicate} "
            f"replicates {noise.arm}; {where}, {measure}: +{aa.stats.wins} / −{aa.stats.losses}); {c.candidate} has "
            f"{row.stats.wins + row.stats.losses} discordant pairs against {c.baseline} "
            f"(+{row.stats.wins} / −{row.stats.losses}).")


def format_overhead(cost: Overhead) -> str:
    if cost.n == 0:
        return "Overhead: no paired decisions."
    tokens = _cost(
        "completion tokens (mean)", cost.baseline_mean_tokens, cost.candidate_mean_tokens, cost.token_ratio, ""
    )
    latency = _cost(
        "latency (mean)", cost.baseline_mean_latency_s, cost.candidate_mean_latency_s, cost.latency_ratio, " s"
    )
    p50 = _cost(
        "latency (p50)", cost.baseline_p50_latency_s, cost.candidate_p50_latency_s, cost.p50_latency_ratio, " s"
    )
    return f"Overhead: {tokens}; {latency}; {p50}."


def _cost(label: str, baseline: float | None, candidate: float | None, ratio: float | None, unit: str) -> str:
    if ratio is None:
        return f"{label} not measured"
    return f"{label} {baseline:.2f}{unit} → {candidate:.2f}{unit} (×{ratio:.3f})"


def _mark(label: str, tainted: int) -> str:
    return f"{label} {TAINT_MARK}" if tainted else label
