"""What served each arm (custody item 1): read off `/v1/models` as the gateway and vLLM write it, recorded in
run.json's `served`, and a resume against other weights under the same name refused with what changed."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from core.attestation import DerivedFrom, ServedIdentity, adapter_fingerprint
from core.lineage import QUANTIZE_RECORD, model_sha256
from replay.run.decisions import run
from replay.run.directory import RUN_JSON, RunError, manifest_diff, read_run_json
from replay.run.endpoint import served_identity, vllm_lineage
from tests.support.fault_upstream import BASE, FaultUpstream
from tests.support.gateway_harness import fake_adapter, start_gateway
from tests.support.runs import config, suite


def adapter_dir(tmp_path: Path, weights: bytes) -> Path:
    """A LoRA directory as far as a fingerprint reads it: its config and its weights file."""
    path = tmp_path / f"lora-{weights.hex()}"
    path.mkdir()
    (path / "adapter_config.json").write_text('{"peft_type": "LORA", "r": 8}')
    (path / "adapter_model.safetensors").write_bytes(weights)
    return path


def test_each_kind_of_models_entry_names_what_serves_it(tmp_path: Path) -> None:
    lora = adapter_dir(tmp_path, b"\x01\x02")
    # the gateway: an adapter's fingerprint and directory (`root`, as vLLM names it), a route's production's
    assert served_identity({"id": "mix-v1", "kind": "adapter", "fingerprint": "a" * 64, "root": "/a/mix"}) == \
        ServedIdentity(model="mix-v1", version="mix-v1", fingerprint="a" * 64, root="/a/mix")
    assert served_identity({"id": "worker", "kind": "route", "production": "mix-v1",
                            "production_fingerprint": "a" * 64, "production_root": "/a/mix"}) == \
        ServedIdentity(model="worker", version="mix-v1", fingerprint="a" * 64, root="/a/mix")
    assert served_identity({"id": "worker", "kind": "route", "production": "base", "production_fingerprint": None}) \
        == ServedIdentity(model="worker", version="base")
    assert served_identity({"id": "worker-base", "kind": "base"}) == ServedIdentity(model="worker-base")
    # vLLM: a LoRA module names its directory and its parent; this machine reads and fingerprints it
    assert served_identity({"id": "mix", "root": str(lora), "parent": "worker-base"}) == \
        ServedIdentity(model="mix", version="mix", fingerprint=adapter_fingerprint(lora), root=str(lora))
    assert served_identity({"id": "worker-base", "root": "/models/SmolLM2", "parent": None}) == \
        ServedIdentity(model="worker-base")
    assert served_identity({"id": "mix", "root": str(tmp_path / "elsewhere"), "parent": "worker-base"}) == \
        ServedIdentity(model="mix")  # a directory this machine cannot read: nothing claimed


DERIVED = {"source_sha256": "c" * 64, "fingerprint": "a" * 64, "base_sha256": "b" * 64}


def test_every_gateway_entry_names_the_base_model_under_it() -> None:
    """The gateway states the engine's model on each entry: its digest, its scheme and what it was built from."""
    under = {"base_sha256": "d" * 64, "quantization": "w8a8-int8", "derived_from": DERIVED}
    lineage = {"base_sha256": "d" * 64, "quantization": "w8a8-int8", "derived_from": DerivedFrom(**DERIVED)}
    assert served_identity({"id": "worker", "kind": "route", "production": "worker-base",
                            "production_fingerprint": None, **under}) == \
        ServedIdentity(model="worker", version="worker-base", **lineage)
    assert served_identity({"id": "mix-v1", "kind": "adapter", "fingerprint": "a" * 64, **under}) == \
        ServedIdentity(model="mix-v1", version="mix-v1", fingerprint="a" * 64, **lineage)
    # A quantised build stands for the adapter it folds in, over that adapter's base.
    assert served_identity({"id": "worker-base", "kind": "base", **under}).weights() == ("a" * 64, "b" * 64)
    bad = {**under, "derived_from": {"fingerprint": 3}}
    assert served_identity({"id": "worker-base", "kind": "base", **bad}).derived_from is None


def model_dir(tmp_path: Path, quantised: bool) -> Path:
    """A model directory as lineage reads it: config.json (with a quantization_config when quantised) and the
    record `model quantize` leaves."""
    path = tmp_path / ("quantised" if quantised else "model")
    path.mkdir()
    config: dict[str, object] = {"model_type": "llama"}
    if quantised:
        config["quantization_config"] = {"quant_method": "compressed-tensors", "format": "int-quantized"}
        (path / QUANTIZE_RECORD).write_text(json.dumps({"scheme": "w8a8-int8", "source_sha256": "c" * 64,
                                                        "derived_from": DERIVED}))
    (path / "config.json").write_text(json.dumps(config))
    (path / "model.safetensors").write_bytes(b"weights")
    return path


