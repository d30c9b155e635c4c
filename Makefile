# The two commands a new user runs (README): `make demo` and `make test`. Both set up everything first.
VENV ?= .venv

.PHONY: setup demo test bench gpu-check

setup:
	./scripts/setup.sh

demo: setup
	$(VENV)/bin/worker-demo run

# Lint and types first (seconds), then the tests; mypy is strict for the four packages (pyproject.toml).
test:
	./scripts/setup.sh --test-tools
	$(VENV)/bin/ruff check .
	$(VENV)/bin/mypy
	$(VENV)/bin/python -m pytest -q -ra tests

bench: setup
	$(VENV)/bin/python scripts/bench.py

# The GPU path on a GPU host in one command (its own venv, .venv-gpu); `GPU_CHECK_ARGS=--dry-run` on a CPU machine.
gpu-check:
	./scripts/gpu_check.sh $(GPU_CHECK_ARGS)
