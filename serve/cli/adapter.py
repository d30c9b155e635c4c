"""`worker-serve adapter …`: make, train and merge LoRA adapters here (`make-random`, `train`, `merge`), and
register, load and list them on a running gateway (`register`, `load`, `list`): thin clients over the gateway's
admin API (serve/gateway/endpoints/admin.py), so registering a candidate needs no curl recipe.

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
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import httpx
from pydantic import BaseModel

from core.atomicwrite import write_text_atomic
from core.names import check_name
from core.records import TrainingExample
from serve.admin_client import AdminAnswer, Answer, admin_call
from serve.cli.model import built_model
from serve.engine.train import DEMO_EPOCHS, DEMO_EXAMPLES, DEMO_LR, DEMO_MAX_LEN, MARKER, ChatExample, TrainReport
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


def _adapter_make_random(args: argparse.Namespace) -> int:
    from serve.engine.adapters import make_random_adapter

    model_dir = built_model(args.model)
    out = make_random_adapter(model_dir, args.out, seed=args.seed, rank=args.rank)
    print(f"adapter written: {out}")
    return 0


def _adapter_merge(args: argparse.Namespace) -> int:
    from serve.engine.adapters import merge_adapter

    out = merge_adapter(built_model(args.model), args.adapter, args.out)
    print(f"merged model written: {out}")
    print(f"next: worker-serve model quantize --model {out} --scheme w8a8-int8 --out {out}-w8a8-int8")
    return 0


def _adapter_train(args: argparse.Namespace) -> int:
    from serve.engine.train import (
        curated_examples,
        load_training,
        select_examples,
        stratified,
        train_adapter,
    )

    for flag, value in (("--examples", args.examples), ("--max-len", args.max_len)):
        if value is not None and value < 1:
            raise ServeError(f"{flag} {value}: must be at least 1")
    model_dir = built_model(args.model)
    data: dict[str, object] | None = None
    examples: list[ChatExample] | list[TrainingExample]
    if args.data.is_dir():
        examples, data = curated_examples(args.data)
        if args.examples:
            every, examples = examples, stratified(examples, args.examples, args.seed)
            print(chosen_line(every, examples))
    elif args.select is None:
        raise ServeError(f"{args.data}: a demo split (a train.jsonl file) needs --select recovery|mix")
    else:
        examples = select_examples(load_training(args.data), args.select, args.examples or DEMO_EXAMPLES, args.seed)
    report = train_adapter(model_dir, examples, args.out, seed=args.seed, rank=args.rank, alpha=2 * args.rank,
                           epochs=args.epochs, lr=args.lr, max_len=args.max_len, label=args.out.name)
    record = {"base": str(model_dir), "data": data or {"path": str(args.data), "select": args.select},
              "report": report.model_dump()}
    write_text_atomic(args.out / MARKER, json.dumps(record, indent=2, sort_keys=True) + "\n")
    print(f"adapter written: {args.out} ({report.summary()})")
    if report.skipped:
        print(skipped_line(report))
    return 0


def chosen_line(every: Sequence[ChatExample], chosen: Sequence[ChatExample]) -> str:
    """What `--examples` took of a curated set, per class, in the set's order of classes."""
    got = Counter(e.mix_class for e in chosen)
    return (f"examples: {len(chosen)} of {len(every)}, each class in its share of the set: "
            + ", ".join(f"{c} {got[c]} of {n}" for c, n in Counter(e.mix_class for e in every).items()))


def skipped_line(report: TrainReport) -> str:
    """The examples training left out for length, on screen as in the adapter's record."""
    return (f"skipped {report.skipped_too_long} of {report.examples + report.skipped_too_long} examples longer than "
            f"--max-len {report.max_len} tokens (never truncated: a cut prompt loses its tools): "
            f"{', '.join(report.skipped)}; raise --max-len to train on them")


def add_parser(sub: Any) -> None:
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
                       help="at most this many examples (default: a curated set's all, a split's "
                            f"{DEMO_EXAMPLES}); of a curated set, each class in its share of the set, drawn within "
                            "the class in the order --seed fixes")
    train.add_argument("--max-len", type=int, default=DEMO_MAX_LEN,
                       help=f"longest example in tokens, prompt and answer (default {DEMO_MAX_LEN}); a longer one is "
                            "skipped, never truncated, and named on screen and in the adapter's record")
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
    _add_admin_actions(adapter)


def _add_admin_actions(actions: Any) -> None:
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
