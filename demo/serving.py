"""The services every demo command starts: the real engine and the real gateway in front of it, the demo adapters
registered on it, and the demo's output directory and progress line. `worker-demo run`, `loop`, `agent`,
`deferred` and the GPU check start their services here, so each command's own module holds only its flow."""

from __future__ import annotations

import hashlib
import json
import os
import secrets
import sys
import urllib.error
import urllib.request
from collections.abc import Iterator, Mapping
from contextlib import ExitStack, contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from core.errors import WorkerTierError
from core.jsonfile import loads_bounded
from core.process import ServiceProcess, free_port
from serve.engine.launcher import EngineProcess, load_engine_config
from serve.engine.modelbuild import MODEL_NAME, cache_dir

REPO = Path(__file__).resolve().parent.parent
ENGINE_CONFIG = REPO / "configs" / "engine" / "cpu-smollm2.toml"


def fresh_out(out: Path, what: str) -> None:
    """Refuse an output that is not a new or empty directory: a demo starts from a fresh one."""
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise WorkerTierError(f"{out} is not an empty directory: {what} starts from a fresh one")


def say(message: str) -> None:
    print(f"[demo {datetime.now(UTC):%H:%M:%S}] {message}", file=sys.stderr, flush=True)


def adapter_version(name: str, path: Path) -> str:
    """Version names are never reused (DESIGN §2): the name carries a hash of the weights."""
    digest = hashlib.sha256((path / "adapter_model.safetensors").read_bytes()).hexdigest()[:8]
    return f"demo-{name}-{digest}"


def gateway_config(path: Path, port: int, engine_url: str, adapter_root: Path, extra: str = "",
                   gateway_keys: str = "") -> Path:
    """The gateway's TOML at `path` (returned absolute), its paths absolute: the gateway reads a relative path
    beside the file, so `runs/loop/gateway/state.sqlite` would be `runs/loop/gateway/runs/loop/gateway/…`. Paths in
    `extra` are the caller's to make absolute."""
    path, adapter_root = path.absolute(), adapter_root.absolute()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(
        f'[gateway]\nport = {port}\nstate_db = "{path.parent / "state.sqlite"}"\n{gateway_keys}'
        f'[base]\nserved_model_name = "worker-base"\nmodel = "{MODEL_NAME}"\n'
        f'[adapters]\nroot = "{adapter_root}"\n'
        f'[[upstreams]]\nname = "engine-0"\nurl = "{engine_url}"\n'
        f'[admin]\ntoken_env = "WORKER_GATEWAY_ADMIN_TOKEN"\n{extra}')
    return path


def admin(base_url: str, token: str, method: str, path: str, body: dict[str, Any] | None = None) -> tuple[int, Any]:
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(f"{base_url}{path}", data=data, method=method,
                                     headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=300) as resp:
            return resp.status, loads_bounded(resp.read() or b"null", f"{base_url}{path}")
    except urllib.error.HTTPError as err:
        return err.code, loads_bounded(err.read() or b"null", f"{base_url}{path}")


def register_adapters(gateway_url: str, token: str, adapters: dict[str, Path]) -> dict[str, str]:
    """Register and load each adapter version unless the gateway already has it loaded (a resumed demo)."""
    versions = {name: adapter_version(name, path) for name, path in adapters.items()}
    _, known = admin(gateway_url, token, "GET", "/admin/adapters")
    state = {a["name"]: a["state"] for a in known.get("adapters", [])}
    for name, version in versions.items():
        if version not in state:
            status, body = admin(gateway_url, token, "POST", "/admin/adapters",
                                 {"name": version, "path": str(adapters[name].absolute())})
            if status != 201:
                raise WorkerTierError(f"registering {version} failed: HTTP {status} {body}")
        if state.get(version) != "loaded":
            status, body = admin(gateway_url, token, "POST", f"/admin/adapters/{version}/load")
            if status != 200:
                raise WorkerTierError(f"loading {version} failed: HTTP {status} {body}")
    return versions


@contextmanager
def serving(out: Path, adapters: dict[str, Path], gateway_extra: str = "", gateway_keys: str = "", *,
            engine_url: str | None = None, adapter_root: Path | None = None,
            token: str | None = None) -> Iterator[tuple[str, dict[str, str]]]:
    """The real engine and the real gateway in front of it (`gateway_extra`: more gateway TOML, e.g.
    a `[capture]` table; `gateway_keys`: lines of its `[gateway]` table); yields the gateway URL and
    adapter versions. One line when both are healthy; a service that does not start is an error naming its log.
    `engine_url`: an engine already running (none is started); `adapter_root`: where the gateway takes adapters
    from (default: the cache's); `token`: the admin token (default: a fresh one), to register adapters later."""
    logs = out / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    token = token or secrets.token_hex(16)
    with ExitStack() as stack:
        engine_s = 0.0
        if engine_url is None:
            engine = EngineProcess(load_engine_config(ENGINE_CONFIG, port=free_port()), log_path=logs / "engine.log")
            [engine_s] = stack.enter_context(started({"engine": engine}))
            engine_url = engine.base_url
        port = free_port()
        config = gateway_config(out / "gateway" / "gateway.toml", port, engine_url,
                                adapter_root or cache_dir() / "adapters", gateway_extra, gateway_keys)
        gateway = ServiceProcess("gateway", [sys.executable, "-m", "serve", "gateway", "--config", str(config)],
                                 {**os.environ, "WORKER_GATEWAY_ADMIN_TOKEN": token}, f"http://127.0.0.1:{port}",
                                 120.0, logs / "gateway.log")
        [gateway_s] = stack.enter_context(started({"gateway": gateway}))
        engine_line = f"engine healthy after {engine_s:.0f} s" if engine_s else f"engine at {engine_url}"
        say(f"{engine_line}, gateway at {gateway.base_url} after {gateway_s:.0f} s (logs: {logs})")
        yield gateway.base_url, register_adapters(gateway.base_url, token, adapters)


@contextmanager
def started(services: Mapping[str, ServiceProcess]) -> Iterator[list[float]]:
    """Each service (by what the error calls it) started, all before any is waited for, so their start-ups overlap;
    then each healthy, in order, with its seconds to healthy; every one stopped on the way out."""
    with ExitStack() as stack:
        for service in services.values():
            service.start()
            stack.callback(service.stop)
        took = []
        for what, service in services.items():
            try:
                took.append(service.wait_healthy())
            except (RuntimeError, TimeoutError) as exc:
                raise WorkerTierError(f"the {what} did not start: {exc} (log: {service.log_path})") from exc
        yield took
