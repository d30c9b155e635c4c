"""Run the real gateway app under a real uvicorn server on a loopback port, for tests."""

from __future__ import annotations

import asyncio
import json
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import httpx
import uvicorn
from prometheus_client.parser import text_string_to_metric_families

from serve.app import create_app
from serve.gateway.config import GatewayConfig, load_gateway_config
from tests.support.live import free_port

TOKEN = "test-admin-token"
BASE_MODEL = "SmolLM2-135M-Instruct"
T = TypeVar("T")


def write_config(directory: Path, upstreams: list[str], adapter_root: Path, extra: str = "",
                 gateway: str = "", port: int | None = None, health_interval_s: float = 0.2,
                 health_timeout_s: float = 5.0) -> Path:
    """A gateway TOML for tests: health probes every 0.2 s so recoveries are quick, each given 5 s so a
    shared 2-core machine's stalls are not read as an engine that is down (a stopped one refuses at once)."""
    directory.mkdir(parents=True, exist_ok=True)
    ups = "".join(f'[[upstreams]]\nname = "engine-{i}"\nurl = "{url}"\n' for i, url in enumerate(upstreams))
    path = directory / "gateway.toml"
    path.write_text(
        f'[gateway]\nport = {port or free_port()}\nstate_db = "state.sqlite"\nretry_after_s = 2\n{gateway}\n'
        f'[base]\nserved_model_name = "worker-base"\nmodel = "{BASE_MODEL}"\n'
        f'[adapters]\nroot = "{adapter_root}"\nmax_rank = 16\n'
        f'{ups}'
        f'[health]\ninterval_s = {health_interval_s}\ntimeout_s = {health_timeout_s}\n'
        f'[admin]\ntoken = "{TOKEN}"\ntoken_env = "WORKER_GATEWAY_TEST_TOKEN_UNSET"\n'
        f'{extra}\n')
    return path


def start_gateway(tmp_path: Path, root: Path, upstreams: list[Any], **kwargs: Any) -> RunningGateway:
    """The real gateway app in front of `upstreams` (objects with a `url`), state under tmp_path."""
    return RunningGateway(write_config(tmp_path / "gw", [u.url for u in upstreams], root, **kwargs))


def fake_adapter(root: Path, name: str, rank: int = 8, base: str = f"/models/{BASE_MODEL}") -> Path:
    """adapter_config.json + a weights file: enough for registration against the fault upstream."""
    directory = root / name
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "adapter_config.json").write_text(json.dumps(
        {"peft_type": "LORA", "r": rank, "lora_alpha": 2 * rank, "base_model_name_or_path": base,
         "target_modules": ["q_proj"]}))
    (directory / "adapter_model.safetensors").write_bytes(name.encode())
    return directory


def copy_adapter(source: Path, root: Path, name: str) -> Path:
    """A real adapter under the gateway's adapter root."""
    target = root / name
    shutil.copytree(source, target)
    return target


def wait_for(predicate: Callable[[], Any], what: str, limit_s: float = 60.0, every_s: float = 0.05) -> Any:
    """Poll until `predicate()` is truthy; fails (with `what`) after a generous bound."""
    deadline = time.monotonic() + limit_s
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(every_s)


class RunningGateway:
    def __init__(self, config_path: Path) -> None:
        self.config: GatewayConfig = load_gateway_config(config_path)
        self.app = create_app(self.config)
        self.gateway = self.app.state.gateway
        self.server = uvicorn.Server(uvicorn.Config(self.app, host="127.0.0.1", port=self.config.gateway.port,
                                                    log_level="warning", lifespan="on"))
        self.thread = threading.Thread(target=self.server.run, daemon=True)
        self.client = httpx.Client(base_url=self.url, timeout=300)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.config.gateway.port}"

    def __enter__(self) -> RunningGateway:
        self.thread.start()
        wait_for(lambda: self.server.started or not self.thread.is_alive(), "the gateway to start")
        if not self.server.started:
            raise RuntimeError("the gateway did not start")
        return self

    def on_loop(self, call: Callable[[], T]) -> T:
        """`call()` run on the gateway's event loop, its result returned here. The app's state (the registry's
        SQLite connection and buffered log rows, above all) belongs to that loop: a test thread that flushed the
        registry itself could meet the periodic flush inside its transaction."""
        async def run() -> T:
            return call()

        loop = self.server.servers[0].get_loop()
        return asyncio.run_coroutine_threadsafe(run(), loop).result(60)

    def __exit__(self, *exc: object) -> None:
        self.client.close()
        self.server.should_exit = True
        self.thread.join(30)

    def admin(self, method: str, path: str, body: dict[str, Any] | None = None, token: str | None = TOKEN,
              **params: Any) -> httpx.Response:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        return self.client.request(method, f"/admin{path}", json=body, headers=headers, params=params or None)

    def ok(self, method: str, path: str, body: dict[str, Any] | None = None, **params: Any) -> dict[str, Any]:
        response = self.admin(method, path, body, **params)
        assert response.status_code in (200, 201), response.text
        return response.json()

    def chat(self, model: str | None = "worker", headers: dict[str, str] | None = None,
             **fields: Any) -> httpx.Response:
        body = {"messages": [{"role": "user", "content": "Say hi."}], "max_tokens": 4, "temperature": 0, **fields}
        if model is not None:
            body["model"] = model
        return self.client.post("/v1/chat/completions", json=body, headers=headers or {})

    def metrics(self) -> str:
        return self.client.get("/metrics").text


class GatewayProcess:
    """`worker-serve gateway` as its own process, as systemd runs it."""

    def __init__(self, config: Path, log: Path) -> None:
        self.config = config
        self.log = log
        self.proc: subprocess.Popen[bytes] | None = None
        port = int(next(line.split("=")[1] for line in config.read_text().splitlines() if line.startswith("port")))
        self.client = httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=300,
                                   headers={"Authorization": f"Bearer {TOKEN}"})

    def start(self) -> GatewayProcess:
        with self.log.open("ab") as log:
            self.proc = subprocess.Popen([sys.executable, "-m", "serve", "gateway", "--config", str(self.config)],
                                         cwd=Path(__file__).resolve().parents[2], stdout=log, stderr=subprocess.STDOUT)
        wait_for(self._up, "the gateway process to listen", limit_s=120, every_s=0.2)
        return self

    def _up(self) -> bool:
        assert self.proc is not None
        if self.proc.poll() is not None:
            raise AssertionError(f"the gateway exited: {self.log.read_text()[-2000:]}")
        try:
            self.client.get("/health")
        except httpx.TransportError:
            return False
        return True

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()  # SIGKILL: no shutdown code runs
            self.proc.wait()

    def ok(self, method: str, path: str, body: dict | None = None, **params: str) -> dict:
        response = self.client.request(method, f"/admin{path}", json=body, params=params or None)
        assert response.status_code in (200, 201), response.text
        return response.json()

    def chat(self, headers: dict[str, str] | None = None) -> httpx.Response:
        return self.client.post("/v1/chat/completions", headers=headers or {}, json={
            "model": "worker", "messages": [{"role": "user", "content": "Hi"}], "max_tokens": 2, "temperature": 0})


def sample(gw: RunningGateway, name: str, **labels: str) -> float:
    """The value of one sample of the gateway's /metrics (0 when it has none yet)."""
    for family in text_string_to_metric_families(gw.metrics()):
        for s in family.samples:
            if s.name == name and all(s.labels.get(k) == v for k, v in labels.items()):
                return s.value
    return 0.0
