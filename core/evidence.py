"""Evidence files the gates read (JSON): what the gateway's evidence export writes and what a
sandbox run or another harness may supply, and the reviewer agreement report `worker-replay qa agree --out`
writes (with the verdict and disposition words Stop-QA's labels use). The formats are the contract; the
conditions that judge them are in `replay/analysis/gates/conditions.py`.
"""

from __future__ import annotations

from collections import Counter
from enum import StrEnum
from typing import Literal

from pydantic import Field, model_validator

from core.attestation import ServedIdentity
from core.names import Name
from core.records import Strict


class OutcomeItem(Strict):
    """One task or check judged for both arms; what `true` means is the file's `measure`."""

    id: str
    baseline: bool
    candidate: bool
    category: str | None = None
    note: str = ""


class EvidenceSubject(Strict):
    """What a piece of evidence is about: the run it came from and what served its two arms. A gate judges it
    only for a run whose arms were served by the same weights (`ServedIdentity.fingerprint`)."""

    run_id: str | None = None
    baseline: ServedIdentity | None = None
    candidate: ServedIdentity | None = None


class PairedOutcomes(Strict):
    """`{"measure": "...", "candidate": "<arm, optional>", "items": [{"id", "baseline", "candidate"}],
    "subject"?: {"run_id", "baseline", "candidate"}}`."""

    measure: str
    candidate: str | None = None
    items: list[OutcomeItem]
    subject: EvidenceSubject | None = None

    @model_validator(mode="after")
    def _unique_ids(self) -> PairedOutcomes:
        counts = Counter(i.id for i in self.items)
        duplicates = sorted(i for i, n in counts.items() if n > 1)
        if duplicates:
            raise ValueError(f"duplicate item ids: {', '.join(duplicates)}")
        return self


class CanaryCohort(Strict):
    """Errors are per request; anomalies per observed tool result (`outcomes`) when given, else per request."""

    requests: int = Field(ge=0)
    errors: int = Field(ge=0)
    anomalies: int = Field(ge=0)
    outcomes: int | None = Field(default=None, ge=0)

    def rate(self, what: Literal["errors", "anomalies"]) -> float | None:
        over = self.outcomes if what == "anomalies" and self.outcomes is not None else self.requests
        return getattr(self, what) / over if over else None


class EvidenceWindow(Strict):
    """Which trial's cohorts canary evidence counts: from the trial's start to the export (epoch seconds).
    A trial accepts a gate verdict only on evidence of its own window (serve/trials)."""

    trial: Name
    since: float = Field(allow_inf_nan=False)
    until: float = Field(allow_inf_nan=False)


class CanaryEvidence(Strict):
    """`{"adapter": "<candidate>", "control": {requests, errors, anomalies}, "canary": {...}, "window": {...},
    "subject": {...}}`; `subject`: the versions the two cohorts were served by, with their fingerprints."""

    adapter: str | None = None
    control: CanaryCohort
    canary: CanaryCohort
    window: EvidenceWindow | None = None
    subject: EvidenceSubject | None = None


class RegistryEvidence(Strict):
    """`{"production": "<route target>", "rollback_target": "<previous>", "loaded": ["..."]}`."""

    production: str
    rollback_target: str | None
    loaded: list[str]


class ReviewVerdict(StrEnum):
    """A reviewer's verdict; `escalate` forces a human."""

    PASS = "pass"
    FAIL = "fail"
    ESCALATE = "escalate"


class Disposition(StrEnum):
    """A person's disposition of a run."""

    PASS = "pass"
    FAIL = "fail"


MAX_RUNS = 10**7
"""Counts above this are refused in an evidence file (far above any labelled set; it bounds the exact interval's
work)."""
Matrix = dict[ReviewVerdict, dict[Disposition, int]]


class AgreementRow(Strict):
    reviewer: str
    workspace: Name | None
    """None: all workspaces."""
    reviewed: int = Field(ge=0, le=MAX_RUNS)
    """Runs with this reviewer's verdict, labelled by people or not."""
    labelled: int = Field(ge=0, le=MAX_RUNS)
    matrix: Matrix
    """Reviewer verdict → people's disposition → runs."""
    false_passes: int = Field(ge=0)
    human_fails: int = Field(ge=0)
    false_pass_rate: float | None
    false_pass_ci: tuple[float, float]
    escalations: int = Field(ge=0)
    unusable: int = Field(0, ge=0)
    """Of `escalations`, those a replayed reviewer's unusable answer forced (`qa review` outcome not `ok`): the
    reviewer failing to answer rather than judging the run uncertain; what to fix differs (prompt, tokens)."""
    escalation_rate: float | None
    escalation_ci: tuple[float, float]
    kappa: float | None
    kappa_se: float | None
    kappa_ci: tuple[float, float] | None

    @model_validator(mode="after")
    def _counts_are_the_matrix(self) -> AgreementRow:
        """An evidence file is read back by a gate: its counts must be its matrix's."""
        cells = {(v, d): self.matrix.get(v, {}).get(d, 0) for v in ReviewVerdict for d in Disposition}
        if any(c < 0 for c in cells.values()):
            raise ValueError("matrix counts must be ≥ 0")
        derived = (sum(cells.values()), cells[ReviewVerdict.PASS, Disposition.FAIL],
                   sum(c for (_, d), c in cells.items() if d is Disposition.FAIL),
                   sum(c for (v, _), c in cells.items() if v is ReviewVerdict.ESCALATE))
        if derived != (self.labelled, self.false_passes, self.human_fails, self.escalations):
            raise ValueError(f"{self.reviewer}: labelled, false_passes, human_fails and escalations must be the "
                             f"matrix's ({', '.join(map(str, derived))})")
        if self.labelled > self.reviewed:
            raise ValueError(f"{self.reviewer}: more labelled runs than reviewed ones")
        if self.unusable > self.escalations:
            raise ValueError(f"{self.reviewer}: more unusable answers than escalations")
        return self


class PairRow(Strict):
    first: str
    second: str
    workspace: Name | None
    runs: int = Field(ge=0)
    """Labelled runs both judged."""
    only_first_right: int = Field(ge=0)
    only_second_right: int = Field(ge=0)
    p_value: float
    """Exact McNemar: two-sided binomial (½) on the discordant runs."""


class AgreementReport(Strict):
    """`qa agree --out FILE`: the gate's `reviewer_agreement` evidence (computed by `replay/qa/agreement.py`)."""

    confidence: float = 0.95
    """The intervals' confidence (`replay.stats.DEFAULT_CONFIDENCE` unless `qa agree` was given another)."""
    runs: int = Field(ge=0)
    labelled: int = Field(ge=0)
    """Runs with a person's disposition."""
    unmatched_verdicts: int = Field(ge=0)
    """Verdicts on runs the labels do not hold (or on another final record of them): not used."""
    rows: list[AgreementRow]
    pairs: list[PairRow]

    def row(self, reviewer: str, workspace: str | None) -> AgreementRow | None:
        return next((r for r in self.rows if r.reviewer == reviewer and r.workspace == workspace), None)
