"""A child service (the vLLM engine, the gateway) started, health-checked and stopped as a group."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path


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

    def start(self) -> None:
        """Start the process in its own session (so `stop` ends its children too), logging to `log_path`."""
        log = self.log_path.open("ab") if self.log_path else None
        self.proc = subprocess.Popen(self.command, env=self.env, stdout=log,
                                     stderr=subprocess.STDOUT if log else None, start_new_session=True)

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
        """SIGTERM the process group, SIGKILL after `grace_s`; returns the exit status (None if never started)."""
        if self.proc is None or self.proc.poll() is not None:
            return None if self.proc is None else self.proc.returncode
        os.killpg(self.proc.pid, signal.SIGTERM)
        try:
            return self.proc.wait(grace_s)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            return self.proc.wait()

    def __enter__(self) -> ServiceProcess:
        self.start()
        self.wait_healthy()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
