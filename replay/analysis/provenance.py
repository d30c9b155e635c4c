"""What `compare`, `report` and `gate` (and the demo and the loop, which judge the same way) record in the outcome
ledger (DESIGN §5): the run they judged, under its `run_id` with its directory; each comparison with the rules its
two arms' results carried; each gate verdict with its policy, its outcome and those rules. So `trace lc:x` finds
everything a rule reached, and `dispute lc:x` marks it for a re-run."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

from core.records import ResultRecord
from replay.analysis.compare import ALL_POSITIVE, Comparison
from replay.analysis.gates import Verdict
from replay.memory.ledger import Ledger, RuleRef
from replay.run.directory import load_results, run_identity


def record_run(ledger: Ledger, run_dir: str | Path) -> str:
    """The sealed run's results under its run_id (ingested once per seal: a resumed run again); returns the run_id."""
    run = Path(run_dir)
    run_id, sha256 = run_identity(run)
    if not ledger.knows_run(run_id, sha256):
        ledger.ingest_run(run_id, run.resolve(), sha256, load_results(run))
    return run_id


def carried(results: Iterable[ResultRecord], arms: Iterable[str]) -> frozenset[RuleRef]:
    """The rules that these arms' results carried (each in its workspace)."""
    wanted = set(arms)
    return frozenset(RuleRef(r.workspace, rule_id)
                     for r in results if r.arm in wanted for rule_id in r.injected_rule_ids)


def record_comparison(ledger: Ledger, run_id: str, comparison: Comparison, rules: Iterable[RuleRef]) -> int:
    """A comparison of the run, with the rules its arms' results carried; returns its ledger id."""
    summary: dict[str, Any] = {"decisions": comparison.decisions, "comparisons_made": comparison.comparisons_made,
                               "tainted_rule_ids": comparison.tainted_rule_ids}
    row = next((r for r in comparison.correctness if r.measure == "joint" and r.scope == ALL_POSITIVE), None)
    if row is not None:
        summary |= {"all_positive_points": row.stats.points, "all_positive_p": row.stats.p_value}
    return ledger.record_comparison(run_id, comparison.baseline, comparison.candidate, summary, rules)


def record_gate(ledger: Ledger, run_dir: str | Path, verdict: Verdict, verdict_file: Path) -> int:
    """A gate verdict on a run: the run, its policy (name, version, sha256), outcome and file, and the rules both
    arms' results carried. Every evaluation is its own entry, so a pass that a trial or a promotion used stays in
    the ledger after a later verdict on the same arms. Returns its ledger id."""
    run_id = record_run(ledger, run_dir)
    evidence = {"policy": verdict.policy, "policy_version": verdict.policy_version,
                "policy_sha256": verdict.policy_sha256, "policy_path": verdict.policy_path,
                "run_dir": str(Path(run_dir).resolve()), "verdict_file": str(verdict_file.resolve()),
                "baseline": verdict.baseline, "candidate": verdict.candidate, "passed": verdict.passed,
                "conditions": {c.id: c.status.value for c in verdict.conditions},
                "tainted_rule_ids": verdict.tainted_rule_ids, "evaluated_at": verdict.evaluated_at.isoformat()}
    subject = f"{verdict.policy}: {verdict.candidate} vs {verdict.baseline} at {verdict.evaluated_at.isoformat()}"
    return ledger.record_verdict(run_id, "gate", subject, "pass" if verdict.passed else "fail", evidence,
                                 ledger.rules_of(run_id, (verdict.baseline, verdict.candidate)))
