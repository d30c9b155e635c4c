"""The engine and its artefacts: vLLM launcher, the embedded model build, seeded and trained LoRA adapters."""
