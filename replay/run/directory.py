"""A run directory (`run.json`, `results.jsonl`, `run.lock`, and `engine.json` where the engine's
starter wrote one): what `worker-replay run`, `sandbox run` and `qa review` share about where their results go.

One writer at a time (`run_lock`), a resume only of the same run (`check_run_dir` compares
what decides the results, starting with the config as `config_entries` records it), and the
(arm, item) pairs already recorded (`read_completed`).

The seal (DESIGN §7, the chain of custody): a new run gets a `run_id`, and when it finishes the executor writes
the results file's sha256, size and line count into `run.json` (`seal_run`). Every reader of results checks it
(`check_seal`), so a results file changed after its run, or a run that never finished, is refused rather than
judged. A resume may only append: the bytes already sealed must be unchanged (`check_resumable`), and the seal is
marked `open` while it appends, so a run killed during a resume is read as unfinished, never as tampered.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, ValidationError

from core.atomicwrite import write_text_atomic
from core.jsonfile import JsonFileError, cut_torn_tail, read_json_value, read_jsonl, read_jsonl_values
from core.names import excerpt
from core.records import EngineSettings, ResultRecord
from replay.errors import ReplayError
from replay.run.run_config import RunConfig

RESULTS = "results.jsonl"
RUN_JSON = "run.json"
RUN_LOCK = "run.lock"
ENGINE_JSON = "engine.json"
SERVED = "served"
"""run.json's key for what served each arm: `{arm: core.attestation.ServedIdentity}`."""
_Model = TypeVar("_Model", bound=BaseModel)


class RunError(ReplayError, RuntimeError):
    """A run that must not start (or continue) as asked; the message says why."""


class ResultsError(ReplayError, ValueError):
    """Results that cannot be read or compared as they are (with file:line where a file is involved)."""


class _Part(BaseModel, extra="allow"):
    path: str | None = None
    sha256: str | None = None


class _Arm(BaseModel, extra="allow"):
    name: str


class _Config(BaseModel, extra="allow"):
    arms: list[_Arm] = []


class _RunJson(BaseModel, extra="allow"):
    """What the readers of run.json rely on (the rest is a record for people and for `manifest_diff`)."""

    run_id: str | None = None
    config: _Config | None = None
    suite: _Part | None = None
    pack: _Part | None = None


def read_run_json(run_dir: Path) -> dict[str, Any]:
    """A run directory's run.json ({} when it has none). One that is not UTF-8 JSON, not an object,
    or whose config, suite or pack is the wrong shape, is a RunError naming the file."""
    found = _read_run_file(run_dir / RUN_JSON, _RunJson, "a run's run.json", "; use another --out, or restore the file")
    if found is None:
        return {}
    data, _ = found
    assert isinstance(data, dict)
    return data


def read_engine_settings(run_dir: Path) -> EngineSettings | None:
    """The run directory's engine.json, None when it has none; a bad one is a RunError naming it."""
    found = _read_run_file(run_dir / ENGINE_JSON, EngineSettings, "an engine.json")
    return None if found is None else found[1]


def _read_run_file(path: Path, model: type[_Model], what: str, hint: str = "") -> tuple[Any, _Model] | None:
    """A JSON file of the run directory as read and as `model` validates it (None when absent);
    not UTF-8 JSON, or not the model's shape, is a RunError naming the file."""
    if not path.is_file():
        return None
    try:
        data = read_json_value(path)
        return data, model.model_validate(data)
    except JsonFileError as exc:
        raise RunError(f"{exc}{hint}") from None
    except ValueError as exc:  # ValidationError: not an object, or a part of the wrong shape
        raise RunError(f"{path}: not {what} ({excerpt(str(exc).splitlines()[0])}){hint}") from None


def config_entries(config: RunConfig) -> dict[str, Any]:
    """run.json's `config` (the config as JSON values: what a resumed run must match) and its sha256."""
    fingerprint = json.loads(config.model_dump_json())
    return {"config": fingerprint,
            "config_sha256": hashlib.sha256(json.dumps(fingerprint, sort_keys=True).encode()).hexdigest()}


def _flatten(value: Any, prefix: str = "") -> dict[str, Any]:
    if isinstance(value, dict):
        out: dict[str, Any] = {}
        for key, item in value.items():
            out.update(_flatten(item, f"{prefix}.{key}" if prefix else str(key)))
        return out
    if isinstance(value, list):
        out = {}
        for i, item in enumerate(value):
            out.update(_flatten(item, f"{prefix}[{i}]"))
        return out or {prefix: []}
    return {prefix: value}


