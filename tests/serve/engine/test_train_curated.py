"""Training on a curated set (`worker-replay curate build`'s directory): the rows the set holds, the loss on the
assistant's target turn only, and the data named in the adapter's own record."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from core.curated import MANIFEST_JSON, TRAIN_JSONL
from replay.curation.build import curate, open_inputs
from serve.cli import main
from serve.engine.modelbuild import default_model_dir
from serve.engine.train import DEFAULT_TEMPLATE, MARKER, answer_loss, curated_examples, encode
from tests.support.curation import LOOKUP, copy_workspace, keys_file, plant_retry_value, policy_file, session_path


@pytest.fixture(scope="module")
def curated(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Three examples from the recorded lookup sessions: two verified actions of ws-w, and ws-r's retry."""
    root = tmp_path_factory.mktemp("curated")
    copy_workspace(root / "corpus", "ws-w")
    copy_workspace(root / "corpus", "ws-r")
    plant_retry_value(session_path(root / "corpus", "ws-r", LOOKUP), LOOKUP, 1, {"id": "INV-8"})
    policy = policy_file(root, 'size = 3\nclean_from = ["verified_action"]\n[shares]\nclean = 100\n')
    curate(open_inputs([root / "corpus"], [], keys_file(root, ["ws-w", "ws-r"]), policy, [], []), root / "set")
    return root / "set"


def test_the_loss_is_the_target_turns_alone(curated: Path) -> None:
    """Our loss equals the library's loss with every prompt token's label masked (-100), and differs from it
    with the prompt's labels left in: the prompt's tokens carry no loss."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    model_dir = default_model_dir()
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32)
    examples, _ = curated_examples(curated)
    item = encode(tokenizer, DEFAULT_TEMPLATE.read_text(), examples[0])
    assert tokenizer.decode(list(item.suffix[-item.answer_len:])).startswith(
        '<tool_call>\n{"name": "mcp__inv__lookup", "arguments": {"id": "INV-')
    ids = torch.tensor([[*item.prefix, *item.suffix]])
    masked = ids.clone()
    masked[0, :-item.answer_len] = -100
    with torch.no_grad():
        ours = answer_loss(model, item, {}).item()
        library = model(ids, labels=masked).loss.item()
        unmasked = model(ids, labels=ids).loss.item()
    assert ours == pytest.approx(library, abs=1e-4)
    assert abs(unmasked - ours) > 1e-2


def test_training_on_a_curated_set_names_its_data_in_the_adapters_record(
        curated: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "adapter"
    assert main(["adapter", "train", "--data", str(curated), "--seed", "0", "--examples", "2", str(out)]) == 0
    record = json.loads((out / MARKER).read_text())
    manifest = json.loads((curated / MANIFEST_JSON).read_text())
    assert record["data"]["train_sha256"] == manifest["train_sha256"]
    assert record["data"]["policy"]["sha256"] == manifest["policy"]["sha256"]
    assert record["report"]["examples"] == 2 and (out / "adapter_model.safetensors").is_file()
    assert "adapter written" in capsys.readouterr().out


def test_a_set_changed_after_it_was_built_is_refused_before_training(
        curated: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    changed = tmp_path / "set"
    changed.mkdir()
    (changed / MANIFEST_JSON).write_bytes((curated / MANIFEST_JSON).read_bytes())
    (changed / TRAIN_JSONL).write_text((curated / TRAIN_JSONL).read_text().replace("INV-", "INV-0"))
    assert main(["adapter", "train", "--data", str(changed), "--seed", "0", str(tmp_path / "a")]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: {changed / TRAIN_JSONL}: sha256 ") and "changed after it was built" in err
    assert not (tmp_path / "a").exists()
