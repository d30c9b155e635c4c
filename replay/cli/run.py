"""`worker-replay run`: replay every arm × decision of a suite (resumable)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from replay.analysis.provenance import record_run
from replay.analysis.training_lineage import check_run
from replay.cli.common import ledger_option
from replay.memory.ledger import Ledger
from replay.run.decisions import run
from replay.run.run_config import load_run_config
from replay.suite import load_suite


def _run(args: argparse.Namespace) -> int:
    suite = load_suite(args.suite)
    config = load_run_config(args.config)
    sent, already = run(suite, config, args.out)
    with Ledger(args.ledger) as ledger:
        record_run(ledger, args.out)
    print(f"{args.out}: {sent} result(s) written, {already} already there (resumed)" if already
          else f"{args.out}: {sent} result(s) written")
    for check in check_run(args.out, [arm.name for arm in config.arms]):
        print(check.line())
    return 0


def add_parser(sub: Any) -> None:
    p = sub.add_parser("run", help="replay every arm × decision (resumable)")
    p.add_argument("--suite", type=Path, required=True, metavar="DIR", help="a frozen suite directory")
    p.add_argument("--config", type=Path, required=True, metavar="RUN.toml",
                   help="endpoint, decoding, runner, memory root and arms; configs/runs/example.toml is the annotated "
                        "example")
    p.add_argument("--out", type=Path, required=True, help="the run directory (re-run into it to resume)")
    ledger_option(p)
    p.set_defaults(func=_run)
