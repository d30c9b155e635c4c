"""Verdict files: the verdict as an in-toto Statement over the digests of everything it judged, read back, and
verified (`worker-replay verify`).

The predicate holds the verdict and its `inputs`: the policy file, the judged run's `results.jsonl` (sealed), the
suite's `decisions.jsonl` the run replayed (the digest its run.json recorded), and each evidence path (a run
directory by its `results.jsonl`, a suite directory by its `decisions.jsonl`, any other directory by the digest of
its files, a file by its bytes), and every file of the candidate's training lineage the contamination check followed
(`lineage:`: its training record, the curated set's three files, the curation policy). The subject is the candidate,
named by the digest of those inputs (the policy aside): what the verdict is about is exactly the evidence it was
judged on (the predicate lists every memory rule id the two judged arms' results carried beside them); and, where
the run recorded what served the candidate, its adapter weights by fingerprint (`weights:VERSION`), which a trial
holds against the adapter it registered. `verify` recomputes every input's digest and the first subject's from the
files and names each one that changed or is gone.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from pathlib import Path

from pydantic import BaseModel, ValidationError

from core.atomicwrite import write_text_atomic
from core.attestation import (
    VERDICT_PREDICATE,
    ResourceDescriptor,
    ServedIdentity,
    Statement,
    file_sha256,
    tree_sha256,
)
from core.jsonfile import JsonFileError, read_json
from replay.analysis.gates.context import GateError
from replay.analysis.gates.policy import Verdict
from replay.run.directory import RESULTS, RUN_JSON, SERVED, load_results, read_run_json
from replay.suite import DECISIONS_JSONL

POLICY, RESULTS_INPUT, SUITE, EVIDENCE = "policy", "results", "suite", "evidence:"
LINEAGE = "lineage:"
"""The prefix of the inputs that name the candidate's training lineage (`lineage.ArmContamination.files`)."""
WEIGHTS = "weights:"
"""The prefix of the subject that names the candidate's adapter weights (by their fingerprint)."""


class VerdictPredicate(BaseModel):
    """The predicate of a verdict statement."""

    verdict: Verdict
    inputs: list[ResourceDescriptor]
    rule_ids: list[str] = []
    """Every memory rule the two judged arms' results carried: what a later dispute of any of them reaches (the
    ledger's `trace` finds the verdict by them too)."""


def verdict_filename(policy: str, candidate: str) -> str:
    """`gate-<policy>-<candidate>.json`, with characters unsafe in a file name replaced."""
    safe = re.sub(r"[^A-Za-z0-9._-]", "_", candidate)
    return f"gate-{policy}-{safe}.json"


def digest_of(path: Path) -> str:
    """The sha256 an input is named by: a file's bytes, a directory's files (`core.attestation.tree_sha256`)."""
    return tree_sha256(path) if path.is_dir() else file_sha256(path)


def evidence_file(path: Path) -> Path:
    """What evidence at `path` is judged by: a run directory's results, a suite directory's decisions, else the
    path itself."""
    for name in (RESULTS, DECISIONS_JSONL):
        if path.is_dir() and (path / name).is_file():
            return path / name
    return path


def _input(name: str, path: Path, recorded: str | None = None) -> ResourceDescriptor:
    absolute = path.resolve()
    sha256 = recorded or (digest_of(absolute) if absolute.exists() else "0" * 64)
    return ResourceDescriptor(name=name, uri=str(absolute), digest={"sha256": sha256})


def verdict_inputs(verdict: Verdict, run_dir: Path) -> list[ResourceDescriptor]:
    """Every input the verdict judged, by path and digest (see the module docstring)."""
    inputs = [] if verdict.policy_path is None else [_input(POLICY, Path(verdict.policy_path))]
    if (run_dir / RESULTS).is_file():
        inputs.append(_input(RESULTS_INPUT, run_dir / RESULTS))
        suite = read_run_json(run_dir).get("suite")
        if isinstance(suite, dict) and isinstance(suite.get("path"), str) and isinstance(suite.get("sha256"), str):
            inputs.append(_input(SUITE, Path(suite["path"]) / DECISIONS_JSONL, suite["sha256"]))
    evidence = sorted(verdict.evidence_paths.items())
    inputs += [_input(f"{EVIDENCE}{key}", evidence_file(Path(path))) for key, path in evidence]
    lineage = {} if verdict.contamination is None else verdict.contamination.files
    inputs += [_input(f"{LINEAGE}{Path(path).name}", Path(path), sha256) for path, sha256 in sorted(lineage.items())]
    return inputs


def subject_digest(inputs: list[ResourceDescriptor]) -> str:
    """The candidate's digest: of every judged input's name and digest, the policy aside."""
    lines = sorted(f"{i.name} {i.digest['sha256']}\n" for i in inputs if i.name != POLICY)
    return hashlib.sha256("".join(lines).encode()).hexdigest()


