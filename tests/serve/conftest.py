# TEMPORARY (gateway dev only; removed before hand-off): reuse a running engine when GW_DEV_ENGINE_PORT is set.
import os
from pathlib import Path

import pytest

from serve.engine import EngineProcess, load_engine_config

if os.environ.get("GW_DEV_ENGINE_PORT"):
    @pytest.fixture(scope="session")
    def engine():
        config = load_engine_config(Path(__file__).resolve().parents[2] / "configs/engine/cpu-smollm2.toml",
                                    port=int(os.environ["GW_DEV_ENGINE_PORT"]))
        return EngineProcess(config)
