"""The planted reviewer: verdicts with known error rates on a labelled set, so `qa agree` and the
`reviewer_agreement` gate can be measured as the replay gates are (replay/calibration/): a seeded function of
the human disposition, no model. Labelled *planted* wherever its verdicts go (reviewer name `planted`).

On a run people failed it passes with probability `false_pass` (its true false-pass rate) and escalates with
probability `escalation`; on a run people passed it fails with probability `false_fail` and escalates with
probability `escalation` (so its true escalation rate is `escalation` on any mix). Each draw is seeded by the
seed and the run, never by order, so adding runs leaves the others' verdicts unchanged. Runs without a
disposition get no verdict: the planted truth is the people's.
"""

from __future__ import annotations

import random
from collections.abc import Iterable

from pydantic import Field, model_validator

from core.evidence import Disposition, ReviewVerdict
from core.records import Strict
from replay.qa.labels import LabelledRun
from replay.qa.verdicts import ReviewerVerdictLine

PLANTED = "planted"


class PlantedRates(Strict):
    false_pass: float = Field(ge=0, le=1)
    escalation: float = Field(ge=0, le=1)
    false_fail: float = Field(default=0.0, ge=0, le=1)

    @model_validator(mode="after")
    def _possible(self) -> PlantedRates:
        if self.escalation + max(self.false_pass, self.false_fail) > 1:
            raise ValueError("escalation plus false_pass (or false_fail) must be at most 1")
        return self


def planted_verdict(run: LabelledRun, rates: PlantedRates, seed: int) -> ReviewVerdict | None:
    if run.disposition is None:
        return None
    failed = run.disposition is Disposition.FAIL
    draw = random.Random(f"{seed}:{run.workspace}/{run.session}").random()
    if draw < rates.escalation:
        return ReviewVerdict.ESCALATE
    wrong = draw < rates.escalation + (rates.false_pass if failed else rates.false_fail)
    return ReviewVerdict.PASS if failed == wrong else ReviewVerdict.FAIL


def planted_verdicts(runs: Iterable[LabelledRun], rates: PlantedRates, seed: int) -> list[ReviewerVerdictLine]:
    """The planted reviewer's verdict on every labelled run (as a verdicts file's lines)."""
    return [ReviewerVerdictLine(workspace=run.workspace, session=run.session, reviewer=PLANTED, verdict=verdict,
                                final_record=run.final_record)
            for run in runs if (verdict := planted_verdict(run, rates, seed)) is not None]
