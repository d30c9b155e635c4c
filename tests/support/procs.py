"""Stop a command with SIGTERM and prove that nothing it started is left: the command runs as a
driver process (`python -c CODE`, this checkout first on the path), its descendants are collected
while it runs, and after it has died every one of them must be gone (or a zombie awaiting reaping)."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parents[2]


def driver(code: str, log: Path, env: dict[str, str] | None = None) -> subprocess.Popen[bytes]:
    """`python -c CODE` in the checkout, stdout and stderr to `log`."""
    env = {**os.environ, **(env or {}),
           "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    with log.open("wb") as out:
        return subprocess.Popen([sys.executable, "-c", code], cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT)


def wait_until(ready: Callable[[], bool], proc: subprocess.Popen[bytes], log: Path, limit_s: float = 120) -> None:
    """Poll `ready` until true; fail (and stop `proc`) if the driver exits or `limit_s` passes."""
    deadline = time.monotonic() + limit_s
    while not ready():
        if proc.poll() is not None or time.monotonic() > deadline:
            terminate_tree(proc)
            raise AssertionError(f"the driver never got ready (status {proc.returncode}):\n"
                                 f"{log.read_text(errors='replace')[-3000:]}")
        time.sleep(0.2)


def descendants(pid: int) -> list[psutil.Process]:
    """Every live process below `pid` (new sessions included: they keep their parent)."""
    try:
        return psutil.Process(pid).children(recursive=True)
    except psutil.NoSuchProcess:
        return []


def alive(procs: list[psutil.Process]) -> list[psutil.Process]:
    """Those of `procs` still running (a zombie has ended; only its parent's reaping is left)."""
    out = []
    for p in procs:
        try:
            if p.is_running() and p.status() != psutil.STATUS_ZOMBIE:
                out.append(p)
        except psutil.NoSuchProcess:
            pass
    return out


def sigterm_leaves_nothing(proc: subprocess.Popen[bytes], log: Path, at_least: int, limit_s: float = 60,
                           statuses: tuple[int, ...] = (-signal.SIGTERM,)) -> None:
    """SIGTERM the driver: it must end within `limit_s` with one of `statuses` (by the signal, unless
    it is a server that shuts down cleanly), and every one of the (at least `at_least`) descendants
    it had must be gone."""
    before = descendants(proc.pid)
    assert len(before) >= at_least, [p.cmdline() for p in before]
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(limit_s)
    except subprocess.TimeoutExpired:
        terminate_tree(proc)
        raise
    deadline = time.monotonic() + 5  # a SIGKILLed grandchild is gone at once; allow the kernel a moment
    while alive(before) and time.monotonic() < deadline:
        time.sleep(0.1)
    left = alive(before)
    terminate_tree(proc, left)
    assert not left, f"left behind: {[p.cmdline() for p in left]}\n{log.read_text(errors='replace')[-3000:]}"
    assert proc.returncode in statuses, log.read_text(errors="replace")[-3000:]
    assert "Traceback" not in log.read_text(errors="replace"), log.read_text(errors="replace")[-3000:]


def terminate_tree(proc: subprocess.Popen[bytes], extra: list[psutil.Process] | None = None) -> None:
    """Test hygiene whatever happened: SIGKILL the driver and everything below it."""
    for p in [*descendants(proc.pid), *(extra or [])]:
        with contextlib.suppress(psutil.NoSuchProcess):
            p.kill()
    if proc.poll() is None:
        proc.kill()
    proc.wait()
