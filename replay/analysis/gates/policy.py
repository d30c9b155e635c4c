"""Policies and verdicts: loading a TOML policy (every problem a `GateError` naming the file and the
condition), planning it (what each condition reads, and whether it is there), evaluating it into a
`Verdict`, and writing, reading and formatting verdict files.

A verdict that rests on results which carried a disputed rule never passes, whatever its conditions say
(004): it names the rules and when they were disputed, and passes again only once they are restored
(`worker-replay undispute`) or the arms are re-run without them."""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from core.records import BUILTIN_STRATA, Decision, Strict
from core.tomlfile import toml_problem
from replay.analysis.compare import ALL_POSITIVE, Comparison, NoiseFloor, Tainted, compare
from replay.analysis.gates.conditions import CONDITION_KINDS, AnyCondition, Condition
from replay.analysis.gates.context import GateContext, GateError, MissingEvidenceError, Status, not_run
from replay.analysis.gates.inputs import RUN_RESULTS, Read, SuiteFeed, condition_reads, run_read, suite_feed
from replay.analysis.training_lineage import ArmContamination, check_run
from replay.errors import ReplayError
from replay.memory.ledger import Dispute
from replay.run.directory import load_results, read_run_json
from replay.suite import load_suite


class GatePolicy(Strict):
    """A gate written before the run it judges."""

    name: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
    version: str
    description: str = ""
    source: str = ""
    extra_strata: list[str] = Field(default_factory=list)
    conditions: list[Condition] = Field(min_length=1)

    model_config = ConfigDict(extra="forbid", coerce_numbers_to_str=True)

    @model_validator(mode="after")
    def _check(self) -> GatePolicy:
        ids = [c.id for c in self.conditions]
        duplicates = sorted({i for i in ids if ids.count(i) > 1})
        if duplicates:
            raise ValueError(f"condition ids must be unique: {', '.join(duplicates)}")
        strata = {*BUILTIN_STRATA, *self.extra_strata}
        for condition in self.conditions:
            for name, value in condition.named_strata().items():
                allowed = strata | ({ALL_POSITIVE} if "scope" in name else set())
                if value not in allowed:
                    raise ValueError(
                        f"condition {condition.id!r}: unknown stratum {value!r} in {name} "
                        f"(known: {', '.join(sorted(allowed))}; a suite's own strata go in extra_strata)"
                    )
        return self


def load_policy(path: str | Path) -> GatePolicy:
    """Read and validate a policy; every problem is a GateError naming the file and condition."""
    return _read_policy(Path(path))[0]


def _read_policy(path: Path) -> tuple[GatePolicy, str]:
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise GateError(f"{path}: cannot read policy: {exc.strerror}") from exc
    data, problem = toml_problem(raw)
    if data is None:
        raise GateError(f"{path}: {problem}")
    try:
        return GatePolicy.model_validate(data), hashlib.sha256(raw).hexdigest()
    except ValidationError as exc:
        problems = "\n".join(f"  {_policy_problem(error, data)}" for error in exc.errors())
        raise GateError(f"{path}: invalid gate policy:\n{problems}") from exc


def _policy_problem(error: Mapping[str, Any], data: Mapping[str, Any]) -> str:
    loc = list(error["loc"])
    kind = error["type"]
    if len(loc) >= 2 and loc[0] == "conditions" and isinstance(loc[1], int):
        raw = data["conditions"][loc[1]]  # pydantic's loc names an item of the list it validated
        name = raw.get("id", f"#{loc[1] + 1}") if isinstance(raw, dict) else f"#{loc[1] + 1}"
        where = f"condition {name!r}"
        if kind == "union_tag_invalid":
            return f"{where}: unknown kind {raw.get('kind')!r} (known kinds: {', '.join(CONDITION_KINDS)})"
        if kind == "union_tag_not_found":
            return f"{where}: missing kind (known kinds: {', '.join(CONDITION_KINDS)})"
        param = ".".join(str(p) for p in loc[3:])
        where += f" (kind {loc[2]})" if len(loc) > 2 else ""
        if kind == "extra_forbidden":
            return f"{where}: unknown parameter {param!r}"
        if kind == "missing":
            return f"{where}: missing parameter {param!r}"
        return f"{where}: {param}: {error['msg']}" if param else f"{where}: {error['msg']}"
    if kind == "extra_forbidden":
        return f"unknown policy field {'.'.join(map(str, loc))!r}"
    field_name = ".".join(map(str, loc))
    return f"{field_name}: {error['msg']}" if field_name else error["msg"].removeprefix("Value error, ")


