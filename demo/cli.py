"""`worker-demo`: the demo on the embedded default, and the trained demo adapters it uses."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from core.console import run_command
from replay.cli.common import ledger_option
from serve.engine.modelbuild import cache_dir


def _run(args: argparse.Namespace) -> int:
    from demo.run import run_demo

    return run_demo(args.out, args.ledger, quick=args.quick, verbose=args.verbose)


def _deferred(args: argparse.Namespace) -> int:
    from demo.deferred import run_deferred

    return run_deferred(args.out)


def _agent(args: argparse.Namespace) -> int:
    from demo.agent import run_agent

    return run_agent(args.out)


def _adapters(args: argparse.Namespace) -> int:
    from demo.trained_adapters import build_demo_adapters, cached_demo_dir

    root = args.cache_dir or cache_dir()
    built = build_demo_adapters(args.demo_dir or cached_demo_dir(root), root, verbose=args.verbose)
    print("demo adapters: " + ", ".join(f"{name} {path}" for name, path in built.items()))
    return 0


def _pack(args: argparse.Namespace) -> int:
    from demo.scenario_pack import PER_FAMILY, write_pack

    path = write_pack(args.out, seed=args.seed, per_family=args.per_family or PER_FAMILY)
    print(f"{path}: demo scenario pack written and frozen")
    return 0


def _loop(args: argparse.Namespace) -> int:
    from demo.loop import run_loop

    return run_loop(args.out, args.ledger, engine_url=args.engine_url)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="worker-demo", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="the full demo: engine + gateway + memory-arm replay + report")
    run.add_argument("--out", type=Path, default=Path("runs/demo"),
                     help="where the demo writes (default runs/demo; a rerun reuses what it wrote there)")
    run.add_argument("--quick", action="store_true", help="a small slice, for a smoke test")
    run.add_argument("--verbose", action="store_true",
                     help="print every table (they are always in the report and in RUN/demo.txt) and each "
                          "adapter training step")
    ledger_option(run)
    run.set_defaults(func=_run)
    deferred = sub.add_parser("deferred", help="descriptor capture -> transcripts -> resolved, redacted suite "
                                               "-> replay of base and the recovery adapter")
    deferred.add_argument("--out", type=Path, default=Path("runs/deferred"), help="a fresh directory")
    deferred.set_defaults(func=_deferred)
    agent = sub.add_parser("agent", help="one Claude Agent SDK session through the gateway -> its captured "
                                         "decisions -> replayed with memory withheld and injected")
    agent.add_argument("--out", type=Path, default=Path("runs/agent"), help="a fresh directory")
    agent.set_defaults(func=_agent)
    loop = sub.add_parser("loop", help="the slow loop closed on CPU: a recorded failure, its correction proven in the "
                                       "sandbox, curated, trained, judged by the gate (the Agent SDK: the dev extra)")
    loop.add_argument("--out", type=Path, default=Path("runs/loop"), help="a fresh directory")
    loop.add_argument("--engine-url", default=None, metavar="URL",
                      help="an engine already serving the embedded model (default: start one)")
    ledger_option(loop)
    loop.set_defaults(func=_loop)
    adapters = sub.add_parser("adapters", help="train and cache the demo's recovery and mix adapters (idempotent)")
    adapters.add_argument("--demo-dir", type=Path, default=None,
                          help="directory holding train.jsonl (default: write the seed-0 demo into the cache)")
    adapters.add_argument("--cache-dir", type=Path, default=None, help=f"default: {cache_dir()}")
    adapters.add_argument("--verbose", action="store_true",
                          help="say what each adapter trains on and print each training step (default: a line "
                               "per adapter trained)")
    adapters.set_defaults(func=_adapters)
    pack = sub.add_parser("pack", help="write the demo scenario pack for `worker-replay sandbox` (deterministic)")
    pack.add_argument("--out", type=Path, required=True, help="the scenario pack's directory")
    pack.add_argument("--seed", type=int, default=0, help="the demo world's seed (default 0; the same seed, the "
                                                          "same pack)")
    pack.add_argument("--per-family", type=int, default=None, help="only the first N scenarios of each family")
    pack.set_defaults(func=_pack)
    return parser


def main(argv: list[str] | None = None) -> int:
    return run_command(build_parser(), argv)


if __name__ == "__main__":
    sys.exit(main())
