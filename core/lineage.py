"""What a model directory is, read from its own files: its digest, its quantisation scheme (config.json's
`quantization_config`, named as `model quantize` recorded it) and what it was built from (the records `adapter
merge` and `model quantize` leave in it). The gateway exposes this for the engine's base model in `/v1/models`
and the admin API, a run records it per arm, and `quantisation_survives` binds a quantised run to the judged run's
weights by it (DESIGN §7, the chain of custody).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from pydantic import BaseModel, ConfigDict, ValidationError

from core.attestation import DerivedFrom
from core.errors import WorkerTierError

MERGE_RECORD = "worker-tier-merge.json"
QUANTIZE_RECORD = "worker-tier-quantize.json"


class MergeRecord(BaseModel):
    """`worker-tier-merge.json`: the base and the adapter a merged model was made of, by path and by digest."""

    model_config = ConfigDict(extra="allow")
    base: str
    adapter: str
    base_sha256: str
    adapter_fingerprint: str


class QuantizeRecord(BaseModel):
    """`worker-tier-quantize.json`, as much as lineage reads: the scheme and what was quantised."""

    model_config = ConfigDict(extra="allow")
    scheme: str
    source_sha256: str
    derived_from: DerivedFrom | None = None


_Record = TypeVar("_Record", bound=BaseModel)


class LineageError(WorkerTierError, ValueError):
    """A build record that is not one (the message names the file)."""


@dataclass(frozen=True)
class Lineage:
    """A model directory's identity: see the module."""

    sha256: str
    quantization: str | None
    derived_from: DerivedFrom | None


def model_sha256(model_dir: Path) -> str:
    """One sha256 over every file of the directory (relative name and content, in name order): what `model
    quantize` records its source by and what a served base model is named by."""
    digest = hashlib.sha256()
    for path in sorted(p for p in model_dir.rglob("*") if p.is_file()):
        digest.update(path.relative_to(model_dir).as_posix().encode() + b"\0")
        with path.open("rb") as fh:
            for block in iter(lambda: fh.read(1 << 20), b""):
                digest.update(block)
        digest.update(b"\0")
    return digest.hexdigest()


def read_merge_record(model_dir: Path) -> MergeRecord | None:
    """The merge record of a merged model (None: not one); one of an older merge, without digests, is refused."""
    return _read(model_dir / MERGE_RECORD, MergeRecord)


def read_quantize_record(model_dir: Path) -> QuantizeRecord | None:
    return _read(model_dir / QUANTIZE_RECORD, QuantizeRecord)


def _read(path: Path, model: type[_Record]) -> _Record | None:
    if not path.is_file():
        return None
    try:
        return model.model_validate_json(path.read_bytes())
    except (OSError, ValidationError) as exc:
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise LineageError(f"{path}: not a build record this version reads ({first}); build it again") from None


def built_from(model_dir: Path) -> DerivedFrom | None:
    """What the directory's own build records say it was made from (None: it records no build: a model as
    published or converted)."""
    quantized = read_quantize_record(model_dir)
    if quantized is not None and quantized.derived_from is not None:
        return quantized.derived_from
    merge = read_merge_record(model_dir)
    if merge is not None:
        return DerivedFrom(source_sha256=merge.base_sha256, fingerprint=merge.adapter_fingerprint,
                           base_sha256=merge.base_sha256)
    return None


def derived_from(model_dir: Path, sha256: str) -> DerivedFrom:
    """What a model built from `model_dir` (whose digest is `sha256`) stands for: the weights the directory was
    itself built from (an adapter over its base), else the directory itself as the base."""
    own = built_from(model_dir)
    if own is None:
        return DerivedFrom(source_sha256=sha256, base_sha256=sha256)
    return own.model_copy(update={"source_sha256": sha256})


def quantization_scheme(model_dir: Path) -> str | None:
    """The scheme the engine serves the directory in: `model quantize`'s name for it, else config.json's
    `quantization_config` as `quant_method[/format]`; None for an unquantised model (or no readable config)."""
    try:
        config = json.loads((model_dir / "config.json").read_bytes())
    except (OSError, ValueError):
        return None
    quant = config.get("quantization_config") if isinstance(config, dict) else None
    if not isinstance(quant, dict):
        return None
    record = read_quantize_record(model_dir)
    if record is not None:
        return record.scheme
    method, layout = quant.get("quant_method"), quant.get("format")
    return "/".join(str(part) for part in (method or "unknown", layout) if part)


_CACHE: dict[tuple[str, tuple[tuple[str, int, int], ...]], Lineage] = {}


def model_lineage(model_dir: Path) -> Lineage | None:
    """The lineage of a model directory (None: no model there), digested once per state of its files (their
    names, sizes and modification times), so a gateway can answer it on every model list."""
    if not (model_dir / "config.json").is_file():
        return None
    stats = tuple(sorted((p.relative_to(model_dir).as_posix(), st.st_size, st.st_mtime_ns)
                         for p in model_dir.rglob("*") if p.is_file() and (st := p.stat())))
    key = (str(model_dir.resolve()), stats)
    if key not in _CACHE:
        _CACHE[key] = Lineage(model_sha256(model_dir), quantization_scheme(model_dir), built_from(model_dir))
    return _CACHE[key]
