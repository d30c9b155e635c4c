"""Build the worker base: a seeded LoRA on `data`'s examples, merged into SmolLM2-135M-Instruct.

The result is a plain checkpoint under the cache (`models/SmolLM2-135M-worker`) that the engine
serves as `worker-base` and the demo adapters train on. Same seed, same data, same settings and
the same machine kind give the same weights (CPU training is deterministic for a fixed thread
count; the marker records the weights' sha256 so a rebuild can be compared). A marker whose key
matches makes a second build a no-op; anything else rebuilds into a staging directory that is
swapped in whole.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from dataclasses import asdict, dataclass
from pathlib import Path

from demo.workerbase.data import build_examples
from serve.engine.modelbuild import check_model_dir, default_model_dir, sha256_file
from serve.engine.train import (
    DEFAULT_TEMPLATE,
    MARKER,
    examples_sha256,
    marker_key,
    merge_adapter,
    progress,
    replaced_whole,
    train_adapter,
)

WORKER_MODEL_NAME = "SmolLM2-135M-worker"
WEIGHTS = "model.safetensors"


@dataclass(frozen=True)
class BaseSettings:
    """What the build trains with; hashed into the marker."""

    seed: int = 0
    examples: int = 300
    epochs: int = 1
    lr: float = 2e-3
    rank: int = 16
    alpha: int = 32
    batch_size: int = 4
    max_len: int = 2048
    decision_weight: float = 4.0
    """Extra weight on the tokens naming the tool (`train_adapter`)."""


def worker_model_dir(cache_dir: Path) -> Path:
    return cache_dir / "models" / WORKER_MODEL_NAME


def weights_sha256(model_dir: Path) -> str:
    return sha256_file(model_dir / WEIGHTS)


def build_worker_base(cache_dir: Path, settings: BaseSettings = BaseSettings(),
                      out_dir: Path | None = None) -> Path:
    """Train and merge the worker base into `out_dir` (default: the cache's), unless it is current."""
    source = default_model_dir(cache_dir)
    check_model_dir(source)
    target = out_dir or worker_model_dir(cache_dir)
    examples = build_examples(settings.examples, settings.seed)
    key = hashlib.sha256(json.dumps({
        "examples": examples_sha256(examples), "settings": asdict(settings),
        "template": DEFAULT_TEMPLATE.read_text(encoding="utf-8"), "source": weights_sha256(source),
    }, sort_keys=True).encode()).hexdigest()
    if marker_key(target / MARKER) == key:
        progress(f"{target.name}: up to date")
        return target
    progress(f"{target.name}: training on {len(examples)} synthetic tool-loop examples (a few minutes on CPU)")
    with replaced_whole(target) as staging:
        adapter = staging / "adapter"
        report = train_adapter(source, examples, adapter, seed=settings.seed, rank=settings.rank,
                               alpha=settings.alpha, epochs=settings.epochs, lr=settings.lr,
                               max_len=settings.max_len, batch_size=settings.batch_size, label=target.name,
                               decision_weight=settings.decision_weight)
        merge_adapter(source, adapter, staging)
        shutil.rmtree(adapter)
        (staging / MARKER).write_text(json.dumps(
            {"key": key, "settings": asdict(settings), "weights_sha256": weights_sha256(staging),
             "report": report.model_dump()}, indent=2) + "\n", encoding="utf-8")
    progress(f"{target.name}: {report.summary()}")
    return target
