"""Session fixtures: ONE real vLLM engine (CPU build, SmolLM2-135M) shared by every test that needs it."""

from __future__ import annotations

import hashlib
import signal
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import settings

from core.process import raise_terminated
from serve.engine.launcher import EngineConfig, EngineProcess, load_engine_config
from serve.engine.modelbuild import default_model_dir
from tests.support.live import free_port, http_json, running_engine

# Hypothesis' per-example deadline times the machine, not the code: on a loaded 2-core runner a 200 ms
# deadline fails tests whose properties hold. Example counts stay each test's own.
settings.register_profile("worker-tier", deadline=None)
settings.load_profile("worker-tier")
# `make mutate` (pytest --hypothesis-profile=mutate): the same examples for every mutant, no shared database.
settings.register_profile("mutate", deadline=None, derandomize=True, database=None)

REPO = Path(__file__).resolve().parent.parent
CPU_CONFIG = REPO / "configs" / "engine" / "cpu-smollm2.toml"


def pytest_configure(config: pytest.Config) -> None:
    """SIGTERM (a CI job's timeout) unwinds the session like Ctrl-C: fixtures tear down, so the engine
    and every gateway or upstream a test started are stopped instead of outliving the run."""
    signal.signal(signal.SIGTERM, raise_terminated)


@pytest.fixture(scope="session")
def ledgers(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("ledgers")


@pytest.fixture(autouse=True)
def own_ledger(ledgers: Path, request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Path:
    """`run`, `compare`, `report`, `gate` and the demo write the provenance ledger, by default runs/ledger.sqlite
    in the working directory (the checkout, for the guide's test): each test's goes outside it, its own, and so
    do the commands' its subprocesses run."""
    path = ledgers / f"{hashlib.sha256(request.node.nodeid.encode()).hexdigest()[:16]}.sqlite"
    monkeypatch.setenv("WORKER_REPLAY_LEDGER", str(path))
    return path


@pytest.fixture(scope="session")
def engine_config() -> EngineConfig:
    return load_engine_config(CPU_CONFIG, port=free_port())


@pytest.fixture(scope="session")
def engine(engine_config: EngineConfig, tmp_path_factory: pytest.TempPathFactory) -> EngineProcess:
    """The real engine, started once; a failed start shows the end of vLLM's own log."""
    if not (Path(engine_config.vllm.model) / "config.json").is_file():
        pytest.fail("the embedded model is not built: run `make test` (it runs scripts/setup.sh first)")
    with running_engine(engine_config, tmp_path_factory.mktemp("engine") / "vllm.log") as proc:
        yield proc


@pytest.fixture(scope="session")
def seeded_adapters(tmp_path_factory: pytest.TempPathFactory) -> dict[int, Path]:
    """Real PEFT LoRA adapters with seeds 1 and 2 (random weights, fixed seed)."""
    from serve.engine.adapters import make_random_adapter

    root = tmp_path_factory.mktemp("adapters")
    return {seed: make_random_adapter(default_model_dir(), root / f"seed-{seed}", seed=seed) for seed in (1, 2)}



@pytest.fixture(scope="session")
def engine_adapter(engine: EngineProcess, seeded_adapters: dict[int, Path]) -> Callable[[int], str]:
    """Load seeded adapter `seed` into the shared engine as `seed<N>-v1`, once per session: vLLM
    refuses a second load of a name, and tests sharing the engine run in any order."""
    loaded: set[int] = set()

    def load(seed: int) -> str:
        name = f"seed{seed}-v1"
        if seed not in loaded:
            status, body = http_json("POST", f"{engine.base_url}/v1/load_lora_adapter",
                                     {"lora_name": name, "lora_path": str(seeded_adapters[seed])})
            assert status == 200, body
            loaded.add(seed)
        return name

    return load
