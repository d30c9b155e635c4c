# The two commands a new user runs (README): `make demo` and `make test`. Both set up everything first.
VENV ?= .venv

.PHONY: setup demo test bench

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
