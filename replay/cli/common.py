"""What several `worker-replay` groups share: the ledger's default path, its `--ledger` option, the tainted rules."""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from replay.memory.ledger import Ledger


def default_ledger() -> Path:
    return Path(os.environ.get("WORKER_REPLAY_LEDGER", "runs/ledger.sqlite"))


def ledger_option(p: argparse.ArgumentParser) -> None:
    p.add_argument("--ledger", type=Path, default=default_ledger(),
                   help="outcome/provenance ledger (default: $WORKER_REPLAY_LEDGER or runs/ledger.sqlite)")


def tainted(args: argparse.Namespace) -> frozenset[str]:
    if not args.ledger.exists():
        return frozenset()
    with Ledger(args.ledger) as ledger:
        return frozenset(ledger.tainted_rule_ids())
