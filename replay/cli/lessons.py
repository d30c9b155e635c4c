"""`worker-replay lessons propose`, `trace`, `dispute`, `undispute`: the lesson gate and the provenance ledger."""

from __future__ import annotations

import argparse
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from replay.analysis.provenance import record_run
from replay.cli.common import ledger_option
from replay.memory.files import workspace_dirs
from replay.memory.ledger import Ledger
from replay.run.directory import load_results


def _lessons_propose(args: argparse.Namespace) -> int:
    from replay.memory.lessons import (
        AblationPolicy,
        LiftPolicy,
        apply_plan,
        plan_lessons,
        record_verdicts,
    )

    records = load_results(args.run_dir)
    memory_dirs = workspace_dirs(args.memory_root)
    today = datetime.now(UTC).date()
    plan = plan_lessons(records, memory_dirs, today, AblationPolicy(), LiftPolicy())
    for verdict in plan.verdicts:
        print(verdict.summary())
    for workspace, diff in plan.diffs.items():
        if diff:
            print(f"\n# proposed edit for {workspace}\n{diff}")
    if args.apply:
        changed = apply_plan(plan, memory_dirs, today)
        print("applied: " + ", ".join(str(p) for p in changed) if changed else "nothing to apply")
    with Ledger(args.ledger) as ledger:
        record_verdicts(ledger, record_run(ledger, args.run_dir), plan.verdicts)
    return 0


def _trace(args: argparse.Namespace) -> int:
    with Ledger(args.ledger) as ledger:
        print(ledger.trace(args.rule_id, workspace=args.workspace).format())
    return 0


def _dispute(args: argparse.Namespace) -> int:
    with Ledger(args.ledger) as ledger:
        print(ledger.dispute(args.rule_id, args.reason, workspace=args.workspace).format())
    return 0


def _undispute(args: argparse.Namespace) -> int:
    with Ledger(args.ledger) as ledger:
        print(ledger.undispute(args.rule_id, args.reason, workspace=args.workspace).format())
    return 0


def add_parser(sub: Any) -> None:
    lessons = sub.add_parser("lessons", help="the lesson gate").add_subparsers(dest="action", required=True)
    p = lessons.add_parser("propose", help="per-rule verdicts and the proposed memory edit (a diff)")
    p.add_argument("run_dir", type=Path,
                   help="a run directory with workspace-memory arms and their ablations (workspace-minus:<id>)")
    p.add_argument("--memory-root", type=Path, required=True, metavar="DIR",
                   help="the memory root the run injected (one directory per workspace)")
    p.add_argument("--apply", action="store_true", help="apply the proposed moves to the memory files")
    ledger_option(p)
    p.set_defaults(func=_lessons_propose)

    for name, func, text in (
        ("trace", _trace, "every run, result, comparison and gate verdict that used a rule"),
        ("dispute", _dispute, "mark everything that used a rule as needing a re-run; gates resting on it cannot pass"),
        ("undispute", _undispute, "restore a disputed rule after review (its dispute stays in the ledger)"),
    ):
        p = sub.add_parser(name, help=text)
        p.add_argument("rule_id", metavar="lc:<slug>", help="the rule's id")
        p.add_argument("--workspace", help="only the rule of this workspace (default: the id in any workspace)")
        if name != "trace":
            reason = ("why it is disputed" if name == "dispute" else "what the review found") + " (kept in the ledger)"
            p.add_argument("--reason", required=True, help=reason)
        ledger_option(p)
        p.set_defaults(func=func)