# ── verdicts ────────────────────────────────────────────────────────────────


class ConditionResult(BaseModel):
    id: str
    kind: str
    description: str
    status: Status
    reason: str
    evidence: dict[str, Any] = {}
    tainted_rule_ids: list[str] = []
    reads: list[Read] = []
    """For a condition not run: what it reads and whether that was there (what a user must supply)."""


class DisputedRule(BaseModel):
    """A disputed rule a verdict rests on, as the ledger held it when the verdict was reached."""

    rule_id: str
    workspace: str | None = None
    """None: disputed in every workspace."""
    reason: str
    disputed_at: datetime


class Verdict(BaseModel):
    """Every condition's status and evidence; `passed` only if all passed and no disputed rule is among those
    the judged results carried (`tainted_rule_ids`, with `disputed` saying when and why)."""

    policy: str
    policy_version: str
    policy_path: str | None = None
    policy_sha256: str | None = None
    run_dir: str | None = None
    baseline: str
    candidate: str
    passed: bool
    conditions: list[ConditionResult]
    evidence_paths: dict[str, str] = {}
    unused_evidence: list[str] = []
    comparisons_made: int
    tainted_rule_ids: list[str] = []
    disputed: list[DisputedRule] = []
    noise_floor: NoiseFloor | None = None
    """The comparison's A/A discordance, where the run has a replicate arm. Evidence only: a condition
    judges it only where the policy says so."""
    contamination: ArmContamination | None = None
    """The candidate's training lineage against the suite: the decisions it reaches were left out of the
    comparison (None: not looked for, as when a comparison is evaluated without its run)."""
    evaluated_at: datetime

    def status(self, condition_id: str) -> Status:
        for condition in self.conditions:
            if condition.id == condition_id:
                return condition.status
        raise KeyError(f"no condition {condition_id!r} in policy {self.policy!r}")

    def counts(self) -> dict[Status, int]:
        return {s: sum(1 for c in self.conditions if c.status is s) for s in Status}


def evaluate(
    policy: GatePolicy,
    comparison: Comparison,
    evidence: Mapping[str, str | Path] | None = None,
    tainted: Tainted = (),
    *,
    disputes: Iterable[Dispute] = (),
    run_dir: str | Path | None = None,
    policy_path: str | Path | None = None,
    policy_sha256: str | None = None,
    contamination: ArmContamination | None = None,
    now: Callable[[], datetime] = lambda: datetime.now(UTC),
) -> Verdict:
    """Evaluate every condition of `policy` on a comparison (and the evidence files given). `disputes` (the
    ledger's) taint like `tainted` and date the verdict's disputed rules; the comparison must have been made with
    them too (`evaluate_gate` does), and without the decisions `contamination` names."""
    paths = {key: Path(value) for key, value in (evidence or {}).items()}
    disputes = tuple(disputes)
    ctx = GateContext(comparison, paths, (*tainted, *(d.ref for d in disputes)),
                      None if run_dir is None else Path(run_dir))
    run = Read(key=None, made_by=RUN_RESULTS.made_by, path=None if run_dir is None else str(run_dir), present=True)
    results = [_with_noise(_left_out(_evaluate_one(condition, ctx, run), contamination), comparison.noise)
               for condition in policy.conditions]
    used = {key for condition in policy.conditions for key in condition.evidence_keys()}
    tainted_ids = sorted({*comparison.tainted_rule_ids, *(r for c in results for r in c.tainted_rule_ids)})
    return Verdict(
        policy=policy.name,
        policy_version=policy.version,
        policy_path=None if policy_path is None else str(policy_path),
        policy_sha256=policy_sha256,
        run_dir=None if run_dir is None else str(run_dir),
        baseline=comparison.baseline,
        candidate=comparison.candidate,
        passed=all(r.status is Status.PASS for r in results) and not tainted_ids,
        conditions=results,
        evidence_paths={key: str(value) for key, value in paths.items()},
        unused_evidence=sorted(paths.keys() - used),
        comparisons_made=comparison.comparisons_made,
        tainted_rule_ids=tainted_ids,
        disputed=[DisputedRule(rule_id=d.rule_id, workspace=d.workspace, reason=d.reason, disputed_at=d.disputed_at)
                  for d in disputes if d.rule_id in tainted_ids],
        noise_floor=comparison.noise,
        contamination=contamination,
        evaluated_at=now(),
    )


