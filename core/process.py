"""A child service (the vLLM engine, the gateway) started, health-checked and stopped as a group, and
the one rule that makes every command clean up after itself: SIGTERM (what `timeout`, systemd and CI
send) unwinds the stack exactly like Ctrl-C, so every `finally` and context manager that stops a child
runs, instead of the interpreter dying on the spot and leaving its children running as orphans."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from types import FrameType
from typing import Self


class Terminated(KeyboardInterrupt):
    """A stop signal (SIGTERM, SIGINT) raised in the main thread: a `KeyboardInterrupt`, so whatever
    cleans up on Ctrl-C cleans up on SIGTERM too; `signum` says which signal it was."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)


def raise_terminated(signum: int, _frame: FrameType | None) -> None:
    """The handler that turns a stop signal into `Terminated` (also what the test session installs)."""
    raise Terminated(signum)


@contextmanager
def unwinding_stop_signals() -> Iterator[None]:
    """While inside, SIGTERM and SIGINT raise `Terminated` in the main thread; the previous handlers
    come back on the way out (a no-op outside the main thread, where Python allows no handlers)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {signum: signal.getsignal(signum) for signum in STOP_SIGNALS}
    for signum in STOP_SIGNALS:
        signal.signal(signum, raise_terminated)
    try:
        yield
    finally:
        for signum, handler in previous.items():
            if handler is not None:
                signal.signal(signum, handler)


def die_by(signum: int) -> None:
    """End this process by `signum` with its default action, after the cleanup is done, so the shell,
    `timeout` and systemd see what stopped it (exit 128+N, a clean stop) rather than a made-up status."""
    signal.signal(signum, signal.SIG_DFL)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signum})
    os.kill(os.getpid(), signum)


def run_main(main: Callable[[], int]) -> int:
    """Every command that starts processes runs through here (the three CLIs via `core.console`, the
    scripts directly): a stop signal unwinds `main`, stopping every child it started on the way out,
    and then ends this process by that signal — unless a caller already unwinds on stop signals (the
    test session running a CLI in-process): then the exception goes on up to it."""
    nested = signal.getsignal(signal.SIGTERM) is raise_terminated
    try:
        with unwinding_stop_signals():
            return main()
    except KeyboardInterrupt as exc:
        if not nested:
            die_by(getattr(exc, "signum", signal.SIGINT))
        raise


def free_port() -> int:
    """A free loopback port (for services started by the demo, the benchmarks and the tests)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def is_healthy(base_url: str, timeout: float = 2.0) -> bool:
    """Whether `GET /health` answers 200 within `timeout`."""
    try:
        with urllib.request.urlopen(f"{base_url}/health", timeout=timeout) as resp:
            return bool(resp.status == 200)
    except (urllib.error.URLError, OSError):
        return False


class ServiceProcess:
    """Runs in its own session so `stop()` reaches every process it forks (vLLM forks workers)."""

    def __init__(self, name: str, command: list[str], env: dict[str, str], base_url: str,
                 health_timeout_s: float, log_path: Path | None = None):
        self.name, self.command, self.env = name, command, env
        self.base_url, self.health_timeout_s, self.log_path = base_url, health_timeout_s, log_path
        self.proc: subprocess.Popen[bytes] | None = None
        self.stopped = False

    def start(self) -> None:
        """Start the process in its own session (so `stop` ends its children too), logging to `log_path`."""
        self.stopped = False
        if self.log_path is None:
            self.proc = subprocess.Popen(self.command, env=self.env, start_new_session=True)
            return
        with self.log_path.open("ab") as log:
            self.proc = subprocess.Popen(self.command, env=self.env, stdout=log, stderr=subprocess.STDOUT,
                                         start_new_session=True)

    def wait_healthy(self) -> float:
        """Seconds until `/health` answered; raises if the service died or the timeout passed."""
        assert self.proc is not None
        started = time.monotonic()
        deadline = started + self.health_timeout_s
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                where = f"; see {self.log_path}" if self.log_path else ""
                raise RuntimeError(
                    f"{self.name} exited with status {self.proc.returncode} before it was healthy{where}")
            if is_healthy(self.base_url):
                return time.monotonic() - started
            time.sleep(1.0)
        self.stop()
        raise TimeoutError(f"{self.name} was not healthy after {self.health_timeout_s:.0f} s")

    def stop(self, grace_s: float = 30.0) -> int | None:
        """SIGTERM the process group, SIGKILL what is left of it after `grace_s` (at once if a second
        stop signal interrupts the wait), and reap the leader; returns its exit status (None if never
        started). The group is signalled even when the leader is gone: its children may not be."""
        if self.proc is None or self.stopped:
            return None if self.proc is None else self.proc.returncode
        try:
            if self.proc.poll() is None:
                _signal_group(self.proc.pid, signal.SIGTERM)
                with suppress(subprocess.TimeoutExpired):
                    self.proc.wait(grace_s)
        finally:
            _signal_group(self.proc.pid, signal.SIGKILL)
            self.proc.wait()
            self.stopped = True  # never signal the group's id again: it may be reused
        return self.proc.returncode

    def __enter__(self) -> Self:
        self.start()
        try:
            self.wait_healthy()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def run_to_end(command: list[str], grace_s: float = 30.0) -> int:
    """Run `command` in the foreground to its end and return its status; a stop signal here is passed
    on to it (SIGTERM), so it can stop its own children, with `grace_s` before the SIGKILL."""
    proc = subprocess.Popen(command)
    try:
        return proc.wait()
    finally:
        try:
            if proc.poll() is None:
                proc.terminate()
                proc.wait(grace_s)
        except subprocess.TimeoutExpired:
            pass
        finally:
            if proc.poll() is None:
                proc.kill()
            proc.wait()


def _signal_group(pgid: int, signum: int) -> None:
    """`killpg`, where a group already gone (every member exited) is not an error."""
    with suppress(ProcessLookupError):
        os.killpg(pgid, signum)
