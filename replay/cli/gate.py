"""`worker-replay gate`: evaluate a pre-registered gate policy, write its verdict and record it in the ledger;
with `--plan`, say first what each condition reads and whether it is there. `worker-replay verify`: recompute
every digest a verdict names."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from core.names import excerpt
from replay.analysis.gates import (
    GateError,
    evaluate_gate,
    format_checks,
    format_plan,
    format_verdict,
    plan_gate,
    verify,
    write_verdict,
)
from replay.analysis.provenance import record_gate
from replay.cli.common import ledger_option
from replay.memory.ledger import Ledger

DESCRIPTION = """Evaluate a pre-registered gate policy on a run; exit 0 only on pass. A condition whose input is
missing is not_run, and not_run blocks the gate like a fail. `--plan` lists, before anything runs, what
each condition reads (the run's own results.jsonl, or an --evidence key and the command that writes
it) and whether it is there now, and, from the run's suite (or --suite DIR before a run), whether the
suite holds the decisions each condition is scored on: a condition with none cannot pass on that suite.
configs/gates/serious-candidate.toml cannot pass from a corpus alone:
four of its conditions need sandbox evidence (`worker-replay sandbox evidence`) or a confirmation run.
configs/gates/corpus-only.toml asks what a corpus alone can answer; it is not the serious-candidate
gate. A verdict whose arms' results carried a rule disputed in the ledger (`worker-replay dispute`) does not
pass: it names the rule and when it was disputed. Every verdict is recorded in the ledger (`trace`)."""


def _gate(args: argparse.Namespace) -> int:
    evidence = dict(args.evidence)
    if args.plan:
        print(format_plan(plan_gate(args.policy, args.run_dir, evidence, args.baseline, args.candidate, args.suite)))
        return 0
    if args.suite is not None:
        raise GateError("--suite is read only with --plan (a verdict judges the run's own suite)")
    missing = [name for name, value in (("RUN_DIR", args.run_dir), ("--baseline", args.baseline),
                                        ("--candidate", args.candidate)) if value is None]
    if missing:
        raise GateError(f"gate needs {', '.join(missing)} (or --plan, to list what the policy reads)")
    with Ledger(args.ledger) as ledger:
        verdict = evaluate_gate(args.policy, args.run_dir, args.baseline, args.candidate, evidence=evidence,
                                disputes=ledger.disputes())
        path = write_verdict(args.run_dir, verdict)
        record_gate(ledger, args.run_dir, verdict, path)
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
    p = sub.add_parser("gate", help="evaluate a pre-registered gate policy; exit 0 only on pass (--plan: what "
                                    "each condition reads, and whether it is there)", description=DESCRIPTION,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("run_dir", type=Path, nargs="?", metavar="RUN_DIR",
                   help="the run directory judged (its results.jsonl); the verdict is written into it")
    p.add_argument("--policy", type=Path, required=True,
                   help="a gate policy: configs/gates/serious-candidate.toml, production-candidate.toml, or "
                        "corpus-only.toml (what a corpus alone can answer)")
    p.add_argument("--baseline", metavar="ARM", help="the reference arm")
    p.add_argument("--candidate", metavar="ARM", help="the arm judged")
    p.add_argument("--evidence", action="append", default=[], metavar="KEY=PATH", type=_evidence_item,
                   help="evidence a condition reads from elsewhere (repeatable; --plan names each key and what "
                        "writes it)")
    p.add_argument("--plan", action="store_true",
                   help="judge nothing: per condition its id, kind, what it reads and whether that is there now "
                        "(RUN_DIR, --baseline and --candidate optional)")
    p.add_argument("--suite", type=Path, metavar="DIR",
                   help="with --plan: the suite whose decisions the conditions are scored on (default: the one "
                        "RUN_DIR's run.json names), so a plan before any run says which conditions it cannot feed")
    ledger_option(p)
    p.set_defaults(func=_gate)
    v = sub.add_parser("verify", help="recompute every digest a gate verdict names (policy, results, suite, "
                                      "evidence); exit 0 only if all match")
    v.add_argument("verdicts", type=Path, nargs="+", metavar="VERDICT",
                   help="a verdict file `gate` wrote (RUN_DIR/gate-POLICY-CANDIDATE.json)")
    v.set_defaults(func=_verify)


def _verify(args: argparse.Namespace) -> int:
    """Each verdict's digests against the files now: exit 0 only when every one of every verdict matches."""
    holds = True
    for path in args.verdicts:
        verdict, checks = verify(path)
        print(format_checks(path, verdict, checks))
        holds = holds and all(check.holds for check in checks)
    return 0 if holds else 1
