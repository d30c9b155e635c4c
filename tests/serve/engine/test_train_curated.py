"""Training on a curated set (`worker-replay curate build`'s directory): the rows the set holds, the loss on the
assistant's target turn only, the data named in the adapter's own record, the examples too long for `--max-len`
named on screen, and `--examples` taking each class in its share of the set."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from core.curated import MANIFEST_JSON, TRAIN_JSONL
from replay.curation.build import curate, open_inputs
from serve.cli import main
from serve.engine.modelbuild import default_model_dir
from serve.engine.train import DEFAULT_TEMPLATE, MARKER, answer_loss, curated_examples, encode, stratified
from tests.replay.curation.test_build import FAILED, planted_answer, write_run
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
    assert record["report"]["max_len"] == 2048 and record["report"]["skipped"] == []
    assert "adapter written" in capsys.readouterr().out


def test_an_example_longer_than_max_len_is_skipped_and_named_on_screen(
        curated: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(default_model_dir())
    examples, _ = curated_examples(curated)
    lengths = {e.id: encode(tokenizer, DEFAULT_TEMPLATE.read_text(), e).length for e in examples}
    shortest = min(lengths.values())
    longer = [f"{i} ({n} tokens)" for i, n in lengths.items() if n > shortest]
    assert longer and len(longer) < len(lengths)  # the retries' prompts hold more turns
    out = tmp_path / "adapter"
    assert main(["adapter", "train", "--data", str(curated), "--seed", "0", "--max-len", str(shortest), str(out)]) == 0
    screen = capsys.readouterr().out
    report = json.loads((out / MARKER).read_text())["report"]
    assert report["skipped"] == longer and report["examples"] == len(lengths) - len(longer)
    assert f"skipped {len(longer)} of {len(lengths)} examples longer than --max-len {shortest} tokens" in screen
    assert all(line in screen for line in longer) and "raise --max-len" in screen
    assert main(["adapter", "train", "--data", str(curated), "--seed", "0", "--max-len", "10",
                 str(tmp_path / "none")]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: all {len(lengths)} examples are longer than --max-len 10 tokens")
    assert err.count("\n") == 1 and "raise --max-len" in err and not (tmp_path / "none").exists()


@pytest.fixture(scope="module")
def two_classes(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Four examples: ws-r's proven correction (`recovery`, a planted replay answer chose its next call) and the
    three verified actions (`clean`) of ws-w and ws-r; a set is written scarcest class first."""
    root = tmp_path_factory.mktemp("two-classes")
    copy_workspace(root / "corpus", "ws-w")
    copy_workspace(root / "corpus", "ws-r")
    plant_retry_value(session_path(root / "corpus", "ws-r", LOOKUP), LOOKUP, 1, {"id": "INV-8"})
    run = write_run(root / "run", [planted_answer("cand", "ws-r", FAILED, "known_failure", {"id": "INV-9"})])
    policy = policy_file(root, 'size = 4\nclean_from = ["verified_action"]\n[shares]\nclean = 75\nrecovery = 25\n')
    curate(open_inputs([root / "corpus"], [], keys_file(root, ["ws-w", "ws-r"]), policy, [], [run]), root / "set")
    return root / "set"


def test_examples_takes_each_class_in_its_share_in_an_order_the_seed_fixes(
        two_classes: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    examples, _ = curated_examples(two_classes)
    assert [e.mix_class for e in examples] == ["recovery", "clean", "clean", "clean"]
    # largest remainder of 3:1 — 1: 0.75 clean; 2: 1.5 and 0.5, the tie to the set's first class; 3: 2.25, 0.75
    for n, mix in ((1, ["clean"]), (2, ["recovery", "clean"]), (3, ["recovery", "clean", "clean"]), (4, None)):
        assert [e.mix_class for e in stratified(examples, n, seed=0)] == (mix or [e.mix_class for e in examples])
    assert stratified(examples, 2, seed=3) == stratified(examples, 2, seed=3)
    assert len({stratified(examples, 1, seed=seed)[0].id for seed in range(8)}) > 1  # which clean one: the seed's
    out = tmp_path / "adapter"
    assert main(["adapter", "train", "--data", str(two_classes), "--seed", "0", "--examples", "1", str(out)]) == 0
    assert "examples: 1 of 4, each class in its share of the set: recovery 0 of 1, clean 1 of 3" in \
        capsys.readouterr().out
    assert json.loads((out / MARKER).read_text())["report"]["examples"] == 1
    assert main(["adapter", "train", "--data", str(two_classes), "--seed", "0", "--examples", "0",
                 str(tmp_path / "none")]) == 2
    assert capsys.readouterr().err == "error: --examples 0: must be at least 1\n"


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
