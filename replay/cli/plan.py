"""`worker-replay plan`: the decisions the gate's paired test needs, from a pilot run."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from replay.analysis.compare import compare_run
from replay.cli.common import ledger_option, tainted


def _plan(args: argparse.Namespace) -> int:
    from replay.analysis.gates import load_policy
    from replay.analysis.plan import format_plan, plan

    policy = load_policy(args.policy)
    pilot = compare_run(args.pilot, args.baseline, args.candidate, tainted=tainted(args))
    result = plan(pilot, policy, pilot=str(args.pilot), effect=args.effect, power=args.power, alpha=args.alpha,
                  max_decisions=args.max_decisions)
    print(result.model_dump_json(indent=2) if args.json else format_plan(result))
    return 0


def add_parser(sub: Any) -> None:
    p = sub.add_parser("plan", help="decisions the gate's paired test needs, and the suite's minimum detectable "
                                    "effect, from a pilot run")
    p.add_argument("--pilot", type=Path, required=True, metavar="RUN_DIR", help="a run with both arms")
    p.add_argument("--baseline", required=True, metavar="ARM", help="the pilot's reference arm")
    p.add_argument("--candidate", required=True, metavar="ARM", help="the pilot's candidate arm")
    p.add_argument("--effect", type=float, metavar="POINTS",
                   help="the gain to detect (default: the policy's paired-gain min_points)")
    p.add_argument("--power", type=float, default=0.8, help="target power (default 0.8)")
    p.add_argument("--policy", type=Path, default=Path("configs/gates/serious-candidate.toml"),
                   help="the gate policy whose paired-gain condition is planned for")
    p.add_argument("--alpha", type=float,
                   help="the test's α when the policy's paired-gain sets no max_p (default 0.05)")
    p.add_argument("--max-decisions", type=int, default=20000, metavar="N", help="search cap (default 20000)")
    p.add_argument("--json", action="store_true", help="the plan as JSON")
    ledger_option(p)
    p.set_defaults(func=_plan)
