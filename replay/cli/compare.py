"""`worker-replay compare`: the paired comparison of two arms, recorded in the ledger."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from replay.analysis.compare import compare, format_comparison
from replay.analysis.provenance import carried, record_comparison, record_run
from replay.cli.common import ledger_option
from replay.memory.ledger import Ledger
from replay.run.directory import load_results


def _compare(args: argparse.Namespace) -> int:
    with Ledger(args.ledger) as ledger:
        results = load_results(args.run_dir)
        comparison = compare(results, args.baseline, args.candidate, by=args.by,
                             tainted=[d.ref for d in ledger.disputes()])
        record_comparison(ledger, record_run(ledger, args.run_dir), comparison,
                          carried(results, (args.baseline, args.candidate)))
    print(comparison.model_dump_json(indent=2) if args.json else format_comparison(comparison))
    return 0


def add_parser(sub: Any) -> None:
    p = sub.add_parser("compare", help="paired comparison of two arms (recorded in the ledger)")
    p.add_argument("run_dir", type=Path, help="a run directory (its results.jsonl)")
    p.add_argument("--baseline", required=True, metavar="ARM", help="the reference arm")
    p.add_argument("--candidate", required=True, metavar="ARM", help="the arm compared with it")
    p.add_argument("--by", choices=("workspace", "cluster", "tool", "thread"), help="also break every row down by this")
    p.add_argument("--json", action="store_true", help="the comparison as JSON")
    ledger_option(p)
    p.set_defaults(func=_compare)
