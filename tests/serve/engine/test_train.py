"""Training LoRA adapters on CPU: the answer-only loss, the saved PEFT adapter, determinism and the
example selection."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from core.records import Answer, ChatRequest, MemoryRef, Target, TrainingExample
from serve.cli import main
from serve.engine.adapters import TARGET_MODULES
from serve.engine.modelbuild import default_model_dir
from serve.engine.train import (
    DEFAULT_TEMPLATE,
    TrainDataError,
    TrainReport,
    answer_loss,
    encode,
    load_training,
    prefix_states,
    select_examples,
    train_adapter,
)

TOOLS = [
    {"type": "function", "function": {"name": "send_invoice", "description": "Send an invoice.", "parameters": {
        "type": "object", "properties": {"invoice_id": {"type": "string"}}, "required": ["invoice_id"]}}},
    {"type": "function", "function": {"name": "finalize_invoice", "description": "Finalize a draft.", "parameters": {
        "type": "object", "properties": {"invoice_id": {"type": "string"}}, "required": ["invoice_id"]}}},
]
SYSTEM = {"role": "system", "content": "You are the invoicing assistant."}


def example(i: int, stratum: str = "verified_recovery") -> TrainingExample:
    inv = f"INV-{100 + i}"
    messages = [
        SYSTEM,
        {"role": "user", "content": f"Send invoice {inv}."},
        {"role": "assistant", "content": None, "tool_calls": [{"id": f"call_{i}", "type": "function", "function": {
            "name": "send_invoice", "arguments": json.dumps({"invoice_id": inv})}}]},
        {"role": "tool", "tool_call_id": f"call_{i}", "content": json.dumps({"error": f"{inv} is a draft"})},
    ]
    return TrainingExample(
        id=f"train-{i:04d}", stratum=stratum, cluster="invoicing/draft-send", workspace="ws-test",
        session=f"s-{i}", captured_at=datetime(2026, 6, 1, tzinfo=UTC),
        request=ChatRequest(messages=messages, tools=TOOLS, tool_choice="required"),
        target=Target(tool="finalize_invoice", arg_keys=["invoice_id"]), memory=MemoryRef(workspace="ws-test"),
        answer=Answer(tool="finalize_invoice", arguments={"invoice_id": inv}),
    )


EXAMPLES = [example(i) for i in range(2)]
SETTINGS: dict[str, Any] = {"seed": 7, "epochs": 3, "batch_size": 2, "lr": 3e-3}


@pytest.fixture(scope="module", autouse=True)
def one_thread() -> Iterator[None]:
    """Training here runs on one thread: while an engine or other tests share the 2 cores, two
    OpenMP threads keep waiting on each other (this file: 89 s on one thread, 243 s on two)."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="module")
def model_dir() -> Path:
    path = default_model_dir()
    if not (path / "config.json").is_file():
        pytest.fail("the embedded model is not built: run `worker-serve model build` (make test does)")
    return path


@pytest.fixture(scope="module")
def tokenizer(model_dir: Path) -> Any:
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(model_dir)


@pytest.fixture(scope="module")
def trained(model_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, TrainReport]:
    out = tmp_path_factory.mktemp("adapter") / "a"
    return out, train_adapter(model_dir, EXAMPLES, out, **SETTINGS)


def test_the_loss_covers_exactly_the_assistant_call(tokenizer: Any) -> None:
    template = DEFAULT_TEMPLATE.read_text()
    item = encode(tokenizer, template, EXAMPLES[0])
    answer = list(item.suffix[-item.answer_len:])
    assert tokenizer.decode(answer) == (
        '<tool_call>\n{"name": "finalize_invoice", "arguments": {"invoice_id": "INV-100"}}\n</tool_call><|im_end|>'
    )
    prompt = tokenizer.apply_chat_template(EXAMPLES[0].request.messages, tools=TOOLS, chat_template=template,
                                           add_generation_prompt=True, tokenize=False)
    assert prompt.endswith("</tool_response><|im_end|>\n<|im_start|>assistant\n")
    assert [*item.prefix, *item.suffix[:-item.answer_len]] == tokenizer(prompt, add_special_tokens=False).input_ids
    system = tokenizer.decode(list(item.prefix))
    assert system.startswith("<|im_start|>system\nYou are the invoicing assistant.") and "<tools>" in system
    assert system.endswith("<|im_end|>\n") and "<|im_start|>user" not in system
    assert encode(tokenizer, template, EXAMPLES[1]).prefix == item.prefix, "one workspace, one shared prefix"
    start, end = item.decision
    assert tokenizer.decode(answer[start:end]) == "finalize_invoice", "the decision tokens name the tool"


