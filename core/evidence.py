"""Evidence files the gates read (JSON): what the gateway's evidence export writes and what a
sandbox run or another harness may supply. The formats are the contract; the conditions that
judge them are in `replay/analysis/gates/conditions.py`.
"""

from __future__ import annotations

from collections import Counter
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
    """`{"adapter": "<candidate>", "control": {requests, errors, anomalies}, "canary": {...}, "window": {...}}`."""

    adapter: str | None = None
    control: CanaryCohort
    canary: CanaryCohort
    window: EvidenceWindow | None = None


class RegistryEvidence(Strict):
    """`{"production": "<route target>", "rollback_target": "<previous>", "loaded": ["..."]}`."""

    production: str
    rollback_target: str | None
    loaded: list[str]
