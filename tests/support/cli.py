"""Run a console entry point (`python -m serve|replay|demo`) as a user would: its own process, so a
traceback would show on stderr exactly as in a terminal."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def run_cli(package: str, *args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """`python -m PACKAGE ARGS…` in `cwd` with this checkout's code first on the path."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    return subprocess.run([sys.executable, "-m", package, *args], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=120, check=False)


def assert_one_error_line(result: subprocess.CompletedProcess[str], *needles: str) -> None:
    """Exit 2 and one `error: …` line naming each needle (indented detail lines may follow); no traceback."""
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr, result.stderr
    assert lines and lines[0].startswith("error: "), result.stderr
    assert all(line.startswith("  ") for line in lines[1:]), result.stderr
    for needle in needles:
        assert needle in lines[0], (needle, lines[0])
