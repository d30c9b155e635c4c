"""A curated training set's formats, which curation writes (replay/curation/) and the trainer reads
(serve/engine/train.py): `train.jsonl`, one `ChatTrainingRow` a line, and `manifest.json`, whose
`train_sha256` ties the rows to what the manifest says of them, so an adapter names the data it learned."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from core.attestation import file_sha256
from core.errors import WorkerTierError
from core.jsonfile import read_json, read_jsonl_strict
from core.records import Strict

TRAIN_JSONL = "train.jsonl"
PROVENANCE_JSONL = "provenance.jsonl"
MANIFEST_JSON = "manifest.json"


class ChatTrainingRow(Strict):
    """One line of `train.jsonl` in OpenAI fine-tuning's chat shape (which TRL and Axolotl read too):
    `messages` ending in the assistant turn to learn, and the offered `tools` as functions."""

    messages: list[dict[str, Any]] = Field(min_length=2)
    tools: list[dict[str, Any]]


class ClassCount(Strict):
    asked: int
    got: int
    candidates: int
    """Candidates of the class that passed every boundary (before caps and the draw)."""


class PolicyRef(Strict):
    path: str
    name: str
    version: str
    sha256: str


class SuiteRef(Strict):
    path: str
    name: str
    version: str
    sha256: str
    decisions: int


class EvalBoundary(Strict):
    """Which registry of frozen suites the build excluded, or that it was told in so many words not to."""

    suites_dir: str
    registered: list[str] = Field(default_factory=list)
    """The registered suites' directories (each also in `excluded_suites` unless `enforced` is false)."""
    enforced: bool = True
    """False only under `--no-eval-boundary`: the registered suites were not excluded."""


class CorpusSnapshot(Strict):
    root: str
    files: int
    files_sha256: str
    """sha256 over each session file's path (relative to the root) and size, sorted: a changed corpus shows."""


class RunRef(Strict):
    path: str
    kind: str
    results_sha256: str


class CurationManifest(Strict):
    """`manifest.json`."""

    policy: PolicyRef
    seed: int
    shrunk: bool
    """The policy said `shrink` and a class fell short: every class was cut alike (by the share of its ask the
    shortest got; a class that got nothing left out), so `got` keeps the mix of `asked`."""
    classes: dict[str, ClassCount]
    """Per class of the mix (`clean`, `recovery`, `policy`, `negative`)."""
    examples: int
    refusals: dict[str, int] = Field(default_factory=dict)
    """Decisions refused by a boundary (S14), by reason."""
    capped: dict[str, int] = Field(default_factory=dict)
    """Candidates passed over for the policy's caps (per cluster, per tool)."""
    unproven_failures: int = 0
    """Known failures no run proved a correction for (no example, and no refusal)."""
    redactions: dict[str, int] = Field(default_factory=dict)
    excluded_suites: list[SuiteRef] = Field(default_factory=list)
    eval_boundary: EvalBoundary
    corpora: list[CorpusSnapshot]
    runs: list[RunRef] = Field(default_factory=list)
    train_sha256: str
    provenance_sha256: str | None = None
    """`provenance.jsonl`'s sha256 (sets built before it lack it): the lineage a gate reads is the one built."""
    data_until: str | None = None
    """When the newest decision an example came from was captured (ISO time, as the corpus recorded it): a
    candidate trained on the set is judged fresh only on decisions captured after it (sets built before it lack
    it; a set of no dated decision has none)."""


TRAIN_RECORD = "worker-tier-train.json"
"""The record `worker-serve adapter train` writes beside an adapter (serve/engine/train.py's MARKER)."""


class CuratedData(BaseModel):
    """A training record's `data` when the adapter learned a curated set: the set and the digests it had (what
    else the record says is the trainer's own)."""

    model_config = ConfigDict(extra="ignore")
    path: str
    manifest_sha256: str
    train_sha256: str
    policy: PolicyRef
    examples: int


class CuratedSetError(WorkerTierError, ValueError):
    """A directory that is not a curated set as its manifest describes it (the message names the file)."""


class ExampleClass(BaseModel):
    """What the trainer reads of a `provenance.jsonl` line (replay/curation/dataset.py writes the whole record):
    which line of `train.jsonl` it describes and that example's class of the mix."""

    model_config = ConfigDict(extra="ignore")
    example: int
    mix_class: str


def read_classes(directory: Path, rows: int) -> list[str]:
    """Each row's class of the mix, in `train.jsonl`'s order, from `provenance.jsonl`: one line per row,
    numbered 1 to `rows` (else the set is not one build's)."""
    path = directory / PROVENANCE_JSONL
    if not path.is_file():
        raise CuratedSetError(f"{directory}: not a curated set (it needs {PROVENANCE_JSONL} beside {TRAIN_JSONL})")
    lines = read_jsonl_strict(path, ExampleClass, "a provenance line")
    if [line.example for line in lines] != list(range(1, rows + 1)):
        raise CuratedSetError(f"{path}: its lines do not number the {rows} rows of {TRAIN_JSONL} in order; the set "
                              "was changed after it was built; build it again")
    return [line.mix_class for line in lines]


def read_curated(directory: Path) -> tuple[CurationManifest, str, list[ChatTrainingRow]]:
    """The manifest, its own sha256 and the rows, after proving `train.jsonl` is the file the manifest names."""
    manifest_path, train_path = directory / MANIFEST_JSON, directory / TRAIN_JSONL
    if not manifest_path.is_file() or not train_path.is_file():
        raise CuratedSetError(f"{directory}: not a curated set (it needs {MANIFEST_JSON} and {TRAIN_JSONL})")
    manifest = read_json(manifest_path, CurationManifest)
    actual = file_sha256(train_path)
    if actual != manifest.train_sha256:
        raise CuratedSetError(f"{train_path}: sha256 {actual} is not the {manifest.train_sha256} that {manifest_path} "
                              "names: the set was changed after it was built; build it again")
    return manifest, file_sha256(manifest_path), read_jsonl_strict(train_path, ChatTrainingRow, "a training row")
