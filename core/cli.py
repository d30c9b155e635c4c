"""What the three console scripts share: dispatch to the chosen subcommand, and the one rule for
errors — a `WorkerTierError` is the user's to fix and is one `error: …` line with exit code 2;
anything else is a bug and keeps its traceback."""

from __future__ import annotations

import argparse
import sys

from core.errors import WorkerTierError


def run_command(parser: argparse.ArgumentParser, argv: list[str] | None = None) -> int:
    """Parse `argv`, run the subcommand's `func`, and return its exit code."""
    args = parser.parse_args(argv)
    try:
        result: int = args.func(args)
    except WorkerTierError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return result
