"""A judged arm's training lineage, read from the files, and its contamination check (DESIGN §7, the custody
chain; issue 60).

The chain: the run's served identity (`run.json`'s `served`: the adapter's fingerprint and directory, `root`) →
the adapter directory, whose files must still be those weights → its training record (`worker-tier-train.json`)
→ the curated set it names, whose `manifest.json` and `train.jsonl` must have the digests the record took →
`provenance.jsonl` (the manifest's digest of it) → the curation policy (its digest in the manifest), whose
near-duplicate rule the check applies, as curation did. A digest that does not match is a `ChainError` naming
the file. An arm with nothing to follow — the base model, an endpoint that names no directory, an adapter with no
training record (a random one), one trained on a demo split (no provenance) — is "no lineage: not checked", and
says why. The comparison itself is `replay.analysis.contamination`'s.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from core.attestation import ServedIdentity, adapter_fingerprint, file_sha256
from core.chatrow import chat_messages
from core.curated import MANIFEST_JSON, PROVENANCE_JSONL, TRAIN_JSONL, TRAIN_RECORD, CuratedData, read_curated
from core.errors import WorkerTierError
from core.jsonfile import JsonFileError, read_json_value, read_jsonl_strict
from core.names import excerpt
from core.near_duplicates import NGRAM, THRESHOLD, state_text
from core.records import Decision
from core.tomlfile import MAX_TOML_BYTES, parse_toml, read_regular
from replay.analysis.contamination import (
    Contaminated,
    JudgedDecision,
    SourceRow,
    contamination,
    corpus_session,
    rule_counts,
)
from replay.errors import ReplayError
from replay.run.directory import RUN_JSON, SERVED, read_run_json
from replay.suite import load_suite
from replay.suite_checks import request_hash


class ChainError(ReplayError, ValueError):
    """A link of the training lineage whose digest does not match, or that cannot be read (names the file)."""


class ArmContamination(BaseModel):
    """One arm's check, as the screen, the report and the verdict's predicate show it."""

    arm: str
    checked: bool
    note: str
    """What was checked (the curated set), or why nothing was."""
    curated_set: str | None = None
    manifest_sha256: str | None = None
    ngram: int | None = None
    threshold: float | None = None
    decisions: int = 0
    """Suite decisions checked."""
    files: dict[str, str] = {}
    """Every file of the chain followed (absolute path → sha256): the record, the set's three files, the policy."""
    rule_counts: dict[str, int] = {}
    contaminated: list[Contaminated] = []

    @property
    def excluded(self) -> frozenset[str]:
        return frozenset(c.decision for c in self.contaminated)

    def line(self) -> str:
        """One line: the count, per rule, and the decisions; or why it was not checked."""
        if not self.checked:
            return f"contamination: arm {self.arm!r}: {self.note}"
        rules = ", ".join(f"{rule.replace('_', '-')} {n}" for rule, n in self.rule_counts.items())
        ids = ", ".join(c.decision for c in self.contaminated[:10]) + (", …" if len(self.contaminated) > 10 else "")
        return (f"contamination: arm {self.arm!r} ({self.note}): {len(self.contaminated)} of {self.decisions} suite "
                f"decisions its training data reaches ({rules})" + (f": {ids}" if ids else ""))


class _Record(BaseModel, extra="allow"):
    data: dict[str, object] | None = None


class _Source(BaseModel):
    """What the check reads of a `provenance.jsonl` line (replay/curation/dataset.py's `Provenance` writes it)."""

    model_config = ConfigDict(extra="ignore")
    example: int
    decision: str
    request_sha256: str | None = None


class _NearRule(BaseModel):
    """What the check reads of a curation policy (replay/curation/curation_policy.py's): its near-duplicate rule."""

    model_config = ConfigDict(extra="ignore")
    near_duplicate_ngram: int = Field(default=NGRAM, gt=0)
    near_duplicate_threshold: float = Field(default=THRESHOLD, ge=0, le=1)


