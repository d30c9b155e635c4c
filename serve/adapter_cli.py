"""`worker-serve adapter register|load|list`: thin clients over the gateway's admin API
(serve/gateway/endpoints/admin.py), so registering a candidate needs no curl recipe.

The gateway is `--gateway URL` (default `$WORKER_GATEWAY_URL`, else http://127.0.0.1:9000, where
configs/gateway.toml listens); the bearer token is `$WORKER_GATEWAY_ADMIN_TOKEN`, the gateway's
`[admin]` token. The gateway does every check (the adapter under its adapter root, a LoRA for its
base model, a name never used before); a refusal, an unreachable gateway or a wrong token is one
`error:` line and exit 2.
"""

from __future__ import annotations

import argparse
import json
import os
from typing import Any

import httpx
from pydantic import BaseModel

from core.names import check_name
from serve.admin_client import AdminAnswer, Answer, admin_call
from serve.errors import ServeError

URL_ENV = "WORKER_GATEWAY_URL"
TOKEN_ENV = "WORKER_GATEWAY_ADMIN_TOKEN"
DEFAULT_URL = "http://127.0.0.1:9000"
TIMEOUT = httpx.Timeout(300.0, connect=10.0)  # a load waits for every healthy engine


class AdapterRow(AdminAnswer):
    name: str
    path: str
    rank: int
    base_model: str
    state: str


class AdapterAnswer(AdminAnswer):
    revision: int
    adapter: AdapterRow


class RouteRow(AdminAnswer):
    production: str


class UpstreamRow(AdminAnswer):
    name: str
    models: list[str]


class StateAnswer(AdminAnswer):
    routes: dict[str, RouteRow]
    adapters: list[AdapterRow]
    upstreams: list[UpstreamRow]


def _call(args: argparse.Namespace, method: str, path: str, model: type[Answer],
          body: dict[str, Any] | None = None) -> Answer:
    token = os.environ.get(TOKEN_ENV, "").strip()
    if not token:
        raise ServeError(f"no admin token: set ${TOKEN_ENV} to the gateway's [admin] token")
    return admin_call(args.gateway, f"/admin{path}", token, method, model, body, timeout=TIMEOUT,
                      what="the admin API", hint_401=f"${TOKEN_ENV} must hold the gateway's [admin] token")


def _register(args: argparse.Namespace) -> int:
    version = check_name(args.version, "VERSION")
    answer = _call(args, "POST", "/adapters", AdapterAnswer, {"name": version, "path": args.path or version})
    a = answer.adapter
    print(f"registered {a.name}: rank {a.rank}, trained on {a.base_model}, {a.path} (revision {answer.revision})")
    print(f"next: worker-serve adapter load {a.name}")
    return 0


def _load(args: argparse.Namespace) -> int:
    version = check_name(args.version, "VERSION")
    answer = _call(args, "POST", f"/adapters/{version}/load", AdapterAnswer)
    print(f"{answer.adapter.name}: {answer.adapter.state} on every healthy engine (revision {answer.revision})")
    return 0


class VersionRow(BaseModel):
    """One line of `adapter list` (`--json` prints these)."""

    version: str
    state: str
    loaded_on: list[str]
    """The engines that serve it now."""
    production_of: list[str]
    """The routes it is production of."""
    base: str
    """The base model it was trained on (its adapter_config.json)."""
    path: str
    rank: int


def version_rows(state: StateAnswer) -> list[VersionRow]:
    """One row per registered version: where it is loaded now and which routes it is production of."""
    return [VersionRow(version=a.name, state=a.state, loaded_on=[u.name for u in state.upstreams if a.name in u.models],
                       production_of=sorted(n for n, route in state.routes.items() if route.production == a.name),
                       base=a.base_model, path=a.path, rank=a.rank)
            for a in state.adapters]


def _list(args: argparse.Namespace) -> int:
    rows = version_rows(_call(args, "GET", "/state", StateAnswer))
    if args.json:
        print(json.dumps([row.model_dump() for row in rows], indent=2))
        return 0
    if not rows:
        print("no adapter versions registered")
        return 0
    table = [("VERSION", "STATE", "LOADED ON", "PRODUCTION", "BASE", "PATH")]
    table += [(r.version, r.state, ",".join(r.loaded_on) or "-", ",".join(r.production_of) or "no", r.base, r.path)
              for r in rows]
    widths = [max(len(line[i]) for line in table) for i in range(len(table[0]) - 1)]
    for line in table:
        print("  ".join([*(cell.ljust(width) for cell, width in zip(line, widths, strict=False)), line[-1]]))
    return 0


def add_actions(actions: Any) -> None:
    """`register`, `load` and `list` beside the other `worker-serve adapter` actions."""
    def action(name: str, help_: str) -> argparse.ArgumentParser:
        p: argparse.ArgumentParser = actions.add_parser(name, help=help_)
        p.add_argument("--gateway", default=os.environ.get(URL_ENV, DEFAULT_URL), metavar="URL",
                       help=f"the gateway (default: ${URL_ENV}, else {DEFAULT_URL}); the admin token is "
                            f"${TOKEN_ENV}")
        return p

    register = action("register", "register an adapter version with the gateway (it checks the files)")
    register.add_argument("version", metavar="VERSION", help="the new version's name (names are never reused)")
    register.add_argument("--path", metavar="DIR",
                          help="the adapter directory as the gateway reads it: under its [adapters] root, "
                               "relative to it or absolute (default: VERSION)")
    register.set_defaults(func=_register)
    load = action("load", "load a registered version on every healthy engine")
    load.add_argument("version", metavar="VERSION", help="a registered version")
    load.set_defaults(func=_load)
    listing = action("list", "every registered version: state, engines it is loaded on, routes it is production of")
    listing.add_argument("--json", action="store_true", help="the rows as JSON")
    listing.set_defaults(func=_list)
