"""`worker-replay curate …`: what a corpus could give a training set, and the set itself (DESIGN §12)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from replay.cli.common import corpora_argument

DEFAULT_POLICY = Path("configs/curation/s1.1.toml")


def _pool(args: argparse.Namespace) -> int:
    from replay.curation.curation_policy import load_policy
    from replay.curation.pool import audit_pool, format_pool, open_corpora

    policy = load_policy(args.policy)[0]
    report = audit_pool(open_corpora(args.corpora), policy)
    print(report.model_dump_json(indent=2) if args.json else format_pool(report, policy))
    return 0


def _build(args: argparse.Namespace) -> int:
    from replay.curation.build import curate, format_manifest, open_inputs

    if args.no_eval_boundary:
        print("warning: --no-eval-boundary: the frozen suites registered in the suites directory are NOT excluded; "
              "the set may hold their decisions or near-copies of them, and any candidate trained on it must not "
              "be judged on them", file=sys.stderr)
    inputs = open_inputs(args.corpora, args.shadow, args.keys, args.policy, args.exclude_suite, args.runs,
                         eval_boundary=not args.no_eval_boundary)
    print(format_manifest(curate(inputs, args.out), args.out))
    return 0


def add_parser(sub: Any) -> None:
    curate = sub.add_parser("curate", help="training sets from replay-proven corrections (DESIGN §12)")
    actions = curate.add_subparsers(dest="action", required=True)
    p = actions.add_parser("pool", help="decisions per class and origin, sessions, clusters, the top tools' share: "
                                        "what a corpus could give a training set (S18), before anything is written")
    corpora_argument(p, "a Claude Code corpus (<workspace>/projects/...), read-only")
    p.add_argument("--policy", type=Path, default=DEFAULT_POLICY,
                   help=f"the curation policy whose model patterns tell an answer's origin (default {DEFAULT_POLICY})")
    p.add_argument("--json", action="store_true", help="print the counts as JSON")
    p.set_defaults(func=_pool)
    p = actions.add_parser("build", help="draw the policy's mix from the corpus and the runs' proofs into "
                                         "train.jsonl, provenance.jsonl and manifest.json")
    corpora_argument(p)
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
                   help="frozen suites no example may come from (their sessions, their requests and near-copies "
                        "of them), besides every suite registered in the suites directory")
    p.add_argument("--no-eval-boundary", action="store_true",
                   help="do NOT exclude the frozen suites registered in the suites directory (the policy's "
                        "suites_dir, else $WORKER_REPLAY_SUITES, else suites/); printed as a warning and recorded "
                        "in manifest.json")
    p.add_argument("--shadow", type=Path, nargs="+", default=[], metavar="CORPUS",
                   help="corpora recorded from shadow legs: refused unless the policy approves them by name")
    p.set_defaults(func=_build)
