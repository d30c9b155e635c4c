"""What the three console scripts share: dispatch to the chosen subcommand, and the one rule for
errors — a `WorkerTierError` is the user's to fix and an I/O fault (an `OSError`: a full disk, a
refused connection, standard output gone) is the machine's; each is one `error: …` line with exit
code 2, while anything else is a bug and keeps its traceback. Standard output closed by its reader
(`… | head`) is not an error: the command stops quietly with 141, as Unix tools killed by SIGPIPE do.
A stop signal (SIGTERM as Ctrl-C) unwinds the subcommand, so every child process it started is
stopped, then ends the process by that signal."""

from __future__ import annotations

import argparse
import os
import select
import signal
import sys
from contextlib import suppress

from core.errors import WorkerTierError
from core.names import excerpt
from core.process import run_main


def run_command(parser: argparse.ArgumentParser, argv: list[str] | None = None) -> int:
    """Parse `argv`, run the subcommand's `func`, and return its exit code."""
    args = parser.parse_args(argv)

    def subcommand() -> int:
        try:
            result: int = args.func(args)
            sys.stdout.flush()  # a full disk or a closed pipe under stdout fails here, not in the exit's flush
        except WorkerTierError as exc:
            return _fail(str(exc))
        except OSError as exc:
            if isinstance(exc, BrokenPipeError) and _stdout_closed():
                _silence_stdout()
                return EXIT_CLOSED_PIPE
            return _fail(_io_fault(exc))
        return result

    return run_main(subcommand)


EXIT_ERROR = 2
EXIT_CLOSED_PIPE = 128 + signal.SIGPIPE
"""What a shell shows for a Unix tool that SIGPIPE ended (`yes | head`)."""


def _io_fault(exc: OSError) -> str:
    """An `OSError` as the text of one line: the paths it names and the system's words for it, without
    Python's `[Errno N]` (a write names no path: the writers that can name one raise their own error)."""
    names = [str(name) for name in (exc.filename, exc.filename2) if name is not None]
    why = exc.strerror or str(exc) or type(exc).__name__
    return f"{' -> '.join(names)}: {why}" if names else why


def _fail(message: str) -> int:
    try:  # what stdout still buffers, out now: at exit a full disk under it would print a traceback
        sys.stdout.flush()
    except OSError:
        _silence_stdout()
    with suppress(OSError):  # stderr gone too: nothing left to tell
        print(f"error: {message}", file=sys.stderr)
    return EXIT_ERROR


def _stdout_closed() -> bool:
    """Whether stdout is a pipe its reader has closed (Linux reports POLLERR on such a write end), so a
    `BrokenPipeError` from a socket is still reported as the fault it is."""
    try:
        poller = select.poll()
        poller.register(sys.stdout.fileno(), 0)  # errors are reported whatever the mask
        return any(events & select.POLLERR for _, events in poller.poll(0))
    except (OSError, ValueError):  # not a real file descriptor (a test's captured stdout)
        return False


def _silence_stdout() -> None:
    """The Python docs' recipe for a closed stdout: /dev/null in its place, so what is still buffered
    goes nowhere instead of failing again at exit."""
    with suppress(OSError, ValueError):
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)


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
