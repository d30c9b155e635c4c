"""`worker-serve keys make`: client keys of the gateway."""

from __future__ import annotations

import argparse
from typing import Any


def _keys_make(args: argparse.Namespace) -> int:
    from datetime import UTC, datetime

    from core.names import BadNameError, check_name
    from serve.errors import ServeError
    from serve.gateway.keys import make_key

    try:
        workspaces = [check_name(w, "--workspace") for w in args.workspace if w != "*" or not args.service]
        name = check_name(args.name, "--name") if args.name else None
    except BadNameError as exc:
        raise ServeError(str(exc)) from exc
    if not args.service and len(args.workspace) != 1:
        raise ServeError("a workspace's key is bound to one --workspace (a service key, --service, may name several)")
    stamp = datetime.now(UTC).strftime("%Y%m%d-%H%M%S")
    key, digest = make_key()
    if args.service:
        listed = '"*"' if "*" in args.workspace else "[" + ", ".join(f'"{w}"' for w in workspaces) + "]"
        entry = f'name = "{name or f"service-{stamp}"}"\nworkspaces = {listed}\n'
    else:
        entry = f'name = "{name or f"{workspaces[0]}-{stamp}"}"\nworkspace = "{workspaces[0]}"\n'
    print(f"key (give it to the client now; it is not stored anywhere): {key}")
    print("add to the keys file ([auth] keys_file; the gateway reads it again within reload_interval_s):")
    print(f'[[keys]]\n{entry}hash = "{digest}"')
    return 0


def add_parser(sub: Any) -> None:
    """`keys make`: client keys of the gateway."""
    keys = sub.add_parser("keys", help="client keys of the gateway").add_subparsers(dest="action", required=True)
    make = keys.add_parser("make", help="print a new random key and the [[keys]] entry (its hash) to add")
    make.add_argument("--workspace", action="append", required=True,
                      help="the workspace the key is bound to; with --service, repeat it or give '*' (any)")
    make.add_argument("--service", action="store_true",
                      help="a service key (control plane, replay jobs) that may name these workspaces")
    make.add_argument("--name", default=None, help="the entry's name in logs and errors (default: workspace + time)")
    make.set_defaults(func=_keys_make)
