"""`worker-replay compare`: the paired comparison of two arms."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from replay.analysis.compare import compare_run, format_comparison
from replay.cli.common import ledger_option, tainted


def _compare(args: argparse.Namespace) -> int:
    comparison = compare_run(args.run_dir, args.baseline, args.candidate, by=args.by, tainted=tainted(args))
    print(comparison.model_dump_json(indent=2) if args.json else format_comparison(comparison))
    return 0


def add_parser(sub: Any) -> None:
    p = sub.add_parser("compare", help="paired comparison of two arms")
    p.add_argument("run_dir", type=Path)
    p.add_argument("--baseline", required=True)
    p.add_argument("--candidate", required=True)
    p.add_argument("--by", choices=("workspace", "cluster", "tool"))
    p.add_argument("--json", action="store_true")
    ledger_option(p)
    p.set_defaults(func=_compare)
