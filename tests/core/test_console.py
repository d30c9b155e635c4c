"""core/console.py's rule for I/O faults, on a bare subcommand in its own process (as the console scripts run):
an `OSError` is one `error:` line and exit 2; standard output closed by its reader is quiet, exit 141; a
broken pipe that is not stdout's (a socket) is still an error. The three CLIs themselves: tests/test_cli_faults.py."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SUBCOMMAND = """
import argparse, errno, sys
from core.console import run_command
def func(args):
    print("some output")
    {body}
    return 0
parser = argparse.ArgumentParser()
parser.set_defaults(func=func)
sys.exit(run_command(parser, []))
"""


def run(body: str, stdout: int | None = subprocess.PIPE) -> subprocess.CompletedProcess[str]:
    """The subcommand doing `body` after its first line of output, its stdout block-buffered as in a shell."""
    env = {key: value for key, value in os.environ.items() if key != "PYTHONUNBUFFERED"}
    return subprocess.run([sys.executable, "-c", SUBCOMMAND.format(body=body)], cwd=ROOT, stdout=stdout,
                          stderr=subprocess.PIPE, text=True, timeout=60, check=False,
                          env={**env, "PYTHONPATH": str(ROOT)})


def closed_pipe() -> int:
    """The write end of a pipe whose reader is already gone (`… | head` once head has exited)."""
    read, write = os.pipe()
    os.close(read)
    return write


@pytest.mark.parametrize(("body", "line"), [
    ("raise OSError(errno.ENOSPC, 'No space left on device', '/srv/out/train.jsonl')",
     "error: /srv/out/train.jsonl: No space left on device"),
    ("raise OSError(errno.EXDEV, 'Invalid cross-device link', '/a', None, '/b')", "error: /a -> /b: Invalid cross-device link"),
    ("raise BrokenPipeError(errno.EPIPE, 'Broken pipe')", "error: Broken pipe"),  # a socket's: stdout is fine
    ("raise ConnectionRefusedError(errno.ECONNREFUSED, 'Connection refused')", "error: Connection refused"),
])
def test_an_os_error_is_one_line_and_exit_2(body: str, line: str) -> None:
    result = run(body)
    assert (result.returncode, result.stderr, result.stdout) == (2, line + "\n", "some output\n")


def test_stdout_on_a_full_disk_is_one_line_and_exit_2() -> None:
    with open("/dev/full", "w") as full:
        result = run("pass", stdout=full.fileno())
    assert (result.returncode, result.stderr) == (2, "error: No space left on device\n")


def test_stdout_closed_by_its_reader_is_quiet_with_141() -> None:
    write = closed_pipe()
    try:
        result = run("print('x' * 100_000)", stdout=write)
    finally:
        os.close(write)
    assert (result.returncode, result.stderr) == (141, "")


def test_a_user_error_with_stdout_on_a_full_disk_says_the_error_alone() -> None:
    """What stdout still buffered cannot be written either: no second report of that at exit (exit 120)."""
    with open("/dev/full", "w") as full:
        result = run("from core.errors import WorkerTierError; raise WorkerTierError('bad input')",
                     stdout=full.fileno())
    assert (result.returncode, result.stderr) == (2, "error: bad input\n")