def _left_out(result: ConditionResult, contamination: ArmContamination | None) -> ConditionResult:
    """A condition not run where contaminated decisions were left out says so: too few clean ones remained."""
    if result.status is not Status.NOT_RUN or contamination is None or not contamination.contaminated:
        return result
    return result.model_copy(update={"reason": f"{result.reason} ({len(contamination.contaminated)} decision(s) the "
                                               "candidate's training data reaches were left out of the comparison)"})


def _evaluate_one(condition: AnyCondition, ctx: GateContext, run: Read) -> ConditionResult:
    try:
        outcome = condition.evaluate(ctx)
    except MissingEvidenceError as exc:
        outcome = not_run(str(exc))
    not_ran = outcome.status is Status.NOT_RUN
    return ConditionResult(
        id=condition.id,
        kind=condition.kind,
        description=condition.description,
        status=outcome.status,
        reason=outcome.reason,
        evidence=outcome.evidence,
        tainted_rule_ids=list(outcome.tainted_rule_ids),
        reads=condition_reads(condition, run, ctx.evidence, ctx.baseline, ctx.candidate) if not_ran else [],
    )


def _with_noise(result: ConditionResult, noise: NoiseFloor | None) -> ConditionResult:
    """A condition judged on a correctness row carries that scope's A/A discordance beside its own pairs."""
    scope, measure = result.evidence.get("scope"), result.evidence.get("measure")
    if noise is None or not isinstance(scope, str) or measure not in ("joint", "tool"):
        return result
    aa = noise.row("joint" if measure == "joint" else "tool", scope)
    if aa is None:
        return result
    floor = {"arm": noise.arm, "replicate": noise.replicate, "decisions": aa.stats.n, "discordant": aa.discordant,
             "wins": aa.stats.wins, "losses": aa.stats.losses}
    return result.model_copy(update={"evidence": {**result.evidence, "noise_floor": floor}})


def evaluate_gate(
    policy_path: str | Path,
    run_dir: str | Path,
    baseline: str,
    candidate: str,
    evidence: Mapping[str, str | Path] | None = None,
    tainted: Tainted = (),
    disputes: Iterable[Dispute] = (),
) -> Verdict:
    """Load the policy and the run's results, compare the two arms on the decisions the candidate's training data
    does not reach (`lineage.check_run`), and evaluate the gate (`disputes`: the ledger's, which keep it from
    passing where the arms' results carried one)."""
    policy, sha256 = _read_policy(Path(policy_path))
    disputes = tuple(disputes)
    results = load_results(run_dir)
    [contamination] = check_run(Path(run_dir), [candidate])
    comparison = compare(results, baseline, candidate, tainted=(*tainted, *(d.ref for d in disputes)),
                         excluded=contamination.excluded)
    return evaluate(policy, comparison, evidence, tainted, disputes=disputes, run_dir=run_dir,
                    policy_path=policy_path, policy_sha256=sha256, contamination=contamination)


class ConditionPlan(BaseModel):
    id: str
    kind: str
    reads: list[Read]
    suite: SuiteFeed | None = None
    """What it needs of the suite's decisions and how many the suite holds; None when it reads none, or no
    suite was read."""


