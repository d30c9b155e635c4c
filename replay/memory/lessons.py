"""The lesson gate (000, DESIGN §5): per rule, promote, evict as harmful, or hold.

Two ways to judge a rule:

* **Causal** (`causal_verdicts`): arm `workspace` against arm `workspace-minus:<id>` on the
  same decisions (those whose `workspace` request carried the rule). A discordant pair whose
  answer is acceptable (`acceptable`) with the full memory and not with the ablation is a win
  for the rule. Exact sign test on
  the discordant pairs, rejecting at p ≤ α as the analysis gates do (`replay.stats.rejects`),
  Newcombe paired CI, thresholds from `AblationPolicy`.
* **Correlational leave-one-out** (`lift_verdicts`), for runs without ablation arms, as in
  000: mean score of the outcomes that carried the rule against the mean of those that did
  not. Outcomes that carried no rule at all say nothing about any rule and are not counted
  (000, iteration 5); a rule that never was absent cannot be judged and is held (iteration 3)
  until `max_trials` forces a verdict. Co-injected rules share the blame: an innocent rule
  always injected beside a harmful one is evicted with it. The causal test does not do that.

Both judge every decision by what the scoring knows of it (`acceptable`): the target where the
decision has one, else whether the failed action was repeated, so a rule that makes the model
repeat a rejected call is judged on the known failures too, not only on the recoveries.

Eviction is soft: `propose_edits` renders a unified diff that *moves* each evicted rule to
`## Retired` in learned-corrections.md and adds a dated `eval-gate:` line to the corrections
log's `## Retired`; `apply_edits` writes it, only when called. Promotion edits no file (moving
Pending into Rules is the nightly consolidation's job); the verdict is recorded in the ledger.
"""

from __future__ import annotations

import difflib
import os
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from datetime import date
from enum import StrEnum
from math import fsum
from pathlib import Path
from statistics import fmean
from typing import Any, Literal

from core.records import ResultRecord
from core.regularfile import NotReadableError, read_regular_bytes
from replay.errors import ReplayError
from replay.memory.files import BINDING, LC_FILE, LOG_FILE, Rule, Section, load_memory, section_of
from replay.memory.inject import ConditionError, MemoryCondition, Workspace, WorkspaceMinus, parse_condition
from replay.memory.ledger import Ledger, RuleRef
from replay.stats import PairedComparison, paired_comparison, rejects, share_difference

HARMFUL = "eval-gate:harmful"
HELPFUL = "eval-gate:helpful"
INCONCLUSIVE = "eval-gate:inconclusive"


class LessonError(ReplayError, ValueError):
    """Lesson-gate input or memory files that cannot be judged or edited."""


class LessonVerdict(StrEnum):
    PROMOTE = "promote"
    EVICT = "evict"
    HOLD = "hold"


@dataclass(frozen=True)
class AblationPolicy:
    """Thresholds of the causal test. Points are 100·(with − without)/pairs."""

    alpha: float = 0.05
    promote_margin_points: float = 0.0
    evict_margin_points: float = 0.0
    confidence: float = 0.95


@dataclass(frozen=True)
class LiftPolicy:
    """Thresholds of leave-one-out lift (000). Scores and margins are on the outcome's scale."""

    min_trials: int = 2
    promote_margin: float = 0.05
    evict_margin: float = 0.05
    # A rule still held after this many trials gets a forced verdict (000's deadlock escape).
    max_trials: int | None = None


@dataclass(frozen=True)
class Trial:
    """One arm × decision outcome, reduced to what the gate needs."""

    model: str
    memory: str
    decision_id: str
    workspace: str
    acceptable: bool
    """See `acceptable`."""
    rule_ids: frozenset[str]


@dataclass(frozen=True)
class LessonOutcome:
    """One scored unit for leave-one-out: a run, or an arm × decision."""

    key: str
    workspace: str
    score: float
    rule_ids: frozenset[str]


@dataclass(frozen=True)
class AblationEvidence:
    """`workspace-minus:<id>` is the baseline, `workspace` the candidate: a win is a pair only
    the full memory got right, so positive points mean the rule helps."""

    model: str
    comparison: PairedComparison

    def summary(self) -> str:
        c = self.comparison
        return (
            f"ablation on {c.n} paired decisions: {c.wins} wins / {c.losses} losses, "
            f"{c.points:+.1f} points, p={c.p_value:.4g}, CI [{c.ci_low:+.1f}, {c.ci_high:+.1f}]"
        )