def candidate_weights(verdict: Verdict, run_dir: Path) -> ResourceDescriptor | None:
    """The candidate's adapter weights by fingerprint, where the judged run recorded what served it."""
    if not (run_dir / RUN_JSON).is_file():
        return None
    served = read_run_json(run_dir).get(SERVED)
    found = served.get(verdict.candidate) if isinstance(served, dict) else None
    if not isinstance(found, dict) or not isinstance(found.get("fingerprint"), str):
        return None
    identity = ServedIdentity.model_validate(found)
    assert identity.fingerprint is not None
    return ResourceDescriptor(name=f"{WEIGHTS}{identity.version or identity.model}",
                              digest={"sha256": identity.fingerprint})


def verdict_statement(verdict: Verdict, run_dir: Path) -> Statement:
    """The candidate as the subject, by the digest of the judged inputs and, where known, by its weights."""
    inputs = verdict_inputs(verdict, run_dir)
    subject = [ResourceDescriptor(name=verdict.candidate, digest={"sha256": subject_digest(inputs)})]
    weights = candidate_weights(verdict, run_dir)
    rule_ids = sorted({rule for r in load_results(run_dir) if r.arm in (verdict.baseline, verdict.candidate)
                       for rule in r.injected_rule_ids}) if (run_dir / RESULTS).is_file() else []
    predicate = VerdictPredicate(verdict=verdict, inputs=inputs, rule_ids=rule_ids)
    return Statement(subject=subject + ([weights] if weights else []), predicateType=VERDICT_PREDICATE,
                     predicate=predicate.model_dump(mode="json"))


def write_verdict(run_dir: str | Path, verdict: Verdict) -> Path:
    """Write the verdict's statement into the run directory (whole or not at all); returns its path."""
    path = Path(run_dir) / verdict_filename(verdict.policy, verdict.candidate)
    write_text_atomic(path, verdict_statement(verdict, Path(run_dir)).to_json())
    return path


def read_statement(path: str | Path) -> tuple[Statement, VerdictPredicate]:
    """A verdict file as written by `write_verdict`; anything else is a GateError naming the file."""
    try:
        statement = read_json(Path(path), Statement)
        if statement.predicateType != VERDICT_PREDICATE:
            raise GateError(f"{path}: not a gate verdict (its predicate type is {statement.predicateType!r})")
        return statement, VerdictPredicate.model_validate(statement.predicate)
    except JsonFileError as exc:
        raise GateError(f"not a gate verdict: {exc}") from exc
    except ValidationError as exc:
        raise GateError(f"{path}: not a gate verdict ({str(exc).splitlines()[0]})") from exc


def read_verdict(path: str | Path) -> Verdict:
    """The verdict of a verdict file (the report reads them back)."""
    return read_statement(path)[1].verdict


@dataclass(frozen=True)
class Check:
    """One input (or the subject) as recorded and as the files are now (None: gone)."""

    name: str
    uri: str | None
    recorded: str
    now: str | None

    @property
    def holds(self) -> bool:
        return self.recorded == self.now


def verify(path: str | Path) -> tuple[Verdict, list[Check]]:
    """Every digest of a verdict file recomputed from the files it names, then the subject's from those."""
    statement, predicate = read_statement(path)
    checks = []
    for item in predicate.inputs:
        where = None if item.uri is None else Path(item.uri)
        now = digest_of(where) if where is not None and where.exists() else None
        checks.append(Check(item.name, item.uri, item.digest.get("sha256", ""), now))
    again = [i.model_copy(update={"digest": {"sha256": c.now or ""}}) for i, c in zip(predicate.inputs, checks,
                                                                                       strict=True)]
    [subject] = statement.subject[:1]
    checks.append(Check(f"subject {subject.name}", None, subject.digest.get("sha256", ""), subject_digest(again)))
    return predicate.verdict, checks


def format_checks(path: str | Path, verdict: Verdict, checks: list[Check]) -> str:
    """`verify`'s report: the verdict, then one line per digest, then the count that changed."""
    outcome = "PASSED" if verdict.passed else "REJECTED"
    lines = [f"{path}: gate {verdict.policy} v{verdict.policy_version}, candidate {verdict.candidate!r} against "
             f"{verdict.baseline!r}: {outcome}"]
    for check in checks:
        label = "ok" if check.holds else ("GONE" if check.now is None else "CHANGED")
        where = f"  {check.uri}" if check.uri else ""
        detail = "" if check.holds or check.now is None else f" (recorded {check.recorded[:12]}, now {check.now[:12]})"
        lines.append(f"  {label:<8}{check.name}{where}{detail}")
    broken = [c.name for c in checks if not c.holds]
    lines.append(f"every digest matches ({len(checks)})" if not broken else
                 f"{len(broken)} of {len(checks)} digests do not match: {', '.join(broken)}")
    return "\n".join(lines)

