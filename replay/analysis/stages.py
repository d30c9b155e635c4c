"""One frozen suite and the same arms replayed on both sides of a stage of a candidate's path (quantisation,
001 S22): the second run's results sit beside the first's under arm names of their own, and each arm is compared
with itself across the stage. A decision the stage changed is then a discordant pair of its own, so a drop is
blamed on the stage, not on the training the first run already judged. Pure: records in, records and pairs out."""

from __future__ import annotations

from collections.abc import Collection, Iterable, Sequence

from core.names import excerpt
from core.records import ResultRecord
from replay.run.directory import ResultsError


def stage_arm(arm: str, stage: str) -> str:
    """An arm's name in the run after the stage (`cand` quantised is `cand:quantised`)."""
    return f"{arm}:{stage}"


def staged(records: Iterable[ResultRecord], stage: str) -> list[ResultRecord]:
    """The run after the stage, its arms renamed (A/A replicates keep pointing at their own arm's new name)."""
    return [r.model_copy(update={
        "arm": stage_arm(r.arm, stage),
        "replicate_of": None if r.replicate_of is None else stage_arm(r.replicate_of, stage)}) for r in records]


def stage_pairs(pairs: Sequence[tuple[str, str]], stage: str, arms_after: Collection[str]) -> list[tuple[str, str]]:
    """Every arm of `pairs` against itself after the stage, then each of `pairs` again after it.
    `arms_after`: the arms the run after the stage answered (under their own names); every compared arm must be
    among them, since a stage judged on other arms would blame it for their difference."""
    arms = list(dict.fromkeys(arm for pair in pairs for arm in pair))
    missing = [arm for arm in arms if arm not in arms_after]
    if missing:
        raise ResultsError(f"the {stage} run has no results for arm(s) {', '.join(excerpt(a) for a in missing)} "
                           f"(its arms: {', '.join(sorted(arms_after)) or 'none'}): replay the same arms on both sides")
    return [(arm, stage_arm(arm, stage)) for arm in arms] + [
        (stage_arm(baseline, stage), stage_arm(candidate, stage)) for baseline, candidate in pairs]
