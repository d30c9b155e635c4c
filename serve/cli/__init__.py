"""`worker-serve`: one module per command group, each registering its own subcommands with `add_parser(sub)`:

- `model.py`: model build, quantize
- `adapter.py`: adapter make-random, train, merge; register, load, list (over the gateway's admin API)
- `engine.py`: engine
- `gateway.py`: gateway
- `keys.py`: keys make
- `evidence.py`: evidence
- `trial.py`: trial start, status, suspend, resume, abort, gate, evidence (over the trial admin API)
"""

from __future__ import annotations

import argparse
import sys

from core.console import run_command
from serve.cli import adapter, engine, evidence, gateway, keys, model, trial

DESCRIPTION = """`worker-serve`: build the embedded model, make test adapters, run the engine and the gateway, register
and load adapters with a running gateway, make client keys, export gate evidence from the gateway's stores,
run progressive adapter trials."""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="worker-serve", description=DESCRIPTION)
    sub = parser.add_subparsers(dest="command", required=True)
    for group in (model, adapter, engine, gateway, keys, evidence, trial):
        group.add_parser(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    return run_command(build_parser(), argv)


if __name__ == "__main__":
    sys.exit(main())
