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
    p.add_argument("run_dir", type=Path, help="a run directory (its results.jsonl)")
    p.add_argument("--baseline", required=True, metavar="ARM", help="the reference arm")
    p.add_argument("--candidate", required=True, metavar="ARM", help="the arm compared with it")
    p.add_argument("--by", choices=("workspace", "cluster", "tool", "thread"), help="also break every row down by this")
    p.add_argument("--json", action="store_true", help="the comparison as JSON")
    ledger_option(p)
    p.set_defaults(func=_compare)
