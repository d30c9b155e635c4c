"""`worker-serve evidence`: production-candidate gate evidence from the gateway's stores."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from serve.cli.gateway import store_flags


def _evidence(args: argparse.Namespace) -> int:
    from serve.evidence_export import export
    from serve.gateway.config import load_gateway_config

    config = load_gateway_config(args.config, state_db=args.state_db, capture_db=args.capture_db)
    result = export(config, args.route or config.gateway.default_route, args.out, args.candidate, args.since, args.arm)
    print(result.summary())
    files = " ".join(f"--evidence {key}={path}" for key, path in result.files().items())
    print(f"gate: worker-replay gate RUN_DIR --policy configs/gates/production-candidate.toml "
          f"--baseline BASELINE --candidate {args.arm or result.candidate} {files}")
    return 0


def add_parser(sub: Any) -> None:
    """`evidence`: production-candidate gate evidence from the gateway's stores."""
    ev = sub.add_parser("evidence", help="export production-candidate gate evidence (shadow, canary, registry)")
    ev.add_argument("--config", type=Path, required=True, help="the gateway's TOML config (finds its stores)")
    ev.add_argument("--route", default=None, help="default: the gateway's default route")
    ev.add_argument("--candidate", default=None, help="adapter version (default: the route's canary, else shadow)")
    ev.add_argument("--since", default=None, help="ISO time opening the window (default: the trial's start)")
    ev.add_argument("--arm", default=None, help="the candidate's arm name in the replay run, if not its version")
    ev.add_argument("--out", type=Path, required=True, help="directory for shadow.json, canary.json, registry.json")
    store_flags(ev)
    ev.set_defaults(func=_evidence)