def manifest_diff(old: dict[str, Any], new: dict[str, Any]) -> list[str]:
    """What changed between the recorded run and this invocation, in what decides the results.

    The endpoint's address is not part of that: a run may resume through a gateway restarted
    on another port. Arms, decoding, memory, runner settings, the suite's content and the weights that serve each
    arm (their fingerprints) are.
    """
    before, after = _identity(old), _identity(new)
    return [f"{key}: {before.get(key, '(absent)')!r} -> {after.get(key, '(absent)')!r}"
            for key in sorted(set(before) | set(after)) if before.get(key) != after.get(key)]


def _identity(manifest: dict[str, Any]) -> dict[str, Any]:
    config = {k: v for k, v in _object(manifest.get("config")).items() if k != "endpoint"}
    weights = {arm: _object(identity).get("fingerprint") for arm, identity in _object(manifest.get(SERVED)).items()}
    return _flatten({"config": config, "suite.sha256": _object(manifest.get("suite")).get("sha256"),
                     "pack.sha256": _object(manifest.get("pack")).get("sha256"),
                     "endpoint_kind": manifest.get("endpoint_kind"), "served weights": weights})


def _object(value: Any) -> dict[str, Any]:
    """`value` when it is a JSON object, else empty (a hand-edited run.json differs, never crashes)."""
    return value if isinstance(value, dict) else {}


def read_completed(results_path: Path, key: str = "decision_id") -> set[tuple[str, str]]:
    """(arm, `key`) pairs already recorded. A torn last line (killed mid-write) is cut off."""
    if not results_path.exists():
        return set()
    cut_torn_tail(results_path)
    done: set[tuple[str, str]] = set()
    for line in read_jsonl_values(results_path, "a result"):
        row = line.value
        problem = "; ".join(line.problems)
        if row is not None and not (isinstance(row.get("arm"), str) and isinstance(row.get(key), str)):
            row, problem = None, f"no string 'arm' and {key!r}"
        if row is None:
            raise RunError(f"{results_path}:{line.number}: unreadable result line ({problem}); fix or move the file")
        done.add((row["arm"], row[key]))
    return done


@contextmanager
def run_lock(run_dir: Path) -> Iterator[None]:
    """One writer per run directory: an exclusive `flock` on `run.lock` while the run writes.

    A second run into the same directory is refused (two writers would duplicate results); the
    OS drops the lock when its process dies, kill -9 included, so a crashed run resumes.
    """
    run_dir.mkdir(parents=True, exist_ok=True)
    path = run_dir / RUN_LOCK
    with path.open("a") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise RunError(f"another worker-replay run is writing into {run_dir} (it holds {path}); "
                           "wait for it to finish, or use another --out") from None
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def check_run_dir(run_dir: Path, manifest: dict[str, Any]) -> bool:
    """Whether `run_dir` already holds this run (resume); a different config or suite is refused
    with what changed. Writes nothing."""
    if not (run_dir / RUN_JSON).exists():
        return False
    old = read_run_json(run_dir)
    changes = manifest_diff(old, manifest)
    if changes:
        raise RunError(f"{run_dir} holds a run with a different config, suite or pack; refusing to mix results:\n  "
                       + "\n  ".join(changes) + "\nUse a new --out directory for a new run.")
    return True


def prepare_run_dir(run_dir: Path, manifest: dict[str, Any]) -> bool:
    """Create the run directory and its run.json, or check that an existing one is for the same
    config and suite. Returns True when resuming."""
    if check_run_dir(run_dir, manifest):
        return True
    run_dir.mkdir(parents=True, exist_ok=True)
    _write_run_json(run_dir, {**manifest, "run_id": uuid.uuid4().hex})
    return False


def _write_run_json(run_dir: Path, manifest: dict[str, Any]) -> None:
    write_text_atomic(run_dir / RUN_JSON, json.dumps(manifest, indent=2) + "\n")


class Seal(BaseModel):
    """`run.json`'s `seal`: the results file as its run left it. `sealed`: the run finished and the whole file is
    this; `open`: a resume is appending to it, and its first `bytes` must still be this."""

    model_config = ConfigDict(extra="forbid")
    file: str
    state: Literal["sealed", "open"]
    sha256: str
    bytes: int
    lines: int
    at: datetime


def _digest(path: Path, size: int | None = None) -> tuple[str, int, int]:
    """sha256, length and line count of `path` (of its first `size` bytes); an absent file is empty."""
    digest, length, lines = hashlib.sha256(), 0, 0
    if path.is_file():
        with path.open("rb") as handle:
            while chunk := handle.read(1 << 20 if size is None else min(1 << 20, size - length)):
                digest.update(chunk)
                length += len(chunk)
                lines += chunk.count(b"\n")
    return digest.hexdigest(), length, lines


