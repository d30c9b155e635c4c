"""A gate verdict as an attestation: the in-toto Statement (v1 layout) the gate writes and a trial reads.

The Statement names what it is about by digest (`subject`), and its predicate is the verdict with every input
it judged (`inputs`: the policy, the run's results, the suite, each evidence file), each by path and sha256, so
anyone can later recompute the digests and see which one changed (`worker-replay verify`). Both halves read it:
replay writes and verifies it, a trial's gate reads the verdict out of it.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

StatementType = Literal["https://in-toto.io/Statement/v1"]
STATEMENT_TYPE: StatementType = "https://in-toto.io/Statement/v1"
VERDICT_PREDICATE = "https://worker-tier.dev/attestations/gate-verdict/v1"
"""The project's predicate type: a gate verdict over the inputs it lists."""


class ResourceDescriptor(BaseModel):
    """in-toto's resource descriptor, as much of it as a verdict uses: a name, where it lies, its digest."""

    model_config = ConfigDict(extra="forbid")
    name: str
    uri: str | None = None
    digest: dict[str, str] = Field(min_length=1)


class Statement(BaseModel):
    """An in-toto Statement v1 (`_type`, `subject`, `predicateType`, `predicate`)."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)
    type: StatementType = Field(STATEMENT_TYPE, alias="_type")
    subject: list[ResourceDescriptor] = Field(min_length=1)
    predicateType: str  # noqa: N815 - in-toto's own field name
    predicate: dict[str, Any]

    def to_json(self) -> str:
        return self.model_dump_json(by_alias=True, indent=2) + "\n"


ADAPTER_WEIGHT_FILES = ("adapter_model.safetensors", "adapter_model.bin")
"""Where a PEFT LoRA directory keeps its weights."""


class DerivedFrom(BaseModel):
    """What a built model (an adapter merged into its base, or a quantised checkpoint) was made from, as `adapter
    merge` and `model quantize` record it: the directory read (`model_sha256`), and the high-precision weights it
    stands for, the adapter folded in (None: none) over the base model it was trained on."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    source_sha256: str
    fingerprint: str | None = None
    base_sha256: str


class ServedIdentity(BaseModel):
    """What answered for a name: the model id asked for, the version a gateway route resolved it to (or the
    adapter's own name), and the adapter's fingerprint (`adapter_fingerprint`; None for the base model, or where
    the endpoint does not say and its files cannot be read). Under it, the engine's model directory
    (`core.lineage`): its digest (`base_sha256`), its quantisation scheme (None: unquantised, or not known) and
    what it was built from (`derived_from`)."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    model: str
    version: str | None = None
    fingerprint: str | None = None
    root: str | None = None
    """The adapter's directory as the endpoint names it (vLLM's `root`, the gateway's too): where its training
    record (`worker-tier-train.json`) leads to the data it learned, for the contamination check."""
    base_sha256: str | None = None
    quantization: str | None = None
    derived_from: DerivedFrom | None = None

    def weights(self) -> tuple[str | None, str | None]:
        """The high-precision weights this answers with, (adapter fingerprint, base model digest): a built
        model's by what it was made from, else its own."""
        derived = self.derived_from
        if derived is None:
            return self.fingerprint, self.base_sha256
        if self.fingerprint is None:
            return derived.fingerprint, derived.base_sha256
        # An adapter over a build that already folds one in is no (adapter, base) pair: no base to name.
        return self.fingerprint, derived.base_sha256 if derived.fingerprint is None else None


def adapter_fingerprint(directory: Path) -> str:
    """sha256 over a LoRA adapter's config and weights: what the gateway registers it by and refuses changed
    weights on, and what a verdict names the candidate's weights by."""
    digest = hashlib.sha256()
    for name in ("adapter_config.json", *ADAPTER_WEIGHT_FILES):
        file = directory / name
        if file.is_file():
            digest.update(name.encode() + b"\0")
            with file.open("rb") as handle:
                for block in iter(lambda: handle.read(1 << 20), b""):
                    digest.update(block)
    return digest.hexdigest()


def file_sha256(path: Path) -> str:
    """The sha256 of a file's bytes, read in chunks."""
    with path.open("rb") as handle:
        return hashlib.file_digest(handle, "sha256").hexdigest()


def tree_sha256(directory: Path) -> str:
    """A directory's digest: the sha256 of its regular files' relative paths and digests, sorted (the layout
    Git and sigstore's directory digests follow), so a renamed, added, removed or changed file changes it."""
    listing = "".join(f"{file_sha256(p)}  {p.relative_to(directory).as_posix()}\n"
                      for p in sorted(directory.rglob("*")) if p.is_file() and not p.is_symlink())
    return hashlib.sha256(listing.encode()).hexdigest()