class GatePlan(BaseModel):
    """Before a run: what each condition of a policy will read, and whether it is there now."""

    policy: str
    policy_version: str
    run_dir: str | None
    conditions: list[ConditionPlan]
    unused_evidence: list[str]
    suite: str | None = None
    """The suite read (`--suite`, else the one RUN_DIR's run.json names); None: none was."""
    suite_problem: str = ""
    """Why no suite was read."""


def plan_gate(policy_path: str | Path, run_dir: str | Path | None = None,
              evidence: Mapping[str, str | Path] | None = None, baseline: str | None = None,
              candidate: str | None = None, suite: str | Path | None = None) -> GatePlan:
    """Each condition's inputs: its evidence keys (given and readable?) or the run's own results (there,
    with the arms named?), and what it needs of the suite's decisions (`suite`, else the suite RUN_DIR's
    run.json names), so a user sees which conditions would be `not_run` before running anything."""
    policy = load_policy(policy_path)
    paths = {key: Path(value) for key, value in (evidence or {}).items()}
    run = run_read(None if run_dir is None else Path(run_dir), baseline, candidate)
    used = {key for condition in policy.conditions for key in condition.evidence_keys()}
    suite_path, decisions, problem = _plan_suite(None if run_dir is None else Path(run_dir),
                                                 None if suite is None else Path(suite))
    return GatePlan(
        policy=policy.name, policy_version=policy.version, run_dir=None if run_dir is None else str(run_dir),
        conditions=[ConditionPlan(id=c.id, kind=c.kind, reads=condition_reads(c, run, paths, baseline, candidate),
                                  suite=None if decisions is None else suite_feed(c, decisions))
                    for c in policy.conditions],
        unused_evidence=sorted(paths.keys() - used), suite=None if suite_path is None else str(suite_path),
        suite_problem=problem)


def _plan_suite(run_dir: Path | None, suite: Path | None) -> tuple[Path | None, list[Decision] | None, str]:
    """(the suite's path, its decisions, why none were read): `suite` when given, else RUN_DIR's run.json's."""
    if suite is None and run_dir is not None:
        named = read_run_json(run_dir).get("suite")
        path = named.get("path") if isinstance(named, dict) else None
        suite = None if path is None else Path(path)
        if suite is None:
            return None, None, f"{run_dir} names no suite (no run.json yet); give --suite DIR"
    if suite is None:
        return None, None, "no RUN_DIR or --suite given"
    try:
        return suite, list(load_suite(suite).decisions), ""
    except (ReplayError, OSError) as exc:
        return suite, None, str(exc).splitlines()[0]


def format_plan(plan: GatePlan) -> str:
    """One line per input of each condition, then what is missing and what a corpus alone can answer."""
    lines = [f"gate {plan.policy} v{plan.policy_version}: what each condition reads, and whether it is there now"]
    rows = [("CONDITION", "KIND", "THERE", "READS")]
    for c in plan.conditions:
        rows += [(c.id if i == 0 else "", c.kind if i == 0 else "", read.state(),
                  f"{read.what()}, from {read.made_by}" + (f" — {read.problem}" if read.problem else ""))
                 for i, read in enumerate(c.reads)]
    widths = [max(len(row[column]) for row in rows) for column in range(3)]
    lines += ["  " + "  ".join([*(cell.ljust(w) for cell, w in zip(row, widths, strict=False)), row[3]])
              for row in rows]
    lines += _suite_lines(plan)
    missing = [c.id for c in plan.conditions if any(r.present is False for r in c.reads)]
    elsewhere = [c.id for c in plan.conditions if any(r.key is not None for r in c.reads)]
    if plan.unused_evidence:
        lines.append(f"evidence given but read by no condition: {', '.join(plan.unused_evidence)}")
    if missing:
        lines.append(f"missing now: {', '.join(missing)}; the gate cannot pass without them "
                     "(not_run blocks like a fail)")
    if elsewhere:
        lines.append(f"{len(elsewhere)} condition(s) need evidence a replay run of a corpus does not produce "
                     f"({', '.join(elsewhere)}); configs/gates/corpus-only.toml is the question a corpus alone "
                     "can answer")
    return "\n".join(lines)