@dataclass(frozen=True)
class LiftEvidence:
    carried: int
    absent: int
    carried_mean: float
    absent_mean: float | None
    lift: float | None

    def summary(self) -> str:
        if self.absent_mean is None or self.lift is None:
            return f"leave-one-out: mean {self.carried_mean:.3f} over {self.carried} trials, never absent"
        return (
            f"leave-one-out: mean {self.carried_mean:.3f} over {self.carried} trials with it "
            f"vs {self.absent_mean:.3f} over {self.absent} without, lift {self.lift:+.3f}"
        )


@dataclass(frozen=True)
class RuleVerdict:
    rule_id: str
    workspace: str
    verdict: LessonVerdict
    method: Literal["ablation", "leave-one-out"]
    reason: str
    evidence: AblationEvidence | LiftEvidence
    forced: bool = False
    # (workspace, rule id) of every rule the judged trials carried: a dispute of any taints this verdict.
    depends_on: frozenset[tuple[str, str]] = frozenset()

    def summary(self) -> str:
        forced = " (forced at max trials)" if self.forced else ""
        return (f"{self.workspace} {self.rule_id}: {self.verdict.value}{forced}, {self.reason}; "
                f"{self.evidence.summary()}")


# ── inputs ───────────────────────────────────────────────────────────────────


def acceptable(record: ResultRecord) -> bool | None:
    """Whether a result's answer is acceptable, by everything the scoring knows of its decision.

    Where the decision has a target: joint correctness. Else, on a known failure: the failed
    action not repeated at the shape level (same tool and key set), the finest level the scoring
    defines on every known failure (an exact repeat is unknown where the failed arguments were
    withheld), and the level of key-set scoring, so that retrying the failed tool with a corrected
    key set, the recovery a known failure asks for, is not a repeat (a tool repeat would call it
    one). None: the scoring says nothing of the answer.
    """
    score = record.score
    if score.joint_correct is not None:
        return score.joint_correct
    return None if score.shape_repeat is None else not score.shape_repeat


def trials_from_results(records: Iterable[ResultRecord]) -> list[Trial]:
    """Trials from result records, each judged by `acceptable`; results it cannot judge are skipped."""
    return [
        Trial(r.model, r.memory, r.decision_id, r.workspace, ok, frozenset(r.injected_rule_ids))
        for r in records
        if (ok := acceptable(r)) is not None
    ]


def outcomes_from_trials(trials: Iterable[Trial]) -> list[LessonOutcome]:
    """Trials as the lift analysis' outcomes (one per model, memory and decision), scored on the same
    `acceptable` as the causal test, so the two methods are compared on the same outcome."""
    return [LessonOutcome(f"{t.model}|{t.memory}|{t.decision_id}", t.workspace, float(t.acceptable), t.rule_ids)
            for t in trials]


# ── causal: workspace vs workspace-minus:<id> ────────────────────────────────


def causal_verdicts(trials: Iterable[Trial], policy: AblationPolicy = AblationPolicy()) -> list[RuleVerdict]:
    """One verdict per (model, workspace, rule) that has paired ablation decisions."""
    trials = list(trials)
    full: dict[tuple[str, str], Trial] = {}
    for trial in trials:
        if isinstance(_condition(trial), Workspace):
            _unique(full, (trial.model, trial.decision_id), trial)
    # (baseline, candidate) = (without the rule, with it), as `replay.stats` pairs them.
    pairs: dict[tuple[str, str, str], list[tuple[bool, bool]]] = defaultdict(list)
    used: dict[tuple[str, str, str], set[str]] = defaultdict(set)
    seen: dict[tuple[str, str, str], Trial] = {}
    for trial in trials:
        condition = _condition(trial)
        if not isinstance(condition, WorkspaceMinus):
            continue
        _unique(seen, (trial.model, trial.memory, trial.decision_id), trial)
        if condition.rule_id in trial.rule_ids:
            raise LessonError(f"decision {trial.decision_id}: arm {trial.memory} carried the rule it should leave out")
        with_rule = full.get((trial.model, trial.decision_id))
        if with_rule is not None and condition.rule_id in with_rule.rule_ids:
            key = (trial.model, trial.workspace, condition.rule_id)
            pairs[key].append((trial.acceptable, with_rule.acceptable))
            used[key] |= with_rule.rule_ids | trial.rule_ids
    return [
        replace(_ablation_verdict(model, ws, rule_id, found, policy),
                depends_on=frozenset((ws, r) for r in used[(model, ws, rule_id)]))
        for (model, ws, rule_id), found in sorted(pairs.items())
    ]