def test_a_vllm_base_entry_is_named_by_its_directory_where_this_machine_reads_it(tmp_path: Path) -> None:
    plain, quantised = model_dir(tmp_path, False), model_dir(tmp_path, True)
    entry = {"id": "worker-base", "root": str(plain), "parent": None}
    assert served_identity(entry, vllm_lineage(entry)) == ServedIdentity(model="worker-base",
                                                                         base_sha256=model_sha256(plain))
    entry = {"id": "worker-base", "root": str(quantised), "parent": None}
    assert served_identity(entry, vllm_lineage(entry)) == ServedIdentity(
        model="worker-base", base_sha256=model_sha256(quantised), quantization="w8a8-int8",
        derived_from=DerivedFrom(**DERIVED))
    (quantised / QUANTIZE_RECORD).unlink()  # quantised by another tool: config.json's own words
    assert served_identity(entry, vllm_lineage(entry)).quantization == "compressed-tensors/int-quantized"
    assert vllm_lineage({"id": "worker-base", "root": str(tmp_path / "elsewhere"), "parent": None}) == {}


def test_the_fingerprint_is_of_the_weights(tmp_path: Path) -> None:
    one, other = adapter_dir(tmp_path, b"\x01"), adapter_dir(tmp_path, b"\x02")
    assert adapter_fingerprint(one) != adapter_fingerprint(other)
    (other / "adapter_model.safetensors").write_bytes(b"\x01")
    assert adapter_fingerprint(one) == adapter_fingerprint(other)


def test_a_run_records_what_served_each_arm(tmp_path: Path) -> None:
    with FaultUpstream() as upstream:
        run(suite(tmp_path), config(f"{upstream.url}/v1"), tmp_path / "run")
    assert read_run_json(tmp_path / "run")["served"] == {"base": {
        "model": BASE, "version": None, "fingerprint": None, "root": None, "base_sha256": None, "quantization": None,
        "derived_from": None}}


def test_a_resume_against_other_weights_under_the_same_name_is_refused(tmp_path: Path) -> None:
    old = {"config": {"arms": [{"name": "cand"}]}, "served": {"cand": {"model": "mix", "fingerprint": "a" * 64}}}
    new = {**old, "served": {"cand": {"model": "mix", "fingerprint": "b" * 64}}}
    assert manifest_diff(old, new) == [f"served weights.cand: {'a' * 64!r} -> {'b' * 64!r}"]
    with FaultUpstream() as upstream:
        run(suite(tmp_path), config(f"{upstream.url}/v1"), tmp_path / "run")
        manifest = json.loads((tmp_path / "run" / RUN_JSON).read_text())
        manifest["served"]["base"]["fingerprint"] = "a" * 64  # as if another adapter had served it before
        (tmp_path / "run" / RUN_JSON).write_text(json.dumps(manifest))
        with pytest.raises(RunError, match=r"served weights\.base: 'a{64}' -> None"):
            run(suite(tmp_path), config(f"{upstream.url}/v1"), tmp_path / "run")


def test_a_run_through_the_gateway_records_each_adapters_directory(tmp_path: Path) -> None:
    """The gateway's `/v1/models` names a loaded adapter's directory (`root`, as vLLM does) and a route's
    production's (`production_root`); the run records it beside the fingerprint: where the candidate's training
    lineage starts."""
    root = tmp_path / "adapters"
    with FaultUpstream() as upstream, start_gateway(tmp_path, root, [upstream]) as gw:
        weights = fake_adapter(root, "cand-v1")
        gw.ok("POST", "/adapters", {"name": "cand-v1", "path": "cand-v1"})
        gw.ok("POST", "/adapters/cand-v1/load")
        gw.ok("POST", "/routes/worker/production", {"version": "cand-v1"})
        arms = [{"name": "cand", "model": "cand-v1", "memory": "withheld"},
                {"name": "route", "model": "worker", "memory": "withheld"}]
        run(suite(tmp_path), config(f"{gw.url}/v1", arms=arms), tmp_path / "run")
    served = read_run_json(tmp_path / "run")["served"]
    fingerprint = adapter_fingerprint(weights)
    named = {arm: {key: identity[key] for key in ("model", "version", "fingerprint", "root")}
             for arm, identity in served.items()}
    assert named == {"cand": {"model": "cand-v1", "version": "cand-v1", "fingerprint": fingerprint,
                              "root": str(weights.resolve())},
                     "route": {"model": "worker", "version": "cand-v1", "fingerprint": fingerprint,
                               "root": str(weights.resolve())}}
