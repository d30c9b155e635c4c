"""`worker-serve engine`: vLLM's OpenAI server from an engine config."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from serve.engine import launcher as engine_mod


def _engine(args: argparse.Namespace) -> int:
    config = engine_mod.load_engine_config(args.config, port=args.port)
    engine_mod.check_checkpoint(args.config, config)
    if args.dry_run:
        env = " ".join(f"{k}={v}" for k, v in sorted(config.env.items()))
        cmd = " ".join(engine_mod.server_command(config))
        print(f"{env} {cmd}".strip())
        return 0
    return engine_mod.run_foreground(config)


def add_parser(sub: Any) -> None:
    """`engine`: vLLM's OpenAI server from an engine config."""
    eng = sub.add_parser("engine", help="start vLLM's OpenAI server from a TOML engine config")
    eng.add_argument("--config", type=Path, required=True,
                     help="the engine's TOML config (configs/engine/*.toml)")
    eng.add_argument("--port", type=int, default=None, help="override vllm.port")
    eng.add_argument("--dry-run", action="store_true", help="print the exact command and exit")
    eng.set_defaults(func=_engine)
