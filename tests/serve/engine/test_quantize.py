"""Quantising a model for the CPU engine: the checkpoint of the embedded model in each served scheme, in the layout
compressed-tensors and vLLM read; cached by the source's sha256 and the scheme; an unserved scheme refused before
anything is written. The last two tests start a second engine on the gate's checkpoint and a third on a candidate
merged and quantised, and judge quantisation_survives from two real runs (see their docstrings)."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from core.lineage import model_lineage, model_sha256
from demo.demo_data import write_demo
from replay.cli import main as replay_main
from replay.suite import freeze_suite, load_suite
from serve.cli import main
from serve.engine.adapters import merge_adapter
from serve.engine.launcher import EngineConfig, EngineProcess, host_cpu_flags, load_engine_config
from serve.engine.modelbuild import default_model_dir
from serve.engine.quantize import (
    MARKER,
    SCHEMES,
    QuantizeError,
    check_scheme,
    default_out,
    pack_int32,
    quantize_model,
    quantize_weight,
)
from tests.conftest import CPU_CONFIG
from tests.support.live import free_port, http_json, running_engine

PROJECTION = "model.layers.3.self_attn.q_proj"
QUANTIZED_CONFIG = CPU_CONFIG.parent / "cpu-smollm2-quantized.toml"


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The embedded model quantised once per scheme for the module (a few seconds each)."""
    root = tmp_path_factory.mktemp("quantized")
    return {name: quantize_model(default_model_dir(), root / name, name).out_dir for name in SCHEMES}


def tensors(model_dir: Path) -> dict[str, object]:
    from safetensors.torch import load_file

    return load_file(model_dir / "model.safetensors")


@pytest.mark.parametrize("scheme", ["nvfp4", "int3", "W8A8-INT8", "", "gptq"])
def test_an_unserved_scheme_is_refused_before_anything_is_written(scheme: str, tmp_path: Path) -> None:
    out = tmp_path / "out"
    with pytest.raises(QuantizeError, match="the CPU engine serves w8a8-int8") as refused:
        quantize_model(tmp_path / "no-such-model", out, scheme)  # the scheme is judged before the source is read
    assert str(refused.value).count("\n") == 0
    assert not out.exists() and list(tmp_path.iterdir()) == []


def test_nvfp4_is_named_as_production_s_gpu_scheme() -> None:
    with pytest.raises(QuantizeError, match="production's NVFP4 needs an NVIDIA Blackwell GPU"):
        check_scheme("nvfp4")