def _near_rule(path: Path) -> tuple[_NearRule, str]:
    data = read_regular(path, MAX_TOML_BYTES)
    return parse_toml(data, path, _NearRule, "curation policy"), hashlib.sha256(data).hexdigest()


def _not_checked(arm: str, why: str) -> ArmContamination:
    return ArmContamination(arm=arm, checked=False, note=f"no lineage ({why}): not checked")


def _training_data(arm: str, identity: ServedIdentity) -> tuple[Path, CuratedData] | ArmContamination:
    """The training record's curated set, after proving the directory holds the served weights; or why not."""
    if identity.fingerprint is None:
        return _not_checked(arm, "the base model, or weights the endpoint does not name")
    if identity.root is None:
        return _not_checked(arm, "the endpoint named no adapter directory for it")
    root = Path(identity.root)
    if not root.is_dir():
        return _not_checked(arm, f"its adapter directory {root} is not on this machine")
    if (found := adapter_fingerprint(root)) != identity.fingerprint:
        raise ChainError(f"{root}: its files are not the weights the run served (fingerprint {found[:12]}, served "
                           f"{identity.fingerprint[:12]}); the lineage cannot be followed")
    record_path = root / TRAIN_RECORD
    if not record_path.is_file():
        return _not_checked(arm, f"{root} holds no {TRAIN_RECORD}: not trained here, e.g. a random adapter")
    try:
        data = _Record.model_validate(read_json_value(record_path)).data or {}
        if "manifest_sha256" not in data:
            return _not_checked(arm, f"{record_path} names no curated set (a demo split has no provenance)")
        return record_path, CuratedData.model_validate(data)
    except JsonFileError as exc:
        raise ChainError(str(exc)) from None
    except ValidationError as exc:
        raise ChainError(f"{record_path}: not a training record ({excerpt(str(exc).splitlines()[0])})") from None


@dataclass(frozen=True)
class TrainingSet:
    """A curated set as the chain reached it: its rows with their provenance, the policy's n-gram rule, and every
    file followed with its digest (the verdict lists them as inputs, so `verify` sees a later change)."""

    rows: list[SourceRow]
    ngram: int
    threshold: float
    files: dict[str, str]
    data_until: str | None
    """The newest capture time of the set's source decisions (the manifest's; None for a set built before it)."""


def source_rows(record_path: Path, data: CuratedData) -> TrainingSet:
    """The set's rows with their provenance, and the policy's n-gram rule, every digest checked."""
    directory = Path(data.path)
    try:
        manifest, manifest_sha256, rows = read_curated(directory)
        provenance = read_jsonl_strict(directory / PROVENANCE_JSONL, _Source, "a provenance line")
        policy, policy_sha256 = _near_rule(Path(manifest.policy.path))
    except (WorkerTierError, OSError) as exc:
        raise ChainError(f"{str(exc).splitlines()[0]} (the training lineage that {record_path} names)") from None
    named = {"manifest.json": (manifest_sha256, data.manifest_sha256),
             "train.jsonl": (manifest.train_sha256, data.train_sha256),
             manifest.policy.path: (policy_sha256, manifest.policy.sha256)}
    if manifest.provenance_sha256 is not None:
        named[PROVENANCE_JSONL] = (file_sha256(directory / PROVENANCE_JSONL), manifest.provenance_sha256)
    for name, (actual, recorded) in named.items():
        if actual != recorded:
            path = Path(name) if name == manifest.policy.path else directory / name
            raise ChainError(f"{path}: sha256 {actual[:12]} is not the {recorded[:12]} recorded: changed after the "
                               f"adapter was trained (the training lineage that {record_path} names)")
    if len(provenance) != len(rows):
        raise ChainError(f"{directory / PROVENANCE_JSONL}: {len(provenance)} lines for {len(rows)} training rows")
    sources = [SourceRow(example=p.example, decision=p.decision, session=corpus_session(p.decision),
                         request_sha256=p.request_sha256, text=state_text({"messages": row.messages[:-1]}))
               for row, p in zip(rows, provenance, strict=True)]
    files = {record_path: file_sha256(record_path), directory / MANIFEST_JSON: manifest_sha256,
             directory / TRAIN_JSONL: manifest.train_sha256,
             directory / PROVENANCE_JSONL: file_sha256(directory / PROVENANCE_JSONL),
             Path(manifest.policy.path): policy_sha256}
    return TrainingSet(sources, policy.near_duplicate_ngram, policy.near_duplicate_threshold,
                       {str(path.resolve()): sha256 for path, sha256 in files.items()}, manifest.data_until)


