"""The GPU path proven in one command (`scripts/gpu_check.sh`): on a GPU host, the embedded model on
vLLM's GPU build behind the real gateway, every serving feature production relies on checked and timed
within a fixed budget, so that a short loan of a GPU host is enough. `--dry-run` runs the same steps on
the CPU engine."""