def _ablation_verdict(
    model: str, workspace: str, rule_id: str, pairs: Sequence[tuple[bool, bool]], policy: AblationPolicy
) -> RuleVerdict:
    comparison = paired_comparison(pairs, policy.confidence)
    points = comparison.points or 0.0
    significant = rejects(comparison.p_value, policy.alpha)
    if significant and points > 0 and points >= policy.promote_margin_points:
        verdict, reason = LessonVerdict.PROMOTE, HELPFUL
    elif significant and points < 0 and -points >= policy.evict_margin_points:
        verdict, reason = LessonVerdict.EVICT, HARMFUL
    else:
        verdict, reason = LessonVerdict.HOLD, "no significant effect beyond the margin"
    return RuleVerdict(rule_id, workspace, verdict, "ablation", reason, AblationEvidence(model, comparison))


def _unique(index: dict[Any, Trial], key: tuple[str, ...], trial: Trial) -> None:
    """Pairing needs one trial per arm kind: two would make the pairs ambiguous."""
    if key in index:
        raise LessonError(
            f"decision {trial.decision_id}: two {trial.memory!r} trials for model {trial.model}; "
            "judge each pair of arms separately"
        )
    index[key] = trial


def _condition(trial: Trial) -> MemoryCondition:
    try:
        return parse_condition(trial.memory)
    except ConditionError as exc:
        raise LessonError(f"decision {trial.decision_id}: {exc}") from exc


# ── correlational: leave-one-out lift ────────────────────────────────────────


def lift_verdicts(outcomes: Iterable[LessonOutcome], policy: LiftPolicy = LiftPolicy()) -> list[RuleVerdict]:
    """One verdict per (workspace, rule) carried by any outcome; rule-less outcomes are not recorded."""
    recorded = [o for o in outcomes if o.rule_ids]
    rules = frozenset((o.workspace, rule_id) for o in recorded for rule_id in o.rule_ids)
    verdicts = []
    for workspace, rule_id in sorted(rules):
        carried = [o.score for o in recorded if o.workspace == workspace and rule_id in o.rule_ids]
        absent = [o.score for o in recorded if not (o.workspace == workspace and rule_id in o.rule_ids)]
        # Every recorded outcome is in the baseline, so every rule they carried is a dependency.
        verdicts.append(replace(_lift_verdict(workspace, rule_id, carried, absent, policy), depends_on=rules))
    return verdicts


def _lift_verdict(workspace: str, rule_id: str, carried: list[float], absent: list[float],
                  policy: LiftPolicy) -> RuleVerdict:
    lift = _lift(carried, absent) if absent else None
    evidence = LiftEvidence(len(carried), len(absent), fmean(carried), fmean(absent) if absent else None, lift)
    verdict, reason = LessonVerdict.HOLD, f"fewer than {policy.min_trials} trials"
    if len(carried) >= policy.min_trials:
        if lift is None:
            reason = "never absent: no leave-one-out baseline"
        elif lift >= policy.promote_margin:
            verdict, reason = LessonVerdict.PROMOTE, HELPFUL
        elif lift <= -policy.evict_margin:
            verdict, reason = LessonVerdict.EVICT, HARMFUL
        else:
            reason = "lift within the margins"
    forced = verdict is LessonVerdict.HOLD and policy.max_trials is not None and len(carried) >= policy.max_trials
    if forced:
        # Holding forever starves the queue (000); a rule never shown to help loses its slot.
        helped = lift is not None and lift > 0
        verdict, reason = (LessonVerdict.PROMOTE, HELPFUL) if helped else (LessonVerdict.EVICT, INCONCLUSIVE)
    return RuleVerdict(rule_id, workspace, verdict, "leave-one-out", reason, evidence, forced)


def _lift(carried: list[float], absent: list[float]) -> float:
    """mean(carried) − mean(absent) from the sums (`share_difference`): for 0/1 scores a lift of exactly a margin
    meets it (10/20 − 9/20 is 0.04999999999999999 as fmean − fmean)."""
    return share_difference(fsum(carried), len(carried), fsum(absent), len(absent))


