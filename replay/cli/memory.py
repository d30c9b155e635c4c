"""`worker-replay memory …`: check workspace memory files, make an empty tree, the fast loop's counters."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from replay.memory.contract import check_memory, has_violations
from replay.memory.files import workspace_dirs


def _memory_check(args: argparse.Namespace) -> int:
    dirs = workspace_dirs(args.dir) if args.root else {args.dir.name: args.dir}
    problems = [p for path in dirs.values() for p in check_memory(path)]
    for problem in problems:
        print(problem)
    return 1 if has_violations(problems) else 0


def _memory_init(args: argparse.Namespace) -> int:
    from replay.corpus.claude_code import ClaudeCodeDir
    from replay.memory.scaffold import init_memory

    refused: list[str] = []
    found = {workspace for workspace, _, _ in ClaudeCodeDir(args.corpus).sessions(refused)} if args.corpus else set()
    for line in refused:
        print(f"skipped: {line}")
    done = init_memory(args.root, [*args.workspaces, *found])
    for name in done.made:
        print(f"{name}: made, empty (its `workspace` arm injects nothing: it sends what `withheld` sends)")
    for name in done.kept:
        print(f"{name}: kept as it is (it has a directory)")
    print(f"memory root {args.root}: {len(done.made)} made, {len(done.kept)} kept; "
          f"`worker-replay memory check --root {args.root}` checks it")
    return 0


def _memory_stats(args: argparse.Namespace) -> int:
    from replay.memory.counters import fleet_stats, format_fleet, textfile, write_textfile
    from replay.qa.coverage import coverage_lines, coverage_textfile, fleet_coverage, read_modes
    from replay.qa.labels import read_labels

    stats = fleet_stats(args.roots, git=args.git)
    coverage = None
    if args.qa_modes is not None or args.reviews is not None:
        stats = fleet_coverage(stats, read_modes(args.qa_modes) if args.qa_modes else {},
                               read_labels(args.reviews) if args.reviews else [])
        coverage = stats.qa
    if args.textfile is not None:
        write_textfile(args.textfile, textfile(stats) + (coverage_textfile(coverage) if coverage else ""))
    if args.json:
        print(stats.model_dump_json(indent=2))
    else:
        print("\n".join([format_fleet(stats), *(coverage_lines(coverage) if coverage else [])]))
    return 0


def add_parser(sub: Any) -> None:
    memory = sub.add_parser("memory", help="workspace memory").add_subparsers(dest="action", required=True)
    check = memory.add_parser("check", help="check memory files like the public check script")
    check.add_argument("dir", type=Path, help="a workspace's memory directory (or, with --root, a memory root)")
    check.add_argument("--root", action="store_true", help="DIR holds one sub-directory per workspace")
    check.set_defaults(func=_memory_check)
    init = memory.add_parser("init", help="an empty memory directory for each workspace without one (a corpus "
                                          "recorded with no memory): `workspace` then injects nothing there")
    init.add_argument("root", type=Path, metavar="ROOT", help="the memory root (a run config's [memory] root)")
    init.add_argument("workspaces", nargs="*", metavar="WORKSPACE", help="workspace names")
    init.add_argument("--corpus", type=Path, metavar="DIR",
                      help="a Claude Code corpus: every workspace it holds sessions of")
    init.set_defaults(func=_memory_init)
    stats = memory.add_parser("stats", help="the fast loop's counters per workspace and root (S25), read-only")
    stats.add_argument("roots", type=Path, nargs="+", metavar="ROOT", help="one directory per workspace under it")
    stats.add_argument("--json", action="store_true", help="the counters as JSON")
    stats.add_argument("--git", action="store_true",
                       help="also count the rule churn from each workspace's git history and list where it disagrees "
                            "with the provenance log")
    stats.add_argument("--textfile", type=Path, metavar="FILE",
                       help="also write the counters for node_exporter's textfile collector (atomically)")
    stats.add_argument("--qa-modes", type=Path, metavar="FILE",
                       help="Stop-QA coverage: the platform's mode per workspace, a JSON object workspace -> mode "
                            "(a registered workspace it leaves out is off)")
    stats.add_argument("--reviews", type=Path, metavar="FILE",
                       help="Stop-QA coverage: reviews.jsonl (qa labels), for the share of runs with a reviewer "
                            "verdict and with a person's disposition")
    stats.set_defaults(func=_memory_stats)
