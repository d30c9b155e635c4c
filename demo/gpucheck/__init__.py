"""The GPU path proven in one command (`scripts/gpu_check.sh`): on a GPU host, the embedded model on
vLLM's GPU build behind the real gateway, every serving feature production relies on checked and timed
within a fixed budget, so that a short loan of a GPU host is enough. `--dry-run` runs the same steps on
the CPU engine.

- `all_steps.py`: every step in order, each timed against its budget; the table and `gpu-check.json`
- `steps.py`: the steps, their budgets, what is skipped, and the report (pure)
- `check_context.py`: what the steps share: options, started services, outcomes
- `services.py`: the steps that bring the stack up: config check, model, engine, gateway
- `probes.py`: the requests sent through the gateway and what each answer must show
- `workload.py`: the two loads: a two-arm replay and the gateway overhead bench
- `__main__.py`: `python -m demo.gpucheck`
"""
