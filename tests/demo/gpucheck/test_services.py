"""The GPU engine config is production's shape where production's settings apply, and the check says
so by name when it is not."""

from __future__ import annotations

import pytest

from demo.gpucheck.check_context import GPU_CONFIG, PRODUCTION_CONFIG, CheckFailedError
from demo.gpucheck.services import AS_PRODUCTION, ENV_AS_PRODUCTION, check_config, production_differences
from serve.engine.launcher import load_engine_config, server_command


def configs():
    return (load_engine_config(GPU_CONFIG, cpu_flags=frozenset()),
            load_engine_config(PRODUCTION_CONFIG, cpu_flags=frozenset()))


def test_the_gpu_config_has_productions_settings_where_they_apply():
    gpu, production = configs()
    assert production_differences(gpu, production) == []
    for key in AS_PRODUCTION:  # compared with what production sets, not with a default both leave alone
        assert getattr(production.vllm, key) is not None, key
    assert all(key in production.env for key in ENV_AS_PRODUCTION)


def test_a_setting_that_drifts_from_production_is_named():
    gpu, production = configs()
    drifted = gpu.model_copy(update={"vllm": gpu.vllm.model_copy(update={"max_loras": 2}),
                                     "env": {**gpu.env, "HF_HUB_OFFLINE": "0"}})
    assert production_differences(drifted, production) == [
        "max_loras = 2 (production: 4)", "env HF_HUB_OFFLINE = '0' (production: '1')"]


def test_the_gpu_engine_runs_bfloat16_with_prefix_caching_and_lora_on_one_gpu():
    gpu, _ = configs()
    command = server_command(gpu)
    for flag in ("--enable-prefix-caching", "--enable-lora", "--enable-auto-tool-choice"):
        assert flag in command
    assert command[command.index("--dtype") + 1] == "bfloat16"
    assert command[command.index("--tensor-parallel-size") + 1] == "1"
    assert command[command.index("--tool-call-parser") + 1] == "hermes"
    assert not [key for key, value in gpu.env.items() if key.startswith("VLLM_CPU_")], "no CPU engine settings"


def test_the_config_step_passes_on_the_shipped_files_and_fails_on_a_drifted_one(tmp_path, monkeypatch):
    done = check_config(None, 10)  # the step reads only the two files
    assert "--dtype bfloat16" in str(done.figures["command"])
    drifted = tmp_path / "engine" / GPU_CONFIG.name
    drifted.parent.mkdir()
    drifted.write_text(GPU_CONFIG.read_text().replace("max_num_seqs = 32", "max_num_seqs = 8")
                       .replace("../chat_templates/", f"{GPU_CONFIG.parent.parent}/chat_templates/"))
    monkeypatch.setattr("demo.gpucheck.services.GPU_CONFIG", drifted)
    with pytest.raises(CheckFailedError, match=r"max_num_seqs = 8 \(production: 32\)"):
        check_config(None, 10)
