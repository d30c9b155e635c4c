"""Every path the demos hand a child process is absolute when `--out` is relative (`worker-demo loop` as the README
types it: `runs/loop`). A child reads a relative path from its own directory (Claude Code runs in its home) or beside
its config file (the gateway), not from where the demo started: the loop's session files went to
`runs/loop/home/runs/loop/corpus` and the gateway's state to `runs/loop/gateway/runs/loop/gateway`. Nothing here
starts a child: each place that hands one a path is called with a relative one and what it hands on is read back."""

from __future__ import annotations

import asyncio
import tomllib
from collections.abc import AsyncIterator, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from core.process import ServiceProcess
from demo.agent import WORKSPACE, agent_session, run_agent
from demo.deferred import run_deferred
from demo.serving import register_adapters, serving
from serve.engine.launcher import load_engine_config, server_command
from serve.engine.modelbuild import cache_dir
from serve.gateway.config import load_gateway_config

OUT = Path("runs/loop")
CPU_ENGINE = Path(__file__).resolve().parents[2] / "configs" / "engine" / "cpu-smollm2.toml"


class Stop(Exception):
    """Raised where a demo would start its children, once what it hands them is recorded."""


@pytest.fixture
def cwd(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The repository root stand-in the demo is started from, holding nothing yet."""
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_the_gateway_reads_its_state_and_adapters_where_the_demo_meant(cwd: Path,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    launched: list[ServiceProcess] = []

    @contextmanager
    def started(services: Mapping[str, ServiceProcess]) -> Iterator[list[float]]:
        launched.extend(services.values())
        yield [0.0] * len(services)

    monkeypatch.setattr("demo.serving.started", started)
    monkeypatch.setattr("demo.serving.register_adapters", lambda *_: {})
    with serving(OUT, {}, engine_url="http://127.0.0.1:9", adapter_root=OUT / "adapters"):
        pass
    [gateway] = launched
    config_path = Path(gateway.command[gateway.command.index("--config") + 1])
    assert config_path == cwd / OUT / "gateway" / "gateway.toml"
    written = tomllib.loads(config_path.read_text())
    assert Path(written["gateway"]["state_db"]).is_absolute() and Path(written["adapters"]["root"]).is_absolute()
    config = load_gateway_config(config_path)
    assert (config.gateway.state_db, config.adapters.root) == (cwd / OUT / "gateway" / "state.sqlite",
                                                               cwd / OUT / "adapters")


def test_claude_code_runs_in_an_absolute_home_and_writes_to_an_absolute_corpus(cwd: Path,
                                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[Any] = []

    async def query(*, prompt: str, options: Any) -> AsyncIterator[Any]:
        seen.append(options)
        return
        yield  # an async generator that yields nothing: the session ran no turn

    monkeypatch.setattr("claude_agent_sdk.query", query)
    asyncio.run(agent_session("http://127.0.0.1:9", OUT / "home", OUT / "corpus"))
    [options] = seen
    assert (options.cwd, options.env["HOME"], options.env["CLAUDE_CONFIG_DIR"]) == (
        str(cwd / OUT / "home"), str(cwd / OUT / "home"), str(cwd / OUT / "corpus" / WORKSPACE))


@pytest.mark.parametrize("demo", ["agent", "deferred"])
def test_the_capture_store_each_demo_names_to_the_gateway_is_absolute(cwd: Path, monkeypatch: pytest.MonkeyPatch,
                                                                      demo: str) -> None:
    extras: list[str] = []

    def serving(_out: Path, _adapters: object, gateway_extra: str = "", *_: object, **__: object) -> None:
        extras.append(gateway_extra)
        raise Stop

    monkeypatch.setattr("demo.serving.serving", serving)
    monkeypatch.setattr("demo.deferred.build_demo_adapters", lambda *_: {"recovery": cwd / "recovery"})
    monkeypatch.setattr("demo.deferred.cached_demo_dir", lambda _: cwd)
    with pytest.raises(Stop):
        (run_agent if demo == "agent" else run_deferred)(OUT)
    [extra] = extras
    assert tomllib.loads(extra)["capture"]["db"] == str(cwd / OUT / "gateway" / "capture.sqlite")


def test_an_adapter_is_registered_at_the_gateway_by_its_absolute_path(cwd: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    bodies: list[Any] = []

    def admin(_url: str, _token: str, method: str, path: str, body: Any = None) -> tuple[int, Any]:
        bodies.append(body)
        return {"GET": (200, {"adapters": []}), "POST": (201 if path == "/admin/adapters" else 200, {})}[method]

    monkeypatch.setattr("demo.serving.admin", admin)
    adapter = OUT / "adapters" / "loop-cand"
    adapter.mkdir(parents=True)
    (adapter / "adapter_model.safetensors").write_bytes(b"weights")
    register_adapters("http://127.0.0.1:9", "token", {"cand": adapter})
    assert [body["path"] for body in bodies if body and "path" in body] == [str(cwd / adapter)]


def test_an_engine_on_a_relative_checkpoint_is_started_on_its_absolute_path(cwd: Path) -> None:
    command = server_command(load_engine_config(CPU_ENGINE).on_model(OUT / "quantised"))
    assert command[command.index("--model") + 1] == str(cwd / OUT / "quantised")


def test_a_relative_cache_is_taken_from_where_the_command_started(cwd: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("WORKER_TIER_CACHE", "cache")
    assert cache_dir() == cwd / "cache"
