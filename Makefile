# The two commands a new user runs (README): `make demo` and `make test`. Both set up everything first.
VENV ?= .venv

.PHONY: setup setup-dev demo test bench gpu-check mutate

# `@`: a first screen holds what the demo says, not make's echo of its commands.
setup:
	@./scripts/setup.sh

demo: setup
	@$(VENV)/bin/worker-demo run

# Lint and types first (seconds), then the tests; mypy is strict for the four packages (pyproject.toml).
test:
	./scripts/setup.sh --test-tools
	$(VENV)/bin/ruff check .
	$(VENV)/bin/mypy
	$(VENV)/bin/python -m pytest -q -ra --durations=25 tests

# The benchmarks and the mutation run use the tests' helpers: the `dev` extra beside the demo's set-up.
setup-dev:
	@./scripts/setup.sh --dev

bench: setup-dev
	$(VENV)/bin/python scripts/bench.py

# The GPU path on a GPU host in one command (its own venv, .venv-gpu); `GPU_CHECK_ARGS=--dry-run` on a CPU machine.
gpu-check:
	./scripts/gpu_check.sh $(GPU_CHECK_ARGS)

# Mutation testing of the pure decision modules against their unit tests (pyproject.toml [tool.mutmut];
# no engine), then the per-module scores. Not part of `make test`: a full run takes about an hour on two
# cores. Results are kept in mutants/ (git-ignored) and reused; MUTANTS='serve.trials.machine.*' reruns
# those mutants (after a test changed), `rm -rf mutants` starts afresh.
MUTATE_JOBS ?= 2
mutate: setup-dev
	$(VENV)/bin/mutmut run --max-children $(MUTATE_JOBS) $(MUTANTS)
	$(VENV)/bin/python scripts/mutation_score.py
