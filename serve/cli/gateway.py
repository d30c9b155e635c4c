"""`worker-serve gateway`: the OpenAI-compatible gateway from its config."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any


def _gateway(args: argparse.Namespace) -> int:
    import logging

    import uvicorn

    from serve.app import create_app
    from serve.gateway.config import load_gateway_config

    config = load_gateway_config(args.config, port=args.port)
    logging.basicConfig(level=args.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    uvicorn.run(create_app(config), host=config.gateway.host, port=config.gateway.port, log_level=args.log_level)
    return 0


def add_parser(sub: Any) -> None:
    """`gateway`: the gateway from its config."""
    gw = sub.add_parser("gateway", help="start the OpenAI-compatible gateway from a TOML gateway config")
    gw.add_argument("--config", type=Path, required=True, help="the gateway's TOML config (configs/gateway.toml)")
    gw.add_argument("--port", type=int, default=None, help="override gateway.port")
    gw.add_argument("--log-level", default="info", choices=["debug", "info", "warning", "error"],
                    help="'warning' also silences the per-request access log")
    gw.set_defaults(func=_gateway)
