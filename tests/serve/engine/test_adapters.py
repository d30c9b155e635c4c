"""An adapter merged into its base: the LoRA deltas folded into the weights exactly as LoRA defines them, a model
the quantiser reads; an adapter of another base, or an --out that is not ours, refused with nothing lost."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from core.attestation import adapter_fingerprint
from core.lineage import MERGE_RECORD, QUANTIZE_RECORD, model_lineage, model_sha256
from serve.cli import main
from serve.engine.modelbuild import default_model_dir
from serve.engine.quantize import QuantizeError, quantize_model

LAYER = "model.layers.5.mlp.down_proj"


@pytest.fixture(scope="module")
def merged(seeded_adapters: dict[int, Path], tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("merge") / "merged"
    assert main(["adapter", "merge", str(seeded_adapters[1]), "--out", str(out)]) == 0
    return out


def test_the_merged_weights_are_the_base_plus_the_scaled_lora_product(merged: Path,
                                                                       seeded_adapters: dict[int, Path]) -> None:
    import torch
    from safetensors.torch import load_file

    base = load_file(default_model_dir() / "model.safetensors")
    lora = load_file(seeded_adapters[1] / "adapter_model.safetensors")
    config = json.loads((seeded_adapters[1] / "adapter_config.json").read_text())
    a = lora[f"base_model.model.{LAYER}.lora_A.weight"].float()
    b = lora[f"base_model.model.{LAYER}.lora_B.weight"].float()
    expected = base[f"{LAYER}.weight"].float() + (b @ a) * (config["lora_alpha"] / config["r"])
    got = load_file(merged / "model.safetensors")[f"{LAYER}.weight"]
    assert got.dtype == base[f"{LAYER}.weight"].dtype  # the base's dtype kept
    step = expected.abs().clamp(min=1e-3) * 2 ** -7  # one bfloat16 rounding of the sum
    assert torch.all((got.float() - expected).abs() <= step)
    assert not torch.equal(got, base[f"{LAYER}.weight"])  # the adapter is in it
    assert torch.equal(load_file(merged / "model.safetensors")["model.norm.weight"], base["model.norm.weight"])
    assert {"tokenizer.json", "config.json"} <= {p.name for p in merged.iterdir()}
    record = json.loads((merged / MERGE_RECORD).read_text())
    assert record["adapter"] == str(seeded_adapters[1].resolve())
    assert record["adapter_fingerprint"] == adapter_fingerprint(seeded_adapters[1])
    assert record["base_sha256"] == model_sha256(default_model_dir())


def test_the_merged_model_quantises(merged: Path, seeded_adapters: dict[int, Path], tmp_path: Path) -> None:
    result = quantize_model(merged, tmp_path / "q", "w8a8-int8")
    assert result.built and result.tensors == 210
    assert not (result.out_dir / MERGE_RECORD).exists()  # the merge's record describes the source, not this
    # The checkpoint names the adapter it was made from, over the base that adapter was trained on.
    lineage = model_lineage(result.out_dir)
    assert lineage is not None and lineage.quantization == "w8a8-int8" and lineage.derived_from is not None
    assert lineage.derived_from.model_dump() == {"source_sha256": model_sha256(merged),
                                                 "fingerprint": adapter_fingerprint(seeded_adapters[1]),
                                                 "base_sha256": model_sha256(default_model_dir())}


def test_a_merge_of_an_older_version_is_not_quantised_as_if_it_held_no_adapter(merged: Path, tmp_path: Path
                                                                               ) -> None:
    """A merged model whose record names no digests (an older `adapter merge`) would pass for the base: refused."""
    old = Path(shutil.copytree(merged, tmp_path / "old-merge"))
    record = json.loads((old / MERGE_RECORD).read_text())
    (old / MERGE_RECORD).write_text(json.dumps({"base": record["base"], "adapter": record["adapter"]}))
    with pytest.raises(QuantizeError, match="worker-tier-merge.json: not a build record this version reads"):
        quantize_model(old, tmp_path / "q", "w8a8-int8")
    assert not (tmp_path / "q" / QUANTIZE_RECORD).exists()


def test_refusals_write_nothing_and_keep_what_was_there(seeded_adapters: dict[int, Path], tmp_path: Path,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    other = tmp_path / "other-base-adapter"
    shutil.copytree(seeded_adapters[2], other)
    config = json.loads((other / "adapter_config.json").read_text())
    (other / "adapter_config.json").write_text(json.dumps({**config, "base_model_name_or_path": "/models/Qwen3-8B"}))
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "notes.txt").write_text("keep")
    cases = [([str(other), "--out", str(tmp_path / "a")], "trained on '/models/Qwen3-8B'"),
             ([str(tmp_path / "nothing"), "--out", str(tmp_path / "b")], "not a PEFT adapter's config"),
             ([str(seeded_adapters[2]), "--out", str(mine)], "holds files this command did not write"),
             ([str(seeded_adapters[2]), "--out", str(seeded_adapters[2] / "m")], "which the merge reads")]
    for argv, message in cases:
        assert main(["adapter", "merge", *argv]) == 2
        err = capsys.readouterr().err
        assert err.startswith("error: ") and err.count("\n") == 1 and message in err, err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["mine", "other-base-adapter"]
    assert [p.name for p in mine.iterdir()] == ["notes.txt"] and not (seeded_adapters[2] / "m").exists()
