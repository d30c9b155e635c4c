"""Run configs: the sandbox's loopback rule, arm validation, decoding overrides."""

from __future__ import annotations

import pytest

from replay.config import RunConfigError, load_run_config

ARMS = '[[arms]]\nname = "base"\nmodel = "worker-base"\nmemory = "withheld"\n'


def write(tmp_path, text):
    path = tmp_path / "run.toml"
    path.write_text(text)
    return path


@pytest.mark.parametrize("url", ["http://127.0.0.1:8000/v1", "http://localhost:9/v1", "http://[::1]:8000/v1",
                                 "http://127.3.2.1:8000/v1"])
def test_loopback_endpoints_are_allowed(tmp_path, url):
    config = load_run_config(write(tmp_path, f'[endpoint]\nbase_url = "{url}"\n{ARMS}'))
    assert config.endpoint.base_url == url


def test_a_remote_endpoint_is_refused_unless_allowed(tmp_path):
    with pytest.raises(RunConfigError, match="not loopback"):
        load_run_config(write(tmp_path, f'[endpoint]\nbase_url = "http://10.0.0.5:8000/v1"\n{ARMS}'))
    allowed = f'[endpoint]\nbase_url = "http://gpu-1:8000/v1"\nallow_hosts = ["gpu-1"]\n{ARMS}'
    assert load_run_config(write(tmp_path, allowed)).endpoint.allow_hosts == ["gpu-1"]


@pytest.mark.parametrize(("body", "named"), [
    ('[endpoint]\nbase_url = "http://127.0.0.1:1/v1"\n', "arms"),
    (f'[endpoint]\nbase_url = "http://127.0.0.1:1/v1"\n{ARMS}{ARMS}', "unique"),
    ('[endpoint]\nbase_url = "http://127.0.0.1:1/v1"\n[[arms]]\nname = "a"\nmodel = "m"\nmemory = "sometimes"\n',
     "unknown memory condition"),
    (f'[endpoint]\nbase_url = "http://127.0.0.1:1/v1"\n[decoding]\ntemprature = 0\n{ARMS}', "decoding.temprature"),
    (f'[endpoint]\nbase_url = "http://127.0.0.1:1/v1"\n[runner]\norder = "random"\n{ARMS}', "runner.order"),
])
def test_bad_run_configs_name_the_problem(tmp_path, body, named):
    with pytest.raises(RunConfigError, match=named):
        load_run_config(write(tmp_path, body))


def test_arm_decoding_overrides_the_run_default(tmp_path):
    text = ('[endpoint]\nbase_url = "http://127.0.0.1:1/v1"\n[decoding]\nmax_tokens = 64\nseed = 3\n'
            '[[arms]]\nname = "a"\nmodel = "m"\n[arms.decoding]\nseed = 7\n')
    config = load_run_config(write(tmp_path, text))
    decoding = config.decoding_for(config.arms[0])
    assert (decoding.seed, decoding.max_tokens, decoding.temperature) == (7, 64, 0.0)


def test_memory_root_is_relative_to_the_config_file(tmp_path):
    text = f'[endpoint]\nbase_url = "http://127.0.0.1:1/v1"\n[memory]\nroot = "mem"\n{ARMS}'
    assert load_run_config(write(tmp_path, text)).memory.root == (tmp_path / "mem").resolve()


def test_shipped_run_configs_load():
    from pathlib import Path

    shipped = sorted((Path(__file__).resolve().parents[2] / "configs" / "runs").glob("*.toml"))
    assert shipped
    for path in shipped:
        assert load_run_config(path).arms


def test_field_docstrings_reach_the_json_schema():
    from replay.config import RunConfig

    arm = RunConfig.model_json_schema()["$defs"]["Arm"]["properties"]
    assert "workspace-minus:<id>" in arm["memory"]["description"]


def test_arm_workspaces_are_names(tmp_path):
    body = ('[endpoint]\nbase_url = "http://127.0.0.1:1/v1"\n[[arms]]\nname = "a"\nmodel = "m"\n'
            'workspaces = ["../other-tenant"]\n')
    with pytest.raises(RunConfigError, match="arms.0.workspaces.0"):
        load_run_config(write(tmp_path, body))
