"""docs/guide.md run as typed, for the tests that run it (tests/test_guide.py on the recorded corpus,
tests/test_guide_corpus.py on one unlike it): its shell blocks, the gateway it starts, and the page's
unskipped blocks in order in one shell with the set-up block's environment given."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from serve.engine.launcher import EngineProcess
from tests.support.docblocks import shell_blocks
from tests.support.gateway_harness import TOKEN, RunningGateway
from tests.support.live import free_port

ROOT = Path(__file__).resolve().parents[2]
GUIDE = ROOT / "docs" / "guide.md"
CANDIDATE = "candidate-v1"
"""The name the page registers its candidate under."""


def guide_blocks() -> list[tuple[str, bool]]:
    """Each shell block of the page and whether the page marks it as skipped by the guide tests."""
    return shell_blocks(GUIDE, "<!-- guide-test: skipped")


def gateway_config(engine_url: str, port: int, cache: Path, out: Path) -> Path:
    """configs/gateway.toml with the engine's address, the port and the cache directory changed, nothing else."""
    text = (ROOT / "configs" / "gateway.toml").read_text(encoding="utf-8")
    for old, new in (('url = "http://127.0.0.1:8000"', f'url = "{engine_url}"'), ("port = 9000", f"port = {port}")):
        assert text.count(old) == 1, old
        text = text.replace(old, new)
    assert "{cache}" in text
    out.write_text(text.replace("{cache}", str(cache)), encoding="utf-8")
    return out


def unload_candidate(engine: EngineProcess) -> None:
    """The page's candidate name unloaded from the shared engine (gone already is fine): each guide test loads
    its own adapter under that name, and the engine refuses one name from a second path. Done before a test's
    run, not after, so a cleanup cannot hide the run's own result."""
    answer = httpx.post(f"{engine.base_url}/v1/unload_lora_adapter", json={"lora_name": CANDIDATE}, timeout=60)
    assert answer.status_code in (200, 404, 400), answer.text


def run_guide(engine: EngineProcess, tmp_path: Path, env: dict[str, str], monkeypatch: pytest.MonkeyPatch
              ) -> tuple[subprocess.CompletedProcess[str], list[dict[str, object]]]:
    """The page's unskipped blocks in order in one `bash -euo pipefail`, with `env` (CORPUS, MEMORY, CANDIDATE,
    CUTOFF, WORK) and the services of the skipped blocks: the gateway from configs/gateway.toml in front of the
    session's engine. Returns the shell's result and the gateway's adapters at the end."""
    monkeypatch.setenv("WORKER_GATEWAY_ADMIN_TOKEN", TOKEN)  # configs/gateway.toml reads the token from there
    cache = tmp_path / "cache"
    config = gateway_config(engine.base_url, free_port(), cache, tmp_path / "gateway.toml")
    script = "\n".join(f"echo '### guide block {n}' >&2\n{block}"
                       for n, (block, skip) in enumerate(guide_blocks(), 1) if not skip)
    unload_candidate(engine)  # another guide test's candidate, if one ran before on this engine
    with RunningGateway(config) as gateway:
        full = {**os.environ, **env, "ENGINE": engine.base_url, "WORKER_GATEWAY_URL": gateway.url,
                "WORKER_GATEWAY_ADMIN_TOKEN": TOKEN, "WORKER_TIER_CACHE": str(cache),
                "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"}
        done = subprocess.run(["bash", "-euo", "pipefail", "-c", script], cwd=ROOT, env=full, capture_output=True,
                              text=True, timeout=1200)
        assert done.returncode == 0, f"{done.stderr[-4000:]}\n--- stdout ---\n{done.stdout[-4000:]}"
        adapters: list[dict[str, object]] = gateway.ok("GET", "/state")["adapters"]
    return done, adapters