def chat_state(decision: Decision) -> str:
    """A decision's state text as a training row would hold it: a Messages request's turns converted to chat as
    curation renders them (core/chatrow.py), so a call's name and arguments, and a turn's tool results and
    text, come in the same order on both sides of the comparison."""
    request = decision.request.model_dump(mode="json", exclude_none=True)
    return state_text({"messages": chat_messages(request)} if decision.api == "messages" else request)


def judged_decisions(decisions: Sequence[Decision]) -> list[JudgedDecision]:
    """The suite's decisions as the check compares them (the request hash as the suite holds it)."""
    return [JudgedDecision(id=d.id, sessions=frozenset(s for s in (d.session, corpus_session(d.id)) if s),
                           request_sha256=request_hash(d.request), text=chat_state(d))
            for d in decisions]


def check_arm(arm: str, found: tuple[Path, CuratedData], decisions: Sequence[JudgedDecision]) -> ArmContamination:
    """One arm's contamination on the suite's decisions, from its training record and curated set
    (ChainError where a digest of the chain fails)."""
    record_path, data = found
    chain = source_rows(record_path, data)
    hits = contamination(decisions, chain.rows, chain.ngram, chain.threshold)
    return ArmContamination(arm=arm, checked=True, note=f"trained on the curated set {data.path}",
                            curated_set=data.path, manifest_sha256=data.manifest_sha256, ngram=chain.ngram,
                            threshold=chain.threshold, files=chain.files, decisions=len(decisions),
                            rule_counts=rule_counts(hits), contaminated=hits)


def served_identity_of(run_dir: Path, manifest: dict[str, Any], arm: str) -> ServedIdentity:
    """What `run.json` (read once, `manifest`) says served `arm` (just its name where it records nothing)."""
    served = manifest.get(SERVED)
    entry = served.get(arm) if isinstance(served, dict) else None
    try:
        return ServedIdentity.model_validate(entry or {"model": arm})
    except ValidationError as exc:
        raise ChainError(f"{run_dir / RUN_JSON}: what served arm {arm!r} is not a served identity "
                           f"({excerpt(str(exc).splitlines()[0])})") from None


def training_data_until(run_dir: Path, arm: str) -> tuple[str, str] | None:
    """(the newest capture time of the data `arm` was trained on, its curated set) as the lineage proves it, or
    None where there is no lineage to follow or the set records no time (ChainError where a digest fails)."""
    found = _training_data(arm, served_identity_of(run_dir, read_run_json(run_dir), arm))
    if isinstance(found, ArmContamination):
        return None
    record_path, data = found
    until = source_rows(record_path, data).data_until
    return (until, data.path) if until is not None else None


def check_run(run_dir: Path, arms: Sequence[str]) -> list[ArmContamination]:
    """Each arm's check against the suite the run replayed (`run.json` names it, and what served each arm); the
    suite is read only when some arm has a lineage to compare with it."""
    manifest = read_run_json(run_dir)
    found = {arm: _training_data(arm, served_identity_of(run_dir, manifest, arm)) for arm in arms}
    if all(isinstance(f, ArmContamination) for f in found.values()):
        return [f for f in found.values() if isinstance(f, ArmContamination)]
    suite = manifest.get("suite")
    path = suite.get("path") if isinstance(suite, dict) else None
    if not isinstance(path, str):
        raise ChainError(f"{run_dir / RUN_JSON}: names no suite, so the arms' training data cannot be checked "
                           "against it")
    decisions = judged_decisions(load_suite(path).decisions)
    return [f if isinstance(f, ArmContamination) else check_arm(arm, f, decisions) for arm, f in found.items()]
