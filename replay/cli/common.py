"""What several `worker-replay` groups share: the `CORPUS...` positional, the ledger's default path, its `--ledger`
option, the disputed rules, the registered workspace names a privacy check looks for."""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from replay.memory.ledger import Ledger, RuleRef

CORPUS_HELP = "a Claude Code corpus, read-only"


def corpora_argument(p: argparse.ArgumentParser, help: str = CORPUS_HELP) -> None:
    """`CORPUS...` as `args.corpora`: one or more Claude Code corpora, each only ever read."""
    p.add_argument("corpora", type=Path, nargs="+", metavar="CORPUS", help=help)


def default_ledger() -> Path:
    return Path(os.environ.get("WORKER_REPLAY_LEDGER", "runs/ledger.sqlite"))


def ledger_option(p: argparse.ArgumentParser) -> None:
    p.add_argument("--ledger", type=Path, default=default_ledger(),
                   help="outcome/provenance ledger (default: $WORKER_REPLAY_LEDGER or runs/ledger.sqlite)")


def tainted(args: argparse.Namespace) -> tuple[str | RuleRef, ...]:
    """The rules disputed now, for a command that only reads the ledger (none when there is no ledger yet)."""
    if not args.ledger.exists():
        return ()
    with Ledger(args.ledger) as ledger:
        return tuple(d.ref for d in ledger.disputes())


def registered(keys: Path | None) -> frozenset[str] | None:
    """The workspace names of the keys file (`--keys`, else $WORKER_REPLAY_PSEUDONYM_KEYS when set); None
    without either: no workspace name is looked for."""
    from replay.corpus.resolve import KEYS_ENV, load_keys

    if keys is None and not os.environ.get(KEYS_ENV):
        return None
    return frozenset(load_keys(keys))