def lesson_verdicts(
    trials: Iterable[Trial], ablation: AblationPolicy = AblationPolicy(), lift: LiftPolicy = LiftPolicy()
) -> list[RuleVerdict]:
    """Causal verdicts where a rule has ablation pairs; leave-one-out for the other rules.

    Leave-one-out uses only the arms that are not ablations, so an arm built to lack a rule
    does not stand in for "runs that happened not to carry it".
    """
    trials = list(trials)
    causal = causal_verdicts(trials, ablation)
    judged = {(v.workspace, v.rule_id) for v in causal}
    return causal + [v for v in leave_one_out_verdicts(trials, lift) if (v.workspace, v.rule_id) not in judged]


def leave_one_out_verdicts(trials: Iterable[Trial], lift: LiftPolicy = LiftPolicy()) -> list[RuleVerdict]:
    """Leave-one-out on every rule, from the arms that are not ablations: what 000's gate would
    have said of the same results (an arm built to lack a rule does not stand in for "runs that
    happened not to carry it")."""
    plain = [t for t in trials if not isinstance(_condition(t), WorkspaceMinus)]
    return lift_verdicts(outcomes_from_trials(plain), lift)


def record_verdicts(ledger: Ledger, run_id: str, verdicts: Iterable[RuleVerdict]) -> list[int]:
    """Record lesson verdicts (kind "lesson", subject "<workspace>/<rule id>[@model]") with their rules."""
    ids = []
    for v in verdicts:
        model = f"@{v.evidence.model}" if isinstance(v.evidence, AblationEvidence) else ""
        evidence = {"method": v.method, "reason": v.reason, "forced": v.forced, "summary": v.summary(),
                    **asdict(v.evidence)}
        rules = {RuleRef(ws, rule_id) for ws, rule_id in v.depends_on} | {RuleRef(v.workspace, v.rule_id)}
        ids.append(ledger.record_verdict(run_id, "lesson", f"{v.workspace}/{v.rule_id}{model}", v.verdict.value,
                                         evidence, rules))
    return ids


@dataclass(frozen=True)
class LessonPlan:
    """What `worker-replay lessons propose` shows: the verdicts and, per workspace, the diff."""

    verdicts: tuple[RuleVerdict, ...]
    diffs: dict[str, str]


def plan_lessons(
    records: Iterable[ResultRecord], memory_dirs: Mapping[str, Path], today: date,
    ablation: AblationPolicy = AblationPolicy(), lift: LiftPolicy = LiftPolicy(),
) -> LessonPlan:
    """Verdicts of a run's results and the proposed edits of each workspace that has evictions.

    `memory_dirs` maps a workspace name to its memory directory.
    """
    verdicts = tuple(lesson_verdicts(trials_from_results(records), ablation, lift))
    diffs = {}
    for workspace, own in _by_workspace(verdicts).items():
        if any(v.verdict is LessonVerdict.EVICT for v in own):
            diff = propose_edits(own, _memory_dir(memory_dirs, workspace), today)
            if diff:
                diffs[workspace] = diff
    return LessonPlan(verdicts, diffs)


def apply_plan(plan: LessonPlan, memory_dirs: Mapping[str, Path], today: date) -> list[Path]:
    """Apply a plan's edits (the `--apply` flag); returns the files changed."""
    changed = []
    for workspace, own in _by_workspace(plan.verdicts).items():
        if workspace in plan.diffs:
            changed += apply_edits(own, _memory_dir(memory_dirs, workspace), today)
    return changed


def _by_workspace(verdicts: Iterable[RuleVerdict]) -> dict[str, list[RuleVerdict]]:
    grouped: dict[str, list[RuleVerdict]] = defaultdict(list)
    for verdict in verdicts:
        grouped[verdict.workspace].append(verdict)
    return dict(grouped)


def _memory_dir(memory_dirs: Mapping[str, Path], workspace: str) -> Path:
    try:
        return Path(memory_dirs[workspace])
    except KeyError as exc:
        raise LessonError(f"no memory directory known for workspace {workspace!r}") from exc


# ── soft eviction: proposed edits of the workspace files ─────────────────────


def propose_edits(verdicts: Iterable[RuleVerdict], memory_dir: str | Path, today: date) -> str:
    """A unified diff retiring each evicted rule of this workspace; empty when nothing to do.

    `verdicts` are this workspace's; ids not from the rules file (`rule:<hash>`) are ignored.
    """
    root = Path(memory_dir)
    chunks = []
    for path, (old, new) in _planned_edits(verdicts, root, today).items():
        rel = path.relative_to(root).as_posix()
        fromfile = f"a/{rel}" if old is not None else "/dev/null"
        chunks.append("".join(difflib.unified_diff(_split(old or ""), _split(new), fromfile, f"b/{rel}")))
    return "".join(chunks)


