"""What the three console scripts share: dispatch to the chosen subcommand, and the one rule for
errors — a `WorkerTierError` is the user's to fix and is one `error: …` line with exit code 2;
anything else is a bug and keeps its traceback. A stop signal (SIGTERM as Ctrl-C) unwinds the
subcommand, so every child process it started is stopped, then ends the process by that signal."""

from __future__ import annotations

import argparse
import sys

from core.errors import WorkerTierError
from core.process import run_main


def run_command(parser: argparse.ArgumentParser, argv: list[str] | None = None) -> int:
    """Parse `argv`, run the subcommand's `func`, and return its exit code."""
    args = parser.parse_args(argv)

    def subcommand() -> int:
        try:
            result: int = args.func(args)
        except WorkerTierError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
        return result

    return run_main(subcommand)
