"""`worker-replay privacy audit`: what leaves, audited (replay/privacy/release_audit.py)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from replay.cli.common import registered


def _audit(args: argparse.Namespace) -> int:
    from replay.privacy.release_audit import audit_directory

    audit = audit_directory(args.dir, registered(args.keys))
    print(audit.to_json() if args.json else audit)
    return 0 if audit.clean else 1


def add_parser(sub: Any) -> None:
    privacy = sub.add_parser("privacy", help="what leaves the platform, audited").add_subparsers(dest="action",
                                                                                             required=True)
    p = privacy.add_parser("audit", help="pseudonyms per type, and every value the recognizers would still find and "
                                         "every registered workspace name, by file, line, type and JSON path (never "
                                         "the value); exit 1 when anything is found")
    p.add_argument("dir", type=Path, help="a curated set (train.jsonl, provenance.jsonl, manifest.json) or a suite "
                                          "directory")
    p.add_argument("--keys", type=Path, metavar="FILE",
                   help="workspace pseudonym keys (default $WORKER_REPLAY_PSEUDONYM_KEYS when set): their workspace "
                        "names are looked for too")
    p.add_argument("--json", action="store_true", help="print the audit as JSON")
    p.set_defaults(func=_audit)