def apply_edits(verdicts: Iterable[RuleVerdict], memory_dir: str | Path, today: date) -> list[Path]:
    """Write the edits `propose_edits` shows; returns the files changed."""
    changed = []
    for path, (_, new) in _planned_edits(verdicts, Path(memory_dir), today).items():
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.tmp")
        tmp.write_bytes(new.encode("utf-8"))
        os.replace(tmp, path)
        changed.append(path)
    return changed


def _planned_edits(verdicts: Iterable[RuleVerdict], root: Path, today: date) -> dict[Path, tuple[str | None, str]]:
    memory = load_memory(root)
    retired = memory.retired_ids()
    evictions: dict[str, RuleVerdict] = {}
    for verdict in verdicts:
        if verdict.verdict is LessonVerdict.EVICT and verdict.rule_id.startswith("lc:"):
            evictions.setdefault(verdict.rule_id, verdict)
    moving: list[Rule] = []
    log_lines: list[str] = []
    for rule_id, verdict in evictions.items():
        in_force = [r for r in memory.find(rule_id) if r.section in BINDING]
        if not in_force:
            if rule_id in retired:
                continue
            raise LessonError(f"{rule_id} is not a rule in force in {root / LC_FILE}; are these verdicts for {root}?")
        moving += in_force
        if rule_id not in {t.id for t in memory.retirements}:
            log_lines.append(
                f"- {rule_id}: retired ({verdict.reason}; {verdict.evidence.summary()}), {today.isoformat()}")
    if not moving:
        return {}
    lc_path, log_path = root / LC_FILE, root / LOG_FILE
    lc_old = _read_for_edit(lc_path)
    edits: dict[Path, tuple[str | None, str]] = {lc_path: (lc_old, _move_to_retired(lc_old, moving))}
    if log_lines:
        log_old = _read_for_edit(log_path) if log_path.exists() else None
        edits[log_path] = (log_old, _add_to_retired(log_old or "", [], log_lines))
    return edits


def _move_to_retired(text: str, rules: Sequence[Rule]) -> str:
    lines = _split(text)
    taken = {n for r in rules for n in range(r.line, r.end_line + 1)}
    moved = [lines[n - 1] for n in sorted(taken)]
    kept = [line for n, line in enumerate(lines, start=1) if n not in taken]
    return _add_to_retired("".join(kept), moved, [])


def _add_to_retired(text: str, raw_lines: list[str], new_lines: list[str]) -> str:
    """Append lines at the end of the `## Retired` section, creating it at the end if absent."""
    newline = "\r\n" if "\r\n" in text else "\n"
    lines = _split(text)
    if lines and _bare(lines[-1]) == lines[-1]:
        lines[-1] += newline
    added = [line if _bare(line) != line else line + newline for line in raw_lines]
    added += [line + newline for line in new_lines]
    start = next((i for i, line in enumerate(lines) if section_of(_bare(line).rstrip()) is Section.RETIRED), None)
    if start is None:
        spacer = [newline] if lines and lines[-1].strip() else []
        return "".join([*lines, *spacer, f"## Retired{newline}", *added])
    end = next((i for i in range(start + 1, len(lines)) if section_of(_bare(lines[i]).rstrip()) is not False),
               len(lines))
    while end > start + 1 and not lines[end - 1].strip():
        end -= 1
    return "".join([*lines[:end], *added, *lines[end:]])


def _read_for_edit(path: Path) -> str:
    """The text of a rules file or corrections log to edit: a regular file, never a link, FIFO or device."""
    if not os.path.lexists(path):
        raise LessonError(f"{path}: not found")
    try:
        return read_regular_bytes(path, follow_links=False).decode("utf-8")
    except NotReadableError as exc:
        raise LessonError(f"{exc}; not edited") from exc
    except UnicodeDecodeError as exc:
        raise LessonError(f"{path}: not valid UTF-8 (byte {exc.start}); fix it before editing") from exc


def _split(text: str) -> list[str]:
    """Lines with their endings, split exactly as `memory` numbers them."""
    return text.splitlines(keepends=True)


def _bare(line: str) -> str:
    """A line without its ending."""
    return line.splitlines()[0] if line else line
