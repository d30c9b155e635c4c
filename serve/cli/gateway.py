"""`worker-serve gateway`: the OpenAI-compatible gateway from its config."""

from __future__ import annotations

import argparse
import re
from pathlib import Path
from typing import Any


def _gateway(args: argparse.Namespace) -> int:
    import logging

    import uvicorn

    from serve.app import create_app
    from serve.gateway.config import load_gateway_config

    config = load_gateway_config(args.config, port=args.port, engine_urls=args.engine_url, state_db=args.state_db,
                                 capture_db=args.capture_db)
    logging.basicConfig(level=args.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    uvicorn.run(create_app(config), host=config.gateway.host, port=config.gateway.port, log_level=args.log_level)
    return 0


def _engine_url(text: str) -> str:
    """`--engine-url`: scheme and host only, as `[[upstreams]] url` takes it; anything else is a usage error."""
    if not re.fullmatch(r"https?://[^/\s]+", text):
        raise argparse.ArgumentTypeError(f"{text!r} is not an engine's base URL (scheme and host only, e.g. "
                                         "http://127.0.0.1:8001)")
    return text


def store_flags(parser: Any) -> None:
    """The gateway's stores, so a second checkout on the same machine keeps its own without a copied config (or
    set $WORKER_TIER_CACHE, which `{cache}` in the config names)."""
    parser.add_argument("--state-db", type=Path, default=None, metavar="PATH",
                        help="override gateway.state_db (routes, adapters, trials, request and shadow logs)")
    parser.add_argument("--capture-db", type=Path, default=None, metavar="PATH", help="override capture.db")


def add_parser(sub: Any) -> None:
    """`gateway`: the gateway from its config."""
    gw = sub.add_parser("gateway", help="start the OpenAI-compatible gateway from a TOML gateway config")
    gw.add_argument("--config", type=Path, required=True, help="the gateway's TOML config (configs/gateway.toml)")
    gw.add_argument("--port", type=int, default=None, help="override gateway.port")
    gw.add_argument("--engine-url", action="append", default=[], type=_engine_url, metavar="URL",
                    help="an engine's base URL (scheme and host, e.g. http://127.0.0.1:8001), replacing the "
                         "config's [[upstreams]]; repeat it for replicas")
    store_flags(gw)
    gw.add_argument("--log-level", default="info", choices=["debug", "info", "warning", "error"],
                    help="'warning' also silences the per-request access log")
    gw.set_defaults(func=_gateway)
