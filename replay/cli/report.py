"""`worker-replay report`: report.md and a self-contained report.html of a run; its comparisons recorded in the
ledger."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from core.console import pair_item
from core.records import Decision
from replay.analysis.report import report_run
from replay.cli.common import ledger_option
from replay.corpus.retrieval import SessionReads
from replay.corpus.sources import FORMATS
from replay.errors import ReplayError
from replay.memory.ledger import Ledger
from replay.run.directory import read_run_json
from replay.suite import load_suite


def _report(args: argparse.Namespace) -> int:
    info = read_run_json(args.run_dir)
    suite_path = (info.get("suite") or {}).get("path")
    decisions = load_suite(suite_path).decisions if suite_path and Path(suite_path).is_dir() else ()
    # Default: the baseline (--baseline, else the run config's first arm) against every other arm.
    pairs = args.pair or None
    reads = _session_reads(args, decisions)
    with Ledger(args.ledger) as ledger:
        md, html = report_run(args.run_dir, pairs=pairs, decisions=decisions,
                              tainted=[d.ref for d in ledger.disputes()], baseline=args.baseline, reads=reads,
                              stages=None if args.quantised is None else {"quantised": args.quantised}, ledger=ledger)
    print(f"report: {md}\nreport: {html}")
    return 0


def _session_reads(args: argparse.Namespace,
                   decisions: Sequence[Decision]) -> dict[tuple[str, str], SessionReads] | None:
    """`report --corpus`: what the decisions' sessions read, from the corpus."""
    if args.corpus is None:
        return None
    from replay.corpus.retrieval import decision_reads
    from replay.corpus.sources import open_source

    if not decisions:
        raise ReplayError(f"{args.run_dir}: --corpus needs the run's suite, to know each decision's session")
    refused: list[str] = []
    reads = decision_reads(open_source(args.corpus, args.transcript_format), decisions, refused)
    for reason in refused:
        print(f"refused: {reason}", file=sys.stderr)
    return reads


def add_parser(sub: Any) -> None:
    p = sub.add_parser("report", help="write report.md and a self-contained report.html")
    p.add_argument("run_dir", type=Path, help="a run directory; report.md and report.html are written into it")
    p.add_argument("--pair", action="append", default=[], metavar="BASELINE:CANDIDATE", type=pair_item,
                   help="a comparison to report (repeatable); default: the baseline against every other arm")
    p.add_argument("--baseline", metavar="ARM",
                   help="the reference arm: of the default comparisons and of the summary's changed calls "
                        "(default: the run config's first arm; with --pair, the pairs' baseline)")
    p.add_argument("--corpus", type=Path, metavar="DIR",
                   help="the transcripts or Claude Code session files: splits each arm by whether the decision's own "
                        "history read a memory file (withheld strips only the injected memory)")
    p.add_argument("--transcript-format", choices=FORMATS, default="auto",
                   help="how --corpus is laid out (default: told from the directory)")
    p.add_argument("--quantised", type=Path, metavar="RUN_DIR",
                   help="the same arms replayed on the same suite against the quantised builds: their results beside "
                        "these (ARM:quantised), each arm compared with itself, so a drop is blamed on quantisation")
    ledger_option(p)
    p.set_defaults(func=_report)
