"""What evidence must have served to be about the judged run's weights (DESIGN §7, the chain of custody): a
quantised run, a quantised build derived from each judged arm's weights; a confirmation run, the same weights with
another seed; live evidence (shadow, canary), the candidate's served version by fingerprint. All read `run.json`'s
`served` (`core.attestation.ServedIdentity`, per arm), which `worker-replay run` records from the endpoint; a run
that records none binds nothing, and the condition is `not_run` with the reason (`MissingEvidenceError`)."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

from pydantic import ValidationError

from core.attestation import ServedIdentity
from core.capture_store import parse_instant
from core.evidence import EvidenceSubject
from replay.analysis.gates.context import GateContext, MissingEvidenceError
from replay.analysis.training_lineage import ChainError, training_data_until
from replay.run.directory import RUN_JSON, SERVED, RunError, read_run_json


def served_arm(run_dir: Path, arm: str, what: str) -> ServedIdentity:
    """What served `arm` in the run at `run_dir`, as its run.json records it; MissingEvidenceError where it
    records nothing (or nothing readable) for that arm."""
    try:
        served = read_run_json(run_dir).get(SERVED)
    except RunError as exc:
        raise MissingEvidenceError(f"{what}: {exc}") from exc
    found = served.get(arm) if isinstance(served, dict) else None
    try:
        return ServedIdentity.model_validate(found)
    except ValidationError:
        raise MissingEvidenceError(f"{what}: {run_dir / RUN_JSON} records nothing of what served arm {arm!r}, so "
                                   "nothing binds it to the judged weights; re-run it with this version of "
                                   "`worker-replay run`") from None


def weights_text(weights: tuple[str | None, str | None]) -> str:
    adapter, base = weights
    named = "no adapter" if adapter is None else f"adapter {adapter[:12]}…"
    return f"{named} over base {'(unknown)' if base is None else base[:12] + '…'}"


def _pairs(ctx: GateContext, key: str, other: Path) -> list[tuple[str, str, ServedIdentity, ServedIdentity]]:
    """(role, arm, judged identity, the other run's identity) for the baseline and the candidate."""
    assert ctx.run_dir is not None  # other_run bound the evidence to a judged run directory first
    return [(role, arm, served_arm(ctx.run_dir, arm, "the judged run"), served_arm(other, arm, f"evidence {key!r}"))
            for role, arm in (("baseline", ctx.baseline), ("candidate", ctx.candidate))]


def _known(role: str, arm: str, judged: ServedIdentity) -> tuple[str | None, str | None]:
    weights = judged.weights()
    if weights[1] is None:
        raise MissingEvidenceError(f"the judged run names no base model digest for its {role} {arm!r} (its endpoint "
                                   "did not say what model it serves), so no other run can be shown to be of the "
                                   "same weights; run it through the gateway, or on an engine whose model "
                                   "directory this machine reads")
    return weights


def check_quantised(ctx: GateContext, key: str, other: Path) -> None:
    """Each arm of the quantised run must be served by a quantised build derived from that arm's judged weights."""
    for role, arm, judged, quantised in _pairs(ctx, key, other):
        weights = _known(role, arm, judged)
        if quantised.quantization is None:
            raise MissingEvidenceError(f"evidence {key!r}: its {role} {arm!r} was served unquantised (its engine's "
                                       "model config names no quantisation): it must be a quantised build")
        if quantised.derived_from is None:
            raise MissingEvidenceError(f"evidence {key!r}: its {role} {arm!r} is a {quantised.quantization} model "
                                       "that records nothing it was built from (quantise with `worker-serve model "
                                       "quantize`, a candidate merged first with `worker-serve adapter merge`)")
        if quantised.weights() != weights:
            raise MissingEvidenceError(
                f"evidence {key!r}: its {role} {arm!r} serves a {quantised.quantization} build of "
                f"{weights_text(quantised.weights())}, the judged run's {role} {weights_text(weights)}: it must be "
                "derived from the judged weights")


def check_confirmation(ctx: GateContext, key: str, other: Path) -> None:
    """The confirmation run's arms must be served by the judged weights, and it must be another replay of them:
    where both runs name a decoding seed, another seed (the same weights, suite and seed replay the same answers)."""
    for role, arm, judged, again in _pairs(ctx, key, other):
        weights = _known(role, arm, judged)
        if again.weights() != weights:
            raise MissingEvidenceError(
                f"evidence {key!r}: its {role} {arm!r} was served by {weights_text(again.weights())}, the judged "
                f"run's by {weights_text(weights)}: a confirmation must replay the same weights")
    assert ctx.run_dir is not None
    seeds = [_seed(run) for run in (ctx.run_dir, other)]
    if seeds[0] is not None and seeds[0] == seeds[1]:
        raise MissingEvidenceError(f"evidence {key!r} replayed the same weights with the judged run's seed "
                                   f"({seeds[0]}), which gives the same answers: a confirmation needs another seed")


def _seed(run_dir: Path) -> int | None:
    """The decoding seed the run's config records (None: none, or none readable)."""
    config = read_run_json(run_dir).get("config")
    decoding = config.get("decoding") if isinstance(config, dict) else None
    seed = decoding.get("seed") if isinstance(decoding, dict) else None
    return seed if isinstance(seed, int) else None


def check_trial_subject(ctx: GateContext, key: str, subject: EvidenceSubject | None) -> None:
    """Live evidence (shadow, canary) must name the version that served the candidate, by fingerprint, and that
    must be the judged run's candidate weights; evidence that names none, or another, is not judged."""
    if subject is None or subject.candidate is None:
        raise MissingEvidenceError(f"evidence {key!r} names no served version of the candidate, so nothing binds it "
                                   "to the judged weights; export it with this version of `worker-serve evidence`")
    if ctx.run_dir is None:
        raise MissingEvidenceError(f"evidence {key!r} is about a served version, and no judged run directory was "
                                   "given to bind it to")
    judged = served_arm(ctx.run_dir, ctx.candidate, "the judged run")
    named = subject.candidate
    if named.fingerprint != judged.fingerprint:
        raise MissingEvidenceError(
            f"evidence {key!r} is about candidate {named.model!r} served with weights "
            f"{_short(named.fingerprint)}, the judged run's candidate {ctx.candidate!r} with "
            f"{_short(judged.fingerprint)}: it must be about the same weights")


def _short(fingerprint: str | None) -> str:
    return "none (the base model)" if fingerprint is None else f"{fingerprint[:12]}…"


def check_after_training(run_path: Path, candidate: str, first: datetime | None) -> None:
    """Decisions captured while the candidate's training data was being recorded are not fresh for it: the
    fresh suite must start after the newest decision its curated set came from (its lineage, every digest
    checked). A candidate with no lineage to follow (base, a random adapter) has nothing to start after."""
    try:
        trained = training_data_until(run_path, candidate)
    except ChainError as exc:
        raise MissingEvidenceError(f"fresh evidence: {exc}") from exc
    if trained is not None and first is not None and first <= parse_instant(trained[0]):
        until, curated = trained
        raise MissingEvidenceError(
            f"the fresh suite starts at {first.isoformat()}, before the candidate's training data ends ({until}, "
            f"the newest decision of its curated set {curated}): it must be captured after that")