def test_the_cli_refuses_an_unserved_scheme_with_one_error_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]
                                                                ) -> None:
    assert main(["model", "quantize", "--scheme", "nvfp4", "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: scheme 'nvfp4'"), err
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("scheme", list(SCHEMES))
def test_the_embedded_model_s_checkpoint_names_its_scheme(scheme: str, checkpoints: dict[str, Path]) -> None:
    from compressed_tensors.quantization import QuantizationConfig

    out = checkpoints[scheme]
    config = json.loads((out / "config.json").read_text())
    source = json.loads((default_model_dir() / "config.json").read_text())
    assert {k: v for k, v in config.items() if k != "quantization_config"} == source
    quant = config["quantization_config"]
    assert quant == SCHEMES[scheme].quantization_config()
    parsed = QuantizationConfig.model_validate(quant)  # compressed-tensors' own model of the config reads it
    weights = parsed.config_groups["group_0"].weights
    assert (weights.num_bits, weights.group_size) == (SCHEMES[scheme].bits, SCHEMES[scheme].group_size)
    assert (parsed.config_groups["group_0"].input_activations is not None) == (scheme == "w8a8-int8")
    marker = json.loads((out / MARKER).read_text())
    digest = model_sha256(default_model_dir())
    assert marker["scheme"] == scheme and marker["source_sha256"] == digest
    # The embedded model folds in no adapter: the checkpoint derives from it as the base, which its lineage says.
    assert marker["derived_from"] == {"source_sha256": digest, "fingerprint": None, "base_sha256": digest}
    lineage = model_lineage(out)
    assert lineage is not None and lineage.quantization == scheme
    assert lineage.derived_from is not None and lineage.derived_from.base_sha256 == digest
    assert lineage.sha256 == model_sha256(out) != digest
    assert marker["tensors"] == 30 * 7
    assert {"tokenizer.json", "tokenizer_config.json", "chat_template.jinja"} <= {p.name for p in out.iterdir()}


@pytest.mark.parametrize("scheme", list(SCHEMES))
def test_vllm_reads_the_scheme_it_is_meant_to(scheme: str, checkpoints: dict[str, Path]) -> None:
    """vLLM's own compressed-tensors config picks the CPU scheme class for every projection (no engine needed)."""
    from vllm.model_executor.layers.quantization.compressed_tensors.compressed_tensors import CompressedTensorsConfig

    quant = json.loads((checkpoints[scheme] / "config.json").read_text())["quantization_config"]
    config = CompressedTensorsConfig.from_config(quant)
    parts = config.target_scheme_map["Linear"]
    chosen = config._get_scheme_from_parts(parts["weights"], parts["input_activations"], layer_name=PROJECTION)
    assert type(chosen).__name__ == {"w8a8-int8": "CompressedTensorsW8A8Int8", "w4a16": "CompressedTensorsWNA16"}[scheme]
    if scheme == "w8a8-int8":  # asymmetric activations: oneDNN's kernel on every CPU, float32 included
        assert chosen.is_static_input_scheme is False and chosen.input_symmetric is False


def test_int8_weights_round_to_within_half_a_step(checkpoints: dict[str, Path]) -> None:
    import torch

    original = tensors(default_model_dir())[f"{PROJECTION}.weight"].float()
    stored = tensors(checkpoints["w8a8-int8"])
    weight, scale = stored[f"{PROJECTION}.weight"], stored[f"{PROJECTION}.weight_scale"]
    assert weight.dtype == torch.int8 and weight.shape == original.shape
    assert scale.dtype == torch.float32 and scale.shape == (original.shape[0], 1)
    assert int(weight.abs().amax(dim=1).min()) == 127  # every channel's largest weight is the top of the range
    assert torch.all((weight.float() * scale - original).abs() <= scale / 2 + 1e-6)
    assert f"{PROJECTION}.weight_packed" not in stored
    assert stored["model.embed_tokens.weight"].dtype == torch.bfloat16  # the embeddings (and tied head) are kept


def test_int4_weights_unpack_as_compressed_tensors_reads_them(checkpoints: dict[str, Path]) -> None:
    import torch
    from compressed_tensors.compressors.pack_quantized.helpers import unpack_from_int32

    original = tensors(default_model_dir())[f"{PROJECTION}.weight"].float()
    stored = tensors(checkpoints["w4a16"])
    packed, scale = stored[f"{PROJECTION}.weight_packed"], stored[f"{PROJECTION}.weight_scale"]
    rows, cols = original.shape
    assert packed.dtype == torch.int32 and packed.shape == (rows, cols // 8)
    assert scale.shape == (rows, cols // 32) and stored[f"{PROJECTION}.weight_shape"].tolist() == [rows, cols]
    values = unpack_from_int32(packed, 4, torch.Size([rows, cols]))
    assert int(values.min()) >= -8 and int(values.max()) <= 7
    restored = values.float().reshape(rows, cols // 32, 32) * scale[..., None]
    assert torch.all((restored.reshape(rows, cols) - original).abs() <= scale.repeat_interleave(32, 1) / 2 + 1e-6)


def test_packing_matches_compressed_tensors() -> None:
    import torch
    from compressed_tensors.compressors.pack_quantized.helpers import pack_to_int32

    values = torch.randint(-8, 8, (48, 64), generator=torch.Generator().manual_seed(0), dtype=torch.int32)
    assert torch.equal(pack_int32(values, 4), pack_to_int32(values.to(torch.int8), 4))
    weight = torch.randn(16, 64, generator=torch.Generator().manual_seed(1))
    assert torch.equal(quantize_weight(weight, SCHEMES["w4a16"])["weight_shape"], torch.tensor([16, 64]))


def test_a_second_call_reuses_the_checkpoint(checkpoints: dict[str, Path]) -> None:
    out = checkpoints["w8a8-int8"]
    before = {p.name: p.stat().st_mtime_ns for p in out.iterdir()}
    result = quantize_model(default_model_dir(), out, "w8a8-int8")
    assert result.built is False and result.tensors == 210
    assert {p.name: p.stat().st_mtime_ns for p in out.iterdir()} == before


def test_another_scheme_or_source_replaces_the_checkpoint_whole(tmp_path: Path, checkpoints: dict[str, Path]
                                                                ) -> None:
    out = tmp_path / "q"
    shutil.copytree(checkpoints["w8a8-int8"], out)
    assert quantize_model(default_model_dir(), out, "w4a16").built is True
    assert not (out / "model.safetensors.index.json").exists()
    assert json.loads((out / MARKER).read_text())["scheme"] == "w4a16"
    assert [p.name for p in tmp_path.iterdir()] == ["q"]  # no staging directory left behind


def test_refusals_name_what_to_fix(tmp_path: Path, checkpoints: dict[str, Path]) -> None:
    with pytest.raises(QuantizeError, match="already quantised"):
        quantize_model(checkpoints["w4a16"], tmp_path / "twice", "w8a8-int8")
    busy = tmp_path / "busy"
    busy.mkdir()
    (busy / "notes.txt").write_text("mine")
    with pytest.raises(QuantizeError, match="holds files this command did not write"):
        quantize_model(default_model_dir(), busy, "w8a8-int8")
    assert (busy / "notes.txt").read_text() == "mine"
    with pytest.raises(QuantizeError, match="inside the model it quantises"):
        quantize_model(default_model_dir(), default_model_dir() / "q", "w8a8-int8")
    other = tmp_path / "other"
    shutil.copytree(default_model_dir(), other, ignore=shutil.ignore_patterns("*.safetensors"))
    config = json.loads((other / "config.json").read_text())
    (other / "config.json").write_text(json.dumps({**config, "architectures": ["GPT2LMHeadModel"]}))
    with pytest.raises(QuantizeError, match="not one this quantiser knows"):
        quantize_model(other, tmp_path / "gpt2", "w8a8-int8")
    (other / "config.json").write_text(json.dumps(config))
    (other / "model.safetensors").write_bytes(b"\x00\xff garbage")
    with pytest.raises(QuantizeError, match="not a readable safetensors file"):
        quantize_model(other, tmp_path / "garbage", "w8a8-int8")
    assert not (tmp_path / "gpt2").exists() and not (tmp_path / "garbage").exists()


def test_the_quantised_engine_config_is_the_cpu_config_without_lora() -> None:
    """cpu-smollm2-quantized.toml drifts from cpu-smollm2.toml in nothing but the model, LoRA and running eager
    (which vLLM does anyway with LoRA on)."""
    lora = {"enable_lora", "max_lora_rank", "max_loras", "max_cpu_loras"}
    for flags in (frozenset(), frozenset({"avx512_bf16"})):
        plain, quantized = (load_engine_config(path, cpu_flags=flags) for path in (CPU_CONFIG, QUANTIZED_CONFIG))
        assert quantized.vllm.enable_lora is False and quantized.vllm.model == str(
            default_out(default_model_dir(), "w8a8-int8"))
        assert quantized.vllm.enforce_eager is True and plain.vllm.enforce_eager is None
        keep = set(type(plain.vllm).model_fields) - lora - {"model", "enforce_eager"}
        assert plain.vllm.model_dump(include=keep) == quantized.vllm.model_dump(include=keep)
        assert {k: v for k, v in plain.env.items() if "LORA" not in k} == quantized.env
        assert plain.launch == quantized.launch


def test_the_cli_writes_where_the_quantised_config_looks(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    model = str(default_model_dir())  # the embedded model, before the cache moves
    monkeypatch.setenv("WORKER_TIER_CACHE", str(tmp_path))
    assert main(["model", "quantize", "--model", model, "--scheme", "w8a8-int8"]) == 0
    out = tmp_path / "models" / "SmolLM2-135M-Instruct-w8a8-int8"
    assert f"w8a8-int8 checkpoint written: {out} (210 weights quantised)" in capsys.readouterr().out
    assert load_engine_config(QUANTIZED_CONFIG).vllm.model == str(out)
    assert main(["model", "quantize", "--model", model, "--scheme", "w8a8-int8"]) == 0
    assert "already written (same source sha256 and scheme)" in capsys.readouterr().out


def quantized_config(model: Path) -> EngineConfig:
    return load_engine_config(QUANTIZED_CONFIG, port=free_port()).on_model(model)


@pytest.fixture(scope="module")
def quantized_engine(checkpoints: dict[str, Path], tmp_path_factory: pytest.TempPathFactory
                     ) -> Iterator[tuple[EngineProcess, Path]]:
    """A SECOND real engine (the session's shared one serves the unquantised model with LoRA), from
    cpu-smollm2-quantized.toml on the w8a8-int8 checkpoint the gate uses, started and stopped within this module.
    w4a16's engine is not started here (about 130 s more): BENCHMARKS.md, quantised checkpoints, has it served."""
    log = tmp_path_factory.mktemp("engine-w8a8-int8") / "vllm.log"
    with running_engine(quantized_config(checkpoints["w8a8-int8"]), log) as proc:
        yield proc, log


@pytest.mark.engine
@pytest.mark.xfail("avx2" in host_cpu_flags() and "avx512f" not in host_cpu_flags(), raises=AssertionError,
                   strict=True, reason=(
    "traced 2026-12-07: vLLM 0.32's int8 kernel on a CPU with AVX2 and no AVX-512 answers gibberish for int8 "
    "activations with a zero point, as w8a8-int8 quantises them (the same checkpoint with symmetric activations, "
    "and the unquantised model, answer correctly there); `worker-serve engine` warns of it (kernel_warning)"))
def test_a_second_engine_serves_the_gate_s_checkpoint_with_its_int8_kernel(
        quantized_engine: tuple[EngineProcess, Path]) -> None:
    """SECOND ENGINE: starts vLLM on the w8a8-int8 checkpoint beside the session's shared engine (about 30 s on an
    idle 2-core machine, eager). It answers a tool decision with a call, through
    oneDNN's int8 kernel: no silent fallback to unquantised weights."""
    engine, log = quantized_engine
    status, body = http_json("POST", f"{engine.base_url}/v1/chat/completions", {
        "model": "worker-base", "temperature": 0, "seed": 0, "max_tokens": 96, "tool_choice": "required",
        "messages": [{"role": "system", "content": "You are the invoicing assistant."},
                     {"role": "user", "content": "Send invoice INV-204 to the customer."}],
        "tools": [{"type": "function", "function": {
            "name": "send_invoice", "description": "Send an invoice to its customer.",
            "parameters": {"type": "object", "properties": {"invoice_id": {"type": "string", "maxLength": 12}},
                           "required": ["invoice_id"]}}}]})
    assert status == 200, body
    assert body["choices"][0]["message"].get("tool_calls"), body
    calls = body["choices"][0]["message"]["tool_calls"]
    assert [c["function"]["name"] for c in calls] == ["send_invoice"]
    assert "CPUInt8ScaledMMLinearKernel" in log.read_text(errors="replace")


@pytest.fixture(scope="module")
def quantized_candidate_engine(seeded_adapters: dict[int, Path], tmp_path_factory: pytest.TempPathFactory
                               ) -> Iterator[EngineProcess]:
    """A THIRD real engine: seeded adapter 1 merged into its base, then quantised to w8a8-int8 as the base was (a
    quantised engine serves no LoRA, so a candidate is merged first, as `worker-serve adapter merge` does)."""
    root = tmp_path_factory.mktemp("candidate-w8a8-int8")
    merged = merge_adapter(default_model_dir(), seeded_adapters[1], root / "merged")
    checkpoint = quantize_model(merged, root / "quantized", "w8a8-int8").out_dir
    with running_engine(quantized_config(checkpoint), root / "vllm.log") as proc:
        yield proc


def run_config(path: Path, endpoint: str, candidate: str, candidate_url: str | None = None) -> Path:
    own = f'base_url = "{candidate_url}/v1"\n' if candidate_url else ""
    path.write_text(f'[endpoint]\nbase_url = "{endpoint}/v1"\n[decoding]\nmax_tokens = 96\n[runner]\nconcurrency = 4\n'
                    f'[[arms]]\nname = "base"\nmodel = "worker-base"\n'
                    f'[[arms]]\nname = "candidate"\nmodel = "{candidate}"\n{own}')
    return path


def joint_points(run_dir: Path) -> float:
    """candidate − base in points of joint correctness over the positive decisions, counted from results.jsonl."""
    rows = [json.loads(line) for line in (run_dir / "results.jsonl").read_text().splitlines()]
    positive = {r["decision_id"] for r in rows if r["stratum"] not in ("known_failure", "training_sanity")}
    correct = {arm: sum(r["score"]["joint_correct"] is True for r in rows if r["arm"] == arm
                        and r["decision_id"] in positive) for arm in ("base", "candidate")}
    return 100 * (correct["candidate"] - correct["base"]) / len(positive)


@pytest.mark.engine
def test_quantisation_survives_is_judged_from_two_real_runs(
        engine: EngineProcess, engine_adapter: Callable[[int], str], quantized_engine: tuple[EngineProcess, Path],
        quantized_candidate_engine: EngineProcess, tmp_path: Path) -> None:
    """THIRD ENGINE (about 30 s more). One frozen suite, the same two arms, replayed twice:
    in high precision (the candidate as a LoRA on the shared engine) and quantised (the base on the int8 base's
    engine, the candidate on its own int8 engine: an arm's own `base_url`). production-candidate's
    quantisation_survives is judged from the two runs, pass or fail, on their own counts."""
    suite_dir, _ = write_demo(tmp_path / "demo", seed=0)
    picked = [d for d in load_suite(suite_dir).decisions if d.stratum != "training_sanity"][::6][:4]
    suite = tmp_path / "suite"
    suite.mkdir()
    (suite / "suite.toml").write_text('name = "q"\nversion = "1"\ncreated = 2026-08-01T00:00:00Z\n')
    (suite / "decisions.jsonl").write_text("".join(d.model_dump_json() + "\n" for d in picked))
    freeze_suite(suite, synthetic=True)  # the demo suite's invented values
    high, low = tmp_path / "high", tmp_path / "quantised"
    for out, config in ((high, run_config(tmp_path / "high.toml", engine.base_url, engine_adapter(1))),
                        (low, run_config(tmp_path / "low.toml", quantized_engine[0].base_url, "worker-base",
                                         quantized_candidate_engine.base_url))):
        assert replay_main(["run", "--suite", str(suite), "--config", str(config), "--out", str(out),
                            "--ledger", str(tmp_path / "ledger.sqlite")]) == 0
    manifest = json.loads((low / "run.json").read_text())
    assert manifest["arm_endpoints"] == {f"{quantized_candidate_engine.base_url}/v1": ["worker-base"]}
    replay_main(["gate", str(high), "--policy", str(CPU_CONFIG.parents[1] / "gates" / "production-candidate.toml"),
                 "--baseline", "base", "--candidate", "candidate", "--evidence", f"quantised={low}",
                 "--ledger", str(tmp_path / "ledger.sqlite")])
    verdict = json.loads((high / "gate-production-candidate-candidate.json").read_text())["predicate"]["verdict"]
    [survives] = [c for c in verdict["conditions"] if c["id"] == "quantisation-survives"]
    assert survives["status"] in ("pass", "fail"), survives["reason"]
    drop = joint_points(high) - joint_points(low)
    assert survives["evidence"]["drop_points"] == pytest.approx(drop)
    assert survives["evidence"]["high_precision_points"] == pytest.approx(joint_points(high))
    assert (survives["status"] == "pass") == (joint_points(low) >= 5 and drop <= 2)
