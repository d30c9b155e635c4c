"""The worker-base build: reproducible (same seed → same weights), cached, and a checkpoint vLLM can serve."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from demo.workerbase.build import BaseSettings, build_worker_base, weights_sha256
from serve.engine.modelbuild import cache_dir, default_model_dir
from serve.engine.train import MARKER

# Two steps on four examples: the same code path as the real build, in seconds.
TINY = BaseSettings(examples=4, batch_size=2)


@pytest.fixture(scope="module")
def source() -> Path:
    if not (default_model_dir() / "config.json").is_file():
        pytest.skip("embedded model not built; run `worker-serve model build`")
    return cache_dir()


def test_same_seed_builds_the_same_weights_and_a_new_seed_other_ones(source: Path, tmp_path: Path) -> None:
    first = build_worker_base(source, TINY, out_dir=tmp_path / "a")
    second = build_worker_base(source, TINY, out_dir=tmp_path / "b")
    other = build_worker_base(source, BaseSettings(examples=4, batch_size=2, seed=1), out_dir=tmp_path / "c")
    assert weights_sha256(first) == weights_sha256(second) != weights_sha256(other)
    assert weights_sha256(first) != weights_sha256(default_model_dir())
    marker = json.loads((first / MARKER).read_text())
    assert marker["weights_sha256"] == weights_sha256(first) and marker["settings"]["seed"] == 0
    assert (first / "tokenizer.json").is_file() and json.loads((first / "config.json").read_text())["architectures"]


def test_a_current_build_is_reused_and_a_changed_setting_rebuilds(source: Path, tmp_path: Path) -> None:
    out = build_worker_base(source, TINY, out_dir=tmp_path / "m")
    stamp = (out / "model.safetensors").stat().st_mtime_ns
    assert build_worker_base(source, TINY, out_dir=tmp_path / "m") == out
    assert (out / "model.safetensors").stat().st_mtime_ns == stamp
    build_worker_base(source, BaseSettings(examples=4, batch_size=2, lr=5e-4), out_dir=tmp_path / "m")
    assert (out / "model.safetensors").stat().st_mtime_ns != stamp