def test_cached_system_turn_gives_the_full_sequence_loss(model_dir: Path, tokenizer: Any) -> None:
    import torch
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32)
    item = encode(tokenizer, DEFAULT_TEMPLATE.read_text(), EXAMPLES[0])
    with torch.no_grad():
        states = prefix_states(model, [item.prefix], {})
        cached = answer_loss(model, item, states).item()
        ids = torch.tensor([[*item.prefix, *item.suffix]])
        logits = model(ids).logits[0]
        n = item.answer_len
        full = torch.nn.functional.cross_entropy(logits[-n - 1:-1], ids[0, -n:]).item()
    assert cached == pytest.approx(full, abs=1e-4)
    with torch.no_grad():
        weighted = answer_loss(model, item, states, decision_weight=4.0).item()
        start, end = item.decision
        per_token = torch.nn.functional.cross_entropy(logits[-n - 1:-1], ids[0, -n:], reduction="none")
    assert weighted == pytest.approx(full + 4.0 * per_token[start:end].mean().item(), abs=1e-4)


def test_training_lowers_the_answer_loss_on_its_examples(trained: tuple[Path, TrainReport]) -> None:
    _, report = trained
    assert report.steps == 3 and report.examples == 2 and report.skipped_too_long == 0
    assert len(report.epoch_losses) == 3
    assert report.epoch_losses[-1] < 0.8 * report.epoch_losses[0]


def test_the_output_is_a_peft_lora_adapter(trained: tuple[Path, TrainReport]) -> None:
    from safetensors.torch import load_file

    out, _ = trained
    config = json.loads((out / "adapter_config.json").read_text())
    assert config["r"] == 16 and config["lora_alpha"] == 32 and config["peft_type"] == "LORA"
    assert set(config["target_modules"]) == set(TARGET_MODULES)
    weights = load_file(out / "adapter_model.safetensors")
    for module in TARGET_MODULES:
        a = [k for k in weights if f".{module}.lora_A." in k]
        b = [k for k in weights if f".{module}.lora_B." in k]
        assert len(a) == len(b) == 30, module
    assert any(weights[k].abs().max() > 0 for k in weights if "lora_B" in k), "B moved off its zero init"


def test_the_same_seed_gives_the_same_weights(model_dir: Path, trained: tuple[Path, TrainReport],
                                              tmp_path: Path, capfd: pytest.CaptureFixture[str]) -> None:
    """Also with the system-turn states shared from outside, as the demo build shares them, and silently (the
    demo's default: no step lines, no weight-loading bar)."""
    from safetensors.torch import load_file

    out, report = trained
    capfd.readouterr()
    again = train_adapter(model_dir, EXAMPLES, tmp_path / "b", base_states={}, on_step=None, **SETTINGS)
    assert capfd.readouterr().err == ""
    first, second = load_file(out / "adapter_model.safetensors"), load_file(tmp_path / "b/adapter_model.safetensors")
    assert first.keys() == second.keys()
    assert all(first[k].equal(second[k]) for k in first)
    assert again.step_losses == report.step_losses


def test_selection_recovery_only_and_mix_balanced() -> None:
    pool = [example(i, s) for i, s in enumerate(["verified_recovery"] * 6 + ["clean_trajectory_action"] * 6
                                                 + ["verified_action"] * 6 + ["known_failure"] * 2)]
    recovery = select_examples(pool, "recovery", 4, seed=0)
    assert len(recovery) == 4 and {e.stratum for e in recovery} == {"verified_recovery"}
    mix = select_examples(pool, "mix", 9, seed=0)
    assert sorted(e.stratum for e in mix) == ["clean_trajectory_action"] * 3 + ["verified_action"] * 3 + [
        "verified_recovery"] * 3
    assert select_examples(pool, "mix", 9, seed=0) == mix
    assert [e.id for e in select_examples(pool, "mix", 9, seed=1)] != [e.id for e in mix]


def test_a_bad_training_line_names_file_and_line(tmp_path: Path) -> None:
    path = tmp_path / "train.jsonl"
    path.write_text(EXAMPLES[0].model_dump_json() + "\n" + '{"id": "x"}\n')
    with pytest.raises(TrainDataError, match=r"train\.jsonl:2: "):
        load_training(path)


def test_cli_train_reports_bad_data_without_a_traceback(model_dir: Path, tmp_path: Path,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "train.jsonl"
    path.write_text("not json\n")
    assert main(["adapter", "train", "--data", str(path), "--select", "mix", "--seed", "0", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert "train.jsonl:1:" in err and "Traceback" not in err


@pytest.mark.parametrize("command", [["adapter", "make-random", "--seed", "1"],
                                     ["adapter", "train", "--data", "train.jsonl", "--select", "mix", "--seed", "0"]])
def test_cli_without_a_built_model_says_how_to_build_it(command: list[str], tmp_path: Path,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    assert main([*command, "--model", str(tmp_path / "no-model"), str(tmp_path / "o")]) == 2
    assert "run `worker-serve model build` first" in capsys.readouterr().err
    assert not (tmp_path / "o").exists()
