"""What the three console scripts share: dispatch to the chosen subcommand, and the one rule for
errors — a `WorkerTierError` is the user's to fix and is one `error: …` line with exit code 2;
anything else is a bug and keeps its traceback. A stop signal (SIGTERM as Ctrl-C) unwinds the
subcommand, so every child process it started is stopped, then ends the process by that signal."""

from __future__ import annotations

import argparse
import sys

from core.errors import WorkerTierError
from core.names import excerpt
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


def pair_item(text: str) -> tuple[str, str]:
    """One `--pair BASELINE:CANDIDATE` (an argparse type): a malformed one is a usage error."""
    baseline, sep, candidate = text.partition(":")
    if not sep or not baseline or not candidate:
        raise argparse.ArgumentTypeError(f"expected BASELINE:CANDIDATE, got {excerpt(text)}")
    return baseline, candidate


def reference_first(arms: list[str], configured: list[str], named: str | None = None) -> list[str]:
    """Arms with the reference first: `named`, else the run config's first arm present, else the
    first arm listed. Results files list arms in the order work finished, which means nothing."""
    ordered = [*(a for a in configured if a in arms), *(a for a in arms if a not in configured)]
    reference = named if named is not None else (ordered[0] if ordered else None)
    return [] if reference is None else [reference, *(a for a in ordered if a != reference)]
