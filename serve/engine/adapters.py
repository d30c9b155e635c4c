"""Seeded PEFT LoRA adapters for the embedded model, so adapter tests run against real weights."""

from __future__ import annotations

from pathlib import Path

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
