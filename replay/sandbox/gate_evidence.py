"""From a sandbox run to the gates: paired tables per measure and the evidence files the gates read.

Two arms of one run are paired per scenario (only scenarios both arms ran). The files are the
`core.evidence.PairedOutcomes` formats the conditions of `replay/analysis/gates.py` read:

| file (evidence key) | measure | item | condition |
|---|---|---|---|
| `isolated_replay.json` | `task_completed` | scenario | isolated-replay-completion |
| `unsupported_completion.json` | `unsupported_completion` | scenario | unsupported-completion |
| `critical_failures.json` | `critical_failure` | scenario × category | critical-failures |
| `isolated_live_replay.json` | `live_replay_passed` | scenario | isolated-live-replay |

`live_replay_passed` (completed, no unsupported completion, no critical failure) is written
only for a run through the gateway (`--via gateway`): only that is *live* replay.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from core.attestation import ServedIdentity
from core.evidence import EvidenceSubject, OutcomeItem, PairedOutcomes
from core.names import excerpt
from replay.analysis.compare import format_ci, format_p, format_points
from replay.run.directory import SERVED, RunError, read_run_json
from replay.sandbox.measures import Scores
from replay.sandbox.runner import SandboxResult
from replay.sandbox.scenario import CATEGORIES
from replay.stats import PairedComparison, paired_comparison

EVIDENCE_FILES = {"isolated_replay": "isolated_replay.json", "unsupported_completion": "unsupported_completion.json",
                  "critical_failures": "critical_failures.json", "isolated_live_replay": "isolated_live_replay.json"}
# Measures of a paired table: name, what `true` means, higher is better.
MEASURES: tuple[tuple[str, Callable[[Scores], bool], bool], ...] = (
    ("task_completed", lambda s: s.task_completed, True),
    ("unsupported_completion", lambda s: s.unsupported_completion, False),
    ("critical_failure", lambda s: s.critical_failure, False),
    ("failed_repeat", lambda s: s.failed_repeats > 0, False),
    ("passed", lambda s: passed(s), True),
)


def passed(scores: Scores) -> bool:
    return scores.task_completed and not scores.unsupported_completion and not scores.critical_failure


@dataclass(frozen=True)
class Pairs:
    baseline: str
    candidate: str
    items: tuple[tuple[str, str, Scores, Scores], ...]  # scenario id, policy family, baseline, candidate
    endpoint_kind: str


def pair_results(results: Sequence[SandboxResult], baseline: str, candidate: str) -> Pairs:
    by_arm: dict[str, dict[str, SandboxResult]] = {}
    for r in results:
        by_arm.setdefault(r.arm, {})[r.scenario_id] = r
    for arm in (baseline, candidate):
        if arm not in by_arm:
            raise RunError(f"no sandbox results for arm {excerpt(arm)} (arms: {', '.join(sorted(by_arm)) or 'none'})")
    common = sorted(set(by_arm[baseline]) & set(by_arm[candidate]))
    if not common:
        raise RunError(f"arms {baseline!r} and {candidate!r} share no scenario")
    kinds = {r.endpoint_kind for r in results}
    items = tuple((sid, by_arm[baseline][sid].policy_family, by_arm[baseline][sid].scores,
                   by_arm[candidate][sid].scores)
                  for sid in common)
    return Pairs(baseline, candidate, items, kinds.pop() if len(kinds) == 1 else "mixed")


def paired_tables(pairs: Pairs) -> dict[str, dict[str, PairedComparison]]:
    """measure → scope ("all" and each policy family) → paired comparison (true = the measure holds)."""
    families = sorted({family for _, family, _, _ in pairs.items})
    tables: dict[str, dict[str, PairedComparison]] = {}
    for name, read, _ in MEASURES:
        rows = {"all": paired_comparison((read(b), read(c)) for _, _, b, c in pairs.items)}
        for family in families:
            rows[family] = paired_comparison((read(b), read(c)) for _, f, b, c in pairs.items if f == family)
        tables[name] = rows
    return tables


def format_tables(pairs: Pairs) -> str:
    lines = [(f"sandbox: {pairs.baseline} → {pairs.candidate} on {len(pairs.items)} scenarios "
             f"(endpoint: {pairs.endpoint_kind})")]
    for (name, _, higher_better), rows in zip(MEASURES, paired_tables(pairs).values(), strict=True):
        width = max(len(k) for k in rows)
        lines += ["", f"{name} ({'higher' if higher_better else 'lower'} is better)",
                  (f"{'scope':<{width}}  {'n':>3}  {'base':>4}  {'cand':>4}  {'+':>3}  {'−':>3}  {'points':>8}  "
                  f"{'95% CI':<16}  p")]
        for scope, s in rows.items():
            lines.append(f"{scope:<{width}}  {s.n:>3}  {s.baseline_correct:>4}  {s.candidate_correct:>4}  {s.wins:>3}  "
                         f"{s.losses:>3}  {format_points(s.points):>8}  {format_ci(s.ci_low, s.ci_high):<16}  "
                         f"{format_p(s.p_value)}")
    return "\n".join(lines)


def evidence_subject(run_dir: Path, pairs: Pairs) -> EvidenceSubject:
    """The run the evidence comes from and what served its two arms, as its run.json records them."""
    manifest = read_run_json(run_dir)
    found = manifest.get(SERVED)
    served: dict[str, object] = found if isinstance(found, dict) else {}
    run_id = manifest.get("run_id")

    def identity(arm: str) -> ServedIdentity | None:
        recorded = served.get(arm)
        return ServedIdentity.model_validate(recorded) if isinstance(recorded, dict) else None

    return EvidenceSubject(run_id=run_id if isinstance(run_id, str) else None, baseline=identity(pairs.baseline),
                           candidate=identity(pairs.candidate))


def evidence_files(pairs: Pairs, subject: EvidenceSubject | None = None) -> dict[str, PairedOutcomes]:
    """Evidence key → paired outcomes, in the formats the gate conditions read."""
    def per_scenario(measure: str, read: Callable[[Scores], bool]) -> PairedOutcomes:
        return PairedOutcomes(measure=measure, candidate=pairs.candidate, subject=subject, items=[
            OutcomeItem(id=sid, baseline=read(b), candidate=read(c), category=family)
            for sid, family, b, c in pairs.items])

    out = {
        "isolated_replay": per_scenario("task_completed", lambda s: s.task_completed),
        "unsupported_completion": per_scenario("unsupported_completion", lambda s: s.unsupported_completion),
        "critical_failures": PairedOutcomes(measure="critical_failure", candidate=pairs.candidate, subject=subject,
                                            items=[OutcomeItem(id=f"{sid}/{cat}", baseline=b.critical[cat],
                                                               candidate=c.critical[cat], category=cat,
                                                               note=", ".join(c.critical_hits))
                                                   for sid, _, b, c in pairs.items for cat in CATEGORIES]),
    }
    if pairs.endpoint_kind == "gateway":
        out["isolated_live_replay"] = per_scenario("live_replay_passed", passed)
    return out


def write_evidence(pairs: Pairs, out_dir: Path, subject: EvidenceSubject | None = None) -> dict[str, Path]:
    """The evidence files for the gate; `subject` (`evidence_subject`) binds them to what served the two arms."""
    out_dir.mkdir(parents=True, exist_ok=True)
    written = {}
    for key, outcomes in evidence_files(pairs, subject).items():
        path = out_dir / EVIDENCE_FILES[key]
        tmp = path.with_suffix(".tmp")
        tmp.write_text(outcomes.model_dump_json(indent=2) + "\n", encoding="utf-8")
        tmp.replace(path)
        written[key] = path
    return written
