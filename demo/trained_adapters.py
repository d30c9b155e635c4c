"""The demo's two trained candidate adapters (`recovery`, `mix`; cf. 001 S1), built once and cached.

Training itself is the engine's (`serve/engine/train.py`); what is demo-specific is the data
(the demo suite's training split) and where the results are cached.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path
from typing import TypedDict

from demo.demo_data import TRAIN_JSONL, build_demo, write_demo
from serve.engine.modelbuild import check_model_dir, default_model_dir, sha256_file
from serve.engine.outdir import marker_key, replaced_whole
from serve.engine.train import (
    DEFAULT_TEMPLATE,
    DEMO_BATCH,
    DEMO_EPOCHS,
    DEMO_EXAMPLES,
    DEMO_LR,
    DEMO_MAX_LEN,
    DEMO_SEED,
    MARKER,
    SELECTIONS,
    PrefixStates,
    examples_sha256,
    load_training,
    progress,
    select_examples,
    train_adapter,
)


def cached_demo_dir(cache_dir: Path, seed: int = DEMO_SEED) -> Path:
    """The demo files of `seed` under the cache, written once (through a staging directory,
    so an interrupted write is redone rather than half used). The directory is named by a hash
    of the generated training split, so a changed generator writes (and trains on) new data."""
    digest = examples_sha256(build_demo(seed)[1])[:12]
    demo_dir = cache_dir / "demo-data" / f"s{seed}-{digest}"
    if not demo_dir.exists():
        staging = demo_dir.with_name(f".s{seed}-{digest}-staging")
        shutil.rmtree(staging, ignore_errors=True)
        write_demo(staging, seed=seed)
        staging.rename(demo_dir)
    return demo_dir


class _Settings(TypedDict):
    """`train_adapter`'s hyper-parameters, hashed into each adapter's marker."""

    seed: int
    rank: int
    alpha: int
    epochs: int
    lr: float
    batch_size: int
    max_len: int

def demo_adapter_dir(cache_dir: Path, name: str, seed: int = DEMO_SEED) -> Path:
    return cache_dir / "adapters" / f"demo-{name}-s{seed}"


def build_demo_adapters(demo_dir: Path, cache_dir: Path, seed: int = DEMO_SEED,
                        model_dir: Path | None = None, verbose: bool = True) -> dict[str, Path]:
    """Train the `recovery` and `mix` candidates from `demo_dir/train.jsonl` on `model_dir`
    (default: the embedded model `worker-serve model build` writes, which the engine serves), idempotently.

    Each adapter directory holds a marker with a hash of its training examples, the
    hyper-parameters, the chat template and the base's weights; a directory whose marker matches is reused as is,
    anything else is retrained into a staging directory and swapped in whole. An adapter it trains gets one
    line saying what it became (`verbose` adds what it trains on and a line per training step); one it
    reuses gets none, so a cached demo's first screen holds only what the demo found.
    """
    model_dir = model_dir or default_model_dir(cache_dir)
    check_model_dir(model_dir)
    examples = load_training(demo_dir / TRAIN_JSONL)
    template = DEFAULT_TEMPLATE.read_text(encoding="utf-8")
    base = sha256_file(model_dir / "model.safetensors")  # a new base (a rebuilt model) retrains the adapters
    out: dict[str, Path] = {}
    base_states: PrefixStates = {}
    for name in SELECTIONS:
        chosen = select_examples(examples, name, DEMO_EXAMPLES, seed)
        settings: _Settings = {"seed": seed, "rank": 16, "alpha": 32, "epochs": DEMO_EPOCHS, "lr": DEMO_LR,
                    "batch_size": DEMO_BATCH, "max_len": DEMO_MAX_LEN}
        key = hashlib.sha256(json.dumps({"examples": examples_sha256(chosen), "settings": settings,
                                         "template": template, "base": base}, sort_keys=True).encode()).hexdigest()
        target = demo_adapter_dir(cache_dir, name, seed)
        out[name] = target
        if marker_key(target / MARKER) == key:
            continue
        if verbose:
            progress(f"{target.name}: training on {len(chosen)} examples "
                     f"({', '.join(sorted({e.stratum for e in chosen}))})")
        with replaced_whole(target) as staging:
            report = train_adapter(model_dir, chosen, staging, label=target.name, base_states=base_states,
                                   on_step=progress if verbose else None, **settings)
            strata = {s: sum(e.stratum == s for e in chosen) for s in SELECTIONS[name]}
            (staging / MARKER).write_text(json.dumps(
                {"key": key, "selection": name, "strata": strata, "report": report.model_dump()}, indent=2) + "\n",
                encoding="utf-8")
        progress(f"{target.name}: {report.summary()}")
    return out
