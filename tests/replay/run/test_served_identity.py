"""What served each arm (custody item 1): read off `/v1/models` as the gateway and vLLM write it, recorded in
run.json's `served`, and a resume against other weights under the same name refused with what changed."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from core.attestation import ServedIdentity, adapter_fingerprint
from replay.run.decisions import run
from replay.run.directory import RUN_JSON, RunError, manifest_diff, read_run_json
from replay.run.endpoint import served_identity
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


def test_the_fingerprint_is_of_the_weights(tmp_path: Path) -> None:
    one, other = adapter_dir(tmp_path, b"\x01"), adapter_dir(tmp_path, b"\x02")
    assert adapter_fingerprint(one) != adapter_fingerprint(other)
    (other / "adapter_model.safetensors").write_bytes(b"\x01")
    assert adapter_fingerprint(one) == adapter_fingerprint(other)


def test_a_run_records_what_served_each_arm(tmp_path: Path) -> None:
    with FaultUpstream() as upstream:
        run(suite(tmp_path), config(f"{upstream.url}/v1"), tmp_path / "run")
    assert read_run_json(tmp_path / "run")["served"] == {"base": {"model": BASE, "version": None,
                                                                  "fingerprint": None, "root": None}}


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
    assert served == {"cand": {"model": "cand-v1", "version": "cand-v1", "fingerprint": fingerprint,
                               "root": str(weights.resolve())},
                      "route": {"model": "worker", "version": "cand-v1", "fingerprint": fingerprint,
                                "root": str(weights.resolve())}}