def read_seal(run_dir: Path) -> Seal | None:
    """The run's seal (None: no run.json, or a run.json without one); a seal of the wrong shape is a RunError."""
    found = read_run_json(run_dir).get("seal")
    if found is None:
        return None
    try:
        return Seal.model_validate(found)
    except ValidationError as exc:
        raise RunError(f"{run_dir / RUN_JSON}: its seal is not one ({excerpt(str(exc).splitlines()[0])}); "
                       "restore the file, or re-run into a new --out") from None


def check_resumable(run_dir: Path, results: str) -> None:
    """A resume only appends: what the seal covers must be unchanged, or the resume would seal the change."""
    seal = read_seal(run_dir)
    if seal is None:
        return
    path = run_dir / results
    sha256, length, _ = _digest(path, seal.bytes)
    if (sha256, length) != (seal.sha256, seal.bytes):
        raise RunError(f"{path}: changed after its run sealed it (its first {seal.bytes} bytes no longer match "
                       f"run.json's seal); restore the file, or run into a new --out")


def open_seal(run_dir: Path) -> None:
    """Mark the seal `open` while a resume appends (nothing to do for a run never sealed)."""
    manifest = read_run_json(run_dir)
    seal = read_seal(run_dir)
    if seal is not None and seal.state == "sealed":
        _write_run_json(run_dir, {**manifest, "seal": json.loads(seal.model_copy(update={"state": "open"})
                                                                  .model_dump_json())})


def seal_run(run_dir: Path, results: str) -> Seal:
    """Seal a finished run: the results file's digest into run.json, after proving the sealed part unchanged."""
    check_resumable(run_dir, results)
    sha256, length, lines = _digest(run_dir / results)
    seal = Seal(file=results, state="sealed", sha256=sha256, bytes=length, lines=lines, at=datetime.now(UTC))
    _write_run_json(run_dir, {**read_run_json(run_dir), "seal": json.loads(seal.model_dump_json())})
    return seal


def check_seal(run_dir: Path, results: str, error: type[ReplayError] = ResultsError) -> Seal:
    """The seal of a finished run whose results file is still what it sealed; `error` (one line naming the
    file) for a run with no run.json, one that did not finish, or results changed since."""
    path = run_dir / results
    if not (run_dir / RUN_JSON).is_file():
        raise error(f"{path}: no run.json beside it, so nothing vouches for these results; judge only a run "
                    "directory that `worker-replay run` (or `sandbox run`) wrote")
    seal = read_seal(run_dir)
    if seal is None or seal.state != "sealed" or seal.file != results:
        raise error(f"{path}: its run did not finish (run.json holds no seal); run the same command again to "
                    "finish it, which seals it")
    sha256, length, _ = _digest(path)
    if (sha256, length) != (seal.sha256, seal.bytes):
        raise error(f"{path}: changed after its run sealed it (sha256 {sha256[:12]}, sealed {seal.sha256[:12]}); "
                    "restore the file, or re-run into a new --out")
    return seal


def run_identity(run_dir: Path) -> tuple[str, str]:
    """(run_id, results sha256) of a sealed run, as the ledger knows it; `check_seal`'s refusals apply. A run
    begun before run ids (sealed on a later resume) is known by its results' digest, `sha256:<hex>`."""
    seal = check_seal(run_dir, RESULTS)
    run_id = read_run_json(run_dir).get("run_id")
    return (run_id if isinstance(run_id, str) and run_id else f"sha256:{seal.sha256}"), seal.sha256


def load_results(run_dir: str | Path) -> list[ResultRecord]:
    """Every line of `<run_dir>/results.jsonl` of a sealed run; a bad or duplicated line is an error with
    file:line, and so are results their seal does not vouch for (`check_seal`)."""
    path = Path(run_dir) / RESULTS
    if not path.is_file():
        raise ResultsError(f"{path}: not found (is {run_dir} a run directory?)")
    check_seal(Path(run_dir), RESULTS)
    records: list[ResultRecord] = []
    seen: dict[tuple[str, str], int] = {}
    for line in read_jsonl(path, ResultRecord, "a result"):
        record, number = line.value, line.number
        if record is None:
            more = f" (and {len(line.problems) - 1} more)" if len(line.problems) > 1 else ""
            raise ResultsError(f"{path}:{number}: {line.problems[0]}{more}")
        key = (record.arm, record.decision_id)
        if key in seen:
            raise ResultsError(
                f"{path}:{number}: second result for arm {record.arm!r} decision {record.decision_id!r} "
                f"(first at line {seen[key]}); a run has one line per arm × decision"
            )
        seen[key] = number
        records.append(record)
    return records
