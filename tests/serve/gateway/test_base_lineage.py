"""The base model the gateway names on every `/v1/models` entry and in its admin state: the engines' model
directory by digest, scheme and what it was built from; nothing where the replicas disagree or none can be read."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from core.lineage import QUANTIZE_RECORD, model_sha256
from serve.gateway.base_lineage import UNKNOWN, base_lineage
from serve.gateway.config import UpstreamConfig
from serve.gateway.upstreams import UpstreamPool

DERIVED = {"source_sha256": "c" * 64, "fingerprint": "a" * 64, "base_sha256": "b" * 64}


def checkpoint(path: Path, weights: bytes) -> Path:
    """A quantised checkpoint as `model quantize` leaves it, as far as lineage reads it."""
    path.mkdir()
    (path / "config.json").write_text(json.dumps({"model_type": "llama", "quantization_config": {
        "quant_method": "compressed-tensors", "format": "int-quantized"}}))
    (path / QUANTIZE_RECORD).write_text(json.dumps({"scheme": "w8a8-int8", "source_sha256": "c" * 64,
                                                    "derived_from": DERIVED}))
    (path / "model.safetensors").write_bytes(weights)
    return path


def pool(*roots: Path | None) -> UpstreamPool:
    """Replicas that, as their last probe found, serve `worker-base` from these directories (None: no root)."""
    upstreams = UpstreamPool([UpstreamConfig(name=f"e{i}", url=f"http://127.0.0.1:{9000 + i}")
                              for i in range(len(roots))], 1.0, 1.0, 3)
    for upstream, root in zip(upstreams.upstreams, roots, strict=True):
        upstream.models = {"worker-base": None if root is None else str(root)}
    return upstreams


def test_the_engines_model_is_named_by_digest_scheme_and_origin(tmp_path: Path) -> None:
    one = checkpoint(tmp_path / "one", b"w")
    found = asyncio.run(base_lineage(pool(one, one, None), "worker-base"))
    assert found == {"base_sha256": model_sha256(one), "quantization": "w8a8-int8", "derived_from": DERIVED}


def test_replicas_serving_different_models_name_none(tmp_path: Path) -> None:
    one, two = checkpoint(tmp_path / "one", b"w"), checkpoint(tmp_path / "two", b"x")
    assert asyncio.run(base_lineage(pool(one, two), "worker-base")) == UNKNOWN
    assert asyncio.run(base_lineage(pool(tmp_path / "elsewhere"), "worker-base")) == UNKNOWN
    assert asyncio.run(base_lineage(pool(None), "worker-base")) == UNKNOWN
