"""`worker-replay curate …`: what a corpus could give a training set, and the set itself (DESIGN §12)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

DEFAULT_POLICY = Path("configs/curation/s1.1.toml")


def _pool(args: argparse.Namespace) -> int:
    from replay.curation.policy import load_policy
    from replay.curation.pool import audit_pool, format_pool, open_corpora

    policy = load_policy(args.policy)[0]
    report = audit_pool(open_corpora(args.corpora), policy)
    print(report.model_dump_json(indent=2) if args.json else format_pool(report, policy))
    return 0


def _build(args: argparse.Namespace) -> int:
    from replay.curation.build import curate, format_manifest, open_inputs

    inputs = open_inputs(args.corpora, args.shadow, args.keys, args.policy, args.exclude_suite, args.runs)
    print(format_manifest(curate(inputs, args.out), args.out))
    return 0


def add_parser(sub: Any) -> None:
    curate = sub.add_parser("curate", help="training sets from replay-proven corrections (DESIGN §12)")
    actions = curate.add_subparsers(dest="action", required=True)
    p = actions.add_parser("pool", help="decisions per class and origin, sessions, clusters, the top tools' share: "
                                        "what a corpus could give a training set (S18), before anything is written")
    p.add_argument("corpora", type=Path, nargs="+", metavar="CORPUS",
                   help="a Claude Code corpus (<workspace>/projects/...), read-only")
    p.add_argument("--policy", type=Path, default=DEFAULT_POLICY,
                   help=f"the curation policy whose model patterns tell an answer's origin (default {DEFAULT_POLICY})")
    p.add_argument("--json", action="store_true", help="print the counts as JSON")
    p.set_defaults(func=_pool)
    p = actions.add_parser("build", help="draw the policy's mix from the corpus and the runs' proofs into "
                                         "train.jsonl, provenance.jsonl and manifest.json")
    p.add_argument("corpora", type=Path, nargs="+", metavar="CORPUS", help="a Claude Code corpus, read-only")
    p.add_argument("--keys", type=Path, metavar="FILE",
                   help="workspace pseudonym keys (TOML [keys], mode 600; default $WORKER_REPLAY_PSEUDONYM_KEYS): "
                        "every example is redacted with its workspace's key")
    p.add_argument("--policy", type=Path, required=True, metavar="POLICY.toml",
                   help="size, class shares, caps, seed, origins, shortfall (e.g. configs/curation/s1.1.toml)")
    p.add_argument("--out", type=Path, required=True, metavar="DIR",
                   help="a new directory, outside any git work tree and any corpus")
    p.add_argument("--runs", type=Path, nargs="+", default=[], metavar="RUN_DIR",
                   help="replay and sandbox runs over this corpus's decisions: their proven corrections and the "
                        "lesson gate's kept rules")
    p.add_argument("--exclude-suite", type=Path, nargs="+", default=[], metavar="SUITE",
                   help="frozen suites no example may come from (their sessions and their requests)")
    p.add_argument("--shadow", type=Path, nargs="+", default=[], metavar="CORPUS",
                   help="corpora recorded from shadow legs: refused unless the policy approves them by name")
    p.set_defaults(func=_build)
