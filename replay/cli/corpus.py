"""`worker-replay corpus …`: audit a Claude Code corpus, memory reads per turn."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from replay.corpus.sources import FORMATS
from replay.memory.files import workspace_dirs


def _corpus_audit(args: argparse.Namespace) -> int:
    from replay.corpus.audit import audit, format_audit
    from replay.corpus.claude_code import ClaudeCodeDir

    report = audit(ClaudeCodeDir(args.dir))
    print(report.model_dump_json(indent=2) if args.json else format_audit(report))
    return 0


def _corpus_reads(args: argparse.Namespace) -> int:
    from replay.corpus.retrieval import READ_TOOLS, format_retrieval, retrieval, session_records
    from replay.corpus.sources import open_source

    tools = dict(args.read_tool) or READ_TOOLS
    refused: list[str] = []
    memory = workspace_dirs(args.memory_root) if args.memory_root else None
    report = retrieval(session_records(open_source(args.dir, args.transcript_format), tools, refused),
                       str(args.dir), memory, refused)
    print(report.model_dump_json(indent=2) if args.json else format_retrieval(report))
    return 0


def _read_tool(text: str) -> tuple[str, str]:
    tool, sep, argument = text.partition("=")
    if not (sep and tool and argument):
        raise argparse.ArgumentTypeError(f"{text!r}: expected TOOL=ARGUMENT, e.g. Read=file_path")
    return tool, argument


def add_parser(sub: Any) -> None:
    corpus = sub.add_parser("corpus", help="the runtime's own session files").add_subparsers(dest="action",
                                                                                           required=True)
    p = corpus.add_parser("audit", help="sessions, subagent runs, records, tool calls, errors, decisions per "
                                        "stratum, top tools, time span of a Claude Code corpus")
    p.add_argument("dir", type=Path, help="<workspace>/projects/<cwd-slug>/<session>.jsonl under it")
    p.add_argument("--json", action="store_true", help="the audit as JSON")
    p.set_defaults(func=_corpus_audit)
    p = corpus.add_parser("reads", help="memory reads per turn and the index's coverage, per session and workspace "
                                        "(001 §10 items 1 and 7)")
    p.add_argument("dir", type=Path, help="a Claude Code corpus or this project's transcripts")
    p.add_argument("--transcript-format", choices=FORMATS, default="auto",
                   help="how DIR is laid out (default: told from the directory)")
    p.add_argument("--memory-root", type=Path, metavar="DIR",
                   help="the workspaces' memory (one directory each): adds the index's coverage")
    p.add_argument("--read-tool", action="append", default=[], type=_read_tool, metavar="TOOL=ARGUMENT",
                   help="the runtime's file-read tool and its path argument (repeatable; default Read=file_path)")
    p.add_argument("--json", action="store_true", help="the counts as JSON")
    p.set_defaults(func=_corpus_reads)