def _suite_lines(plan: GatePlan) -> list[str]:
    """Per condition judged from the run's results, what it needs of the suite and whether the suite holds it;
    then the conditions the suite cannot feed, which fix the verdict before any candidate runs."""
    if plan.suite is None or plan.suite_problem:
        where = f" {plan.suite}" if plan.suite is not None else ""
        return [f"suite{where} not read ({plan.suite_problem}): whether it can feed each condition is not checked"]
    lines = [f"suite {plan.suite}: what each condition judged from the run's results is scored on"]
    width = max(len(c.id) for c in plan.conditions)
    lines += [f"  {c.id:<{width}}  {c.suite.text()}" for c in plan.conditions if c.suite is not None]
    starved = [f"{c.id} (it holds {c.suite.held} {c.suite.needs})" for c in plan.conditions
               if c.suite is not None and not c.suite.can_pass]
    if starved:
        lines.append(f"cannot pass on this suite, whatever the candidate does: {'; '.join(starved)}; build a suite "
                     "that holds them (`worker-replay suite stats` counts a suite's strata) or choose a policy "
                     "that does not ask for them")
    return lines


def noise_line(noise: NoiseFloor) -> str:
    """The noise floor a verdict was reached beside (all positives, joint)."""
    aa = noise.row("joint", ALL_POSITIVE)
    counted = "no held-out positives" if aa is None else f"{aa.discordant} of {aa.stats.n} held-out positives"
    return (f"noise floor: {counted} change with nothing changed ({noise.replicate} replicates {noise.arm}); "
            "no condition of this policy judges it")


def _disputed_text(rule_id: str, dispute: DisputedRule | None) -> str:
    if dispute is None:
        return rule_id
    scope = f" in {dispute.workspace}" if dispute.workspace else ""
    return f"{rule_id} (disputed{scope} {dispute.disputed_at.astimezone(UTC):%Y-%m-%d %H:%M} UTC: {dispute.reason})"


STATUS_LABEL = {Status.PASS: "pass", Status.FAIL: "FAIL", Status.NOT_RUN: "not run"}


def format_verdict(verdict: Verdict) -> str:
    """The verdict as text: the decision, then one line per condition with its evidence."""
    counts = verdict.counts()
    decision = "PASSED" if verdict.passed else "REJECTED"
    disputed = f"; rests on disputed rule(s) {', '.join(verdict.tainted_rule_ids)}" if verdict.tainted_rule_ids else ""
    lines = [
        f"gate {verdict.policy} v{verdict.policy_version}: candidate {verdict.candidate!r} against "
        f"{verdict.baseline!r}: {decision} ({counts[Status.PASS]} pass, {counts[Status.FAIL]} fail, "
        f"{counts[Status.NOT_RUN]} not run{disputed})",
    ]
    width = max(len(c.id) for c in verdict.conditions)
    for c in verdict.conditions:
        mark = " †" if c.tainted_rule_ids else ""
        lines.append(f"  [{STATUS_LABEL[c.status]:>7}] {c.id:<{width}}  {c.description}{mark}")
        lines.append(f"            {'':<{width}}  {c.reason}")
        lines += [f"            {'':<{width}}  reads {read.text()}" for read in c.reads]
    if verdict.unused_evidence:
        lines.append(f"evidence given but used by no condition: {', '.join(verdict.unused_evidence)}")
    if verdict.tainted_rule_ids:
        dated = {d.rule_id: d for d in verdict.disputed}
        rules = ", ".join(_disputed_text(rule_id, dated.get(rule_id)) for rule_id in verdict.tainted_rule_ids)
        lines.append(f"† cannot pass: rests on results that carried disputed rule(s) {rules}; re-run the arms "
                     "without them, or restore them after review (`worker-replay undispute`)")
    if verdict.contamination is not None:
        lines.append(verdict.contamination.line() + ("; left out of the comparison"
                                                     if verdict.contamination.contaminated else ""))
    if verdict.noise_floor is not None:
        lines.append(noise_line(verdict.noise_floor))
    lines.append(f"{verdict.comparisons_made} paired tests in the comparison, uncorrected for multiple comparisons.")
    return "\n".join(lines)
