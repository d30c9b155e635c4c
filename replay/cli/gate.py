"""`worker-replay gate`: evaluate a pre-registered gate policy, write its verdict."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from core.names import excerpt
from replay.analysis.gates import evaluate_gate, format_verdict, write_verdict
from replay.cli.common import ledger_option, tainted


def _gate(args: argparse.Namespace) -> int:
    verdict = evaluate_gate(args.policy, args.run_dir, args.baseline, args.candidate, evidence=dict(args.evidence),
                            tainted=tainted(args))
    path = write_verdict(args.run_dir, verdict)
    print(format_verdict(verdict))
    print(f"verdict written: {path}", file=sys.stderr)
    return 0 if verdict.passed else 1


def _evidence_item(text: str) -> tuple[str, str]:
    """One `--evidence KEY=PATH`; a malformed one is a usage error, not a traceback."""
    key, sep, path = text.partition("=")
    if not sep or not key or not path:
        raise argparse.ArgumentTypeError(f"expected KEY=PATH, got {excerpt(text)}")
    return key, path


def add_parser(sub: Any) -> None:
    p = sub.add_parser("gate", help="evaluate a pre-registered gate policy; exit 0 only on pass")
    p.add_argument("run_dir", type=Path)
    p.add_argument("--policy", type=Path, required=True)
    p.add_argument("--baseline", required=True)
    p.add_argument("--candidate", required=True)
    p.add_argument("--evidence", action="append", default=[], metavar="KEY=PATH", type=_evidence_item,
                   help="evidence a condition reads from elsewhere (see the policy's comments)")
    ledger_option(p)
    p.set_defaults(func=_gate)
