"""`worker-replay suite …`: validate, freeze, stats, check-privacy and build decision suites."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from replay.cli.common import registered
from replay.corpus.sources import FORMATS
from replay.errors import ReplayError
from replay.suite import check_privacy, format_stats, freeze_suite, load_suite, suite_stats, validate_suite

if TYPE_CHECKING:
    from replay.corpus.context_window import EngineContext


def _suite_validate(args: argparse.Namespace) -> int:
    problems = validate_suite(args.dir)
    for problem in problems:
        print(problem)
    print(f"{args.dir}: {'valid' if not problems else f'{len(problems)} problem(s)'}", file=sys.stderr)
    return 1 if problems else 0


def _suite_freeze(args: argparse.Namespace) -> int:
    manifest = freeze_suite(args.dir, synthetic=args.synthetic, workspaces=registered(args.keys))
    print(f"{args.dir}: frozen, {manifest.decisions} decisions, sha256 {manifest.sha256}")
    return 0


def _suite_build(args: argparse.Namespace) -> int:
    from replay.corpus.capture_suite import build_suite
    from replay.corpus.claude_code import ClaudeCodeDir
    from replay.corpus.corpus_suite import build_corpus_suites, in_test_split
    from replay.corpus.resolve import load_keys
    from replay.corpus.sources import open_source

    if args.from_corpus is not None:
        if args.transcripts is not None:
            raise ReplayError("--from-corpus reads the corpus itself: --transcripts goes with --from-capture")
        outs: dict[Path, Callable[[str], bool] | None] = {args.out: None}
        if args.test_fraction is not None:
            test = in_test_split(args.test_fraction, args.split_seed)
            outs = {args.out / "train": lambda cluster: not test(cluster), args.out / "test": test}
        corpus_keys = load_keys(args.keys)
        with _context(args) as fits:
            for report in build_corpus_suites(ClaudeCodeDir(args.from_corpus), outs, keys=corpus_keys, since=args.since,
                                              until=args.until, name=args.name, version=args.version, fits=fits,
                                              split=None if args.test_fraction is None
                                              else (args.test_fraction, args.split_seed)):
                print(report)
            _print_context(fits)
        return 0
    if args.test_fraction is not None:
        raise ReplayError("--test-fraction splits a corpus (--from-corpus) by cluster")
    if args.until is not None:
        raise ReplayError("--until cuts a corpus (--from-corpus); a capture store is cut with --since")
    transcripts = open_source(args.transcripts, args.transcript_format) if args.transcripts else None
    keys = load_keys(args.keys) if (transcripts is not None or args.keys) else None
    with _context(args) as fits:
        print(build_suite(args.from_capture, args.out, args.since, args.name, args.version, transcripts=transcripts,
                          keys=keys, verify=args.verify, fits=fits))
        _print_context(fits)
    return 0


@contextmanager
def _context(args: argparse.Namespace) -> Iterator[EngineContext | None]:
    """`--context-of URL`: the engine that counts each prompt against its context (None without it)."""
    if args.context_of is None:
        yield None
        return
    from replay.corpus.context_window import engine_context

    context = engine_context(args.context_of, args.answer_tokens)
    try:
        yield context
    finally:
        context.client.close()


def _print_context(context: EngineContext | None) -> None:
    if context is not None:
        print(context.summary())


def _suite_check_privacy(args: argparse.Namespace) -> int:
    problems = check_privacy(args.dir)
    for problem in problems:
        print(problem)
    print(f"{args.dir}: privacy check " + (f"failed: {len(problems)} detectable value(s)" if problems else "clean"),
          file=sys.stderr)
    return 1 if problems else 0


def _suite_stats(args: argparse.Namespace) -> int:
    print(format_stats(suite_stats(load_suite(args.dir))))
    return 0


def add_parser(sub: Any) -> None:
    suite = sub.add_parser("suite", help="decision suites").add_subparsers(dest="action", required=True)
    for name, func, text in (("validate", _suite_validate, "report every bad line with file:line"),
                             ("freeze", _suite_freeze, "write the frozen manifest (after the privacy check)"),
                             ("stats", _suite_stats, "counts per stratum, cluster, workspace, tool"),
                             ("check-privacy", _suite_check_privacy,
                              "every detectable value left in the suite (decision id, JSON path, type)")):
        p = suite.add_parser(name, help=text)
        p.add_argument("dir", type=Path, help="the suite directory (suite.toml + decisions.jsonl)")
        if name == "freeze":
            p.add_argument("--synthetic", action="store_true",
                           help="the suite's values are invented (a generated demo): skip the privacy check")
            p.add_argument("--keys", type=Path, metavar="FILE",
                           help="workspace pseudonym keys (default $WORKER_REPLAY_PSEUDONYM_KEYS when set): the "
                                "privacy check also looks for every registered workspace name")
        p.set_defaults(func=func)
    p = suite.add_parser("build", help="a versioned suite from the gateway's capture store, or from the runtime's "
                                       "own session files")
    source = p.add_mutually_exclusive_group(required=True)
    source.add_argument("--from-capture", type=Path, metavar="DB", help="the gateway's capture.sqlite")
    source.add_argument("--from-corpus", type=Path, metavar="DIR",
                        help="a Claude Code corpus (<workspace>/projects/...): every call it logged, no capture")
    p.add_argument("--transcripts", type=Path, metavar="DIR",
                   help="the read-only transcript corpus that resolves descriptors: Claude Code's session files "
                        "(<workspace>/projects/...) or <workspace>/<session>.jsonl")
    p.add_argument("--transcript-format", choices=FORMATS, default="auto",
                   help="how --transcripts is laid out (default: told from the directory)")
    p.add_argument("--keys", type=Path, metavar="FILE",
                   help="workspace pseudonym keys (TOML [keys]; default $WORKER_REPLAY_PSEUDONYM_KEYS); "
                        "needed with --transcripts and --from-corpus: every decision is redacted")
    p.add_argument("--verify", choices=("request", "messages"), default="request",
                   help="what a descriptor must match: the request hash too (default) or the message hashes")
    p.add_argument("--out", type=Path, required=True, metavar="DIR", help="the suite directory (never a frozen one)")
    p.add_argument("--since", metavar="ISO", help="only decisions captured at or after this time")
    p.add_argument("--until", metavar="ISO", help="--from-corpus: only calls made before this time")
    p.add_argument("--test-fraction", type=float, metavar="F",
                   help="--from-corpus: write OUT/train and OUT/test, task-disjoint (a session's decisions on one "
                        "side), about F of the sessions in test")
    p.add_argument("--split-seed", default="", metavar="TEXT", help="with --test-fraction: another stable split")
    p.add_argument("--context-of", metavar="URL",
                   help="a running vLLM engine (as `curl URL/health` reaches it): it counts each decision's prompt, "
                        "and one that leaves under --answer-tokens of its context is left out with why")
    p.add_argument("--answer-tokens", type=int, default=256, metavar="N",
                   help="with --context-of: the room kept for the answer and any memory an arm injects (default 256)")
    p.add_argument("--name", default="capture", help="the suite's name in suite.toml (default: capture)")
    p.add_argument("--version", default="1", help="the suite's version in suite.toml (default: 1)")
    p.set_defaults(func=_suite_build)
