"""Seeded PEFT LoRA adapters for the embedded model, so adapter tests run against real weights; and an adapter
merged into its base, the full model a quantiser reads (vLLM's CPU engine serves no LoRA on a quantised model)."""

from __future__ import annotations

import json
from pathlib import Path

from core.attestation import adapter_fingerprint
from core.lineage import MERGE_RECORD, MergeRecord, model_sha256
from core.names import excerpt
from serve.engine.hfprogress import progress_bars
from serve.engine.outdir import replaced_whole
from serve.errors import ServeError


class MergeError(ServeError, ValueError):
    """An adapter that cannot be merged into the base given, or a merged model that cannot be written."""


TARGET_MODULES = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]


def make_random_adapter(model_dir: Path, out_dir: Path, seed: int, rank: int = 16, scale: float = 0.005) -> Path:
    """Write adapter_config.json + adapter_model.safetensors with weights drawn from `seed`.

    PEFT's default initialisation zeroes B (the adapter starts as a no-op); here both A and B
    are drawn from a seeded generator so the adapter really changes the model's answers, with
    `scale` keeping the change small enough that the model still writes valid tool calls.
    """
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    base = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32)
    config = LoraConfig(r=rank, lora_alpha=2 * rank, lora_dropout=0.0, target_modules=TARGET_MODULES,
                        task_type="CAUSAL_LM")
    model = get_peft_model(base, config)
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, param in sorted(model.named_parameters()):
            if "lora_A" in name:
                param.copy_(torch.randn(param.shape, generator=generator) / param.shape[1] ** 0.5)
            elif "lora_B" in name:
                param.copy_(torch.randn(param.shape, generator=generator) * scale)
    model.save_pretrained(str(out_dir), safe_serialization=True)
    return out_dir


def merge_adapter(model_dir: Path, adapter_dir: Path, out_dir: Path, quiet: bool = False) -> Path:
    """The base with the adapter's LoRA deltas folded into its weights, saved whole as a full model (safetensors,
    tokenizer, chat template) in the base's dtype, with a record (`core.lineage.MergeRecord`) of the base's digest
    and the adapter's fingerprint it was made of, which `model quantize` carries on. An adapter trained on another
    base is refused before any weight is read. `quiet` hides the loading and saving bars."""
    config_path = adapter_dir / "adapter_config.json"
    try:
        trained_on = json.loads(config_path.read_text(encoding="utf-8")).get("base_model_name_or_path")
    except (OSError, ValueError, AttributeError) as exc:
        raise MergeError(f"{config_path}: not a PEFT adapter's config ({excerpt(str(exc))})") from None
    if not isinstance(trained_on, str) or Path(trained_on).resolve() != model_dir.resolve():
        raise MergeError(f"{adapter_dir}: trained on {excerpt(trained_on)}, not on {model_dir}: merge it into "
                             "its own base (--model)")
    out = out_dir.resolve()
    for given in (model_dir.resolve(), adapter_dir.resolve()):
        if out == given or given in out.parents:
            raise MergeError(f"--out {out_dir} is inside {given}, which the merge reads")
    if out.exists() and not (out.is_dir() and ((out / MERGE_RECORD).is_file() or not any(out.iterdir()))):
        raise MergeError(f"--out {out_dir} holds files this command did not write; give a new or empty directory "
                         "(an earlier merged model is replaced)")
    from peft import PeftModel
    from transformers import AutoModelForCausalLM, AutoTokenizer

    with progress_bars(not quiet):
        base = AutoModelForCausalLM.from_pretrained(model_dir, dtype="auto")
        merged = PeftModel.from_pretrained(base, str(adapter_dir)).merge_and_unload()
    try:
        with replaced_whole(out_dir) as staging, progress_bars(not quiet):
            merged.save_pretrained(str(staging), safe_serialization=True)
            AutoTokenizer.from_pretrained(model_dir).save_pretrained(str(staging))
            record = MergeRecord(base=str(model_dir.resolve()), adapter=str(adapter_dir.resolve()),
                                 base_sha256=model_sha256(model_dir),
                                 adapter_fingerprint=adapter_fingerprint(adapter_dir))
            (staging / MERGE_RECORD).write_text(record.model_dump_json(indent=2) + "\n", encoding="utf-8")
    except OSError as exc:
        raise MergeError(f"{out_dir}: cannot write the merged model ({exc.strerror or exc})") from None
    return out_dir
