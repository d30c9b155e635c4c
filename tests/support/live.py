"""Small helpers for tests that talk to real servers on loopback."""

from __future__ import annotations

import json
import re
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from core.process import free_port
from serve.engine.launcher import EngineConfig, EngineProcess

__all__ = ["engine_value", "free_port", "http_json", "running_engine"]


@contextmanager
def running_engine(config: EngineConfig, log: Path) -> Iterator[EngineProcess]:
    """A real engine, healthy, stopped on the way out; a failed start fails the test with the end of vLLM's own
    log, and a stop signal while it starts stops it too."""
    proc = EngineProcess(config, log_path=log)
    proc.start()
    try:
        proc.wait_healthy()
    except (RuntimeError, TimeoutError) as exc:
        proc.stop()
        tail = "\n".join(log.read_text(errors="replace").splitlines()[-40:])
        pytest.fail(f"{exc}\n--- vllm.log (tail) ---\n{tail}")
    except BaseException:
        proc.stop()
        raise
    try:
        yield proc
    finally:
        proc.stop()


def http_json(method: str, url: str, body: dict | None = None, timeout: float = 300.0,
              headers: dict[str, str] | None = None) -> tuple[int, dict | str]:
    """Plain HTTP for tests: (status, parsed JSON or text), HTTP errors included."""
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, method=method,
                                 headers={"Content-Type": "application/json", **(headers or {})})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            status, raw = resp.status, resp.read().decode()
    except urllib.error.HTTPError as err:
        status, raw = err.code, err.read().decode()
    try:
        return status, json.loads(raw)
    except json.JSONDecodeError:
        return status, raw


def engine_value(base_url: str, name: str) -> float:
    """The sum of one metric's series on a running engine's /metrics (all label sets)."""
    _, text = http_json("GET", f"{base_url}/metrics")
    assert isinstance(text, str)
    return sum(float(v) for v in re.findall(rf"^{re.escape(name)}\{{[^}}]*\}} ([0-9.e+]+)$", text, re.M))
