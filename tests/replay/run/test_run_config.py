"""Run configs: the sandbox's loopback rule, arm validation, decoding overrides."""

from __future__ import annotations

import pytest

from replay.run.run_config import RunConfigError, load_run_config

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

    shipped = sorted((Path(__file__).resolve().parents[3] / "configs" / "runs").glob("*.toml"))
    assert shipped
    for path in shipped:
        assert load_run_config(path).arms


def test_field_docstrings_reach_the_json_schema():
    from replay.run.run_config import RunConfig

    arm = RunConfig.model_json_schema()["$defs"]["Arm"]["properties"]
    assert "workspace-minus:<id>" in arm["memory"]["description"]


def test_arm_workspaces_are_names(tmp_path):
    body = ('[endpoint]\nbase_url = "http://127.0.0.1:1/v1"\n[[arms]]\nname = "a"\nmodel = "m"\n'
            'workspaces = ["../other-tenant"]\n')
    with pytest.raises(RunConfigError, match="arms.0.workspaces.0"):
        load_run_config(write(tmp_path, body))


REPLICATED = ('[endpoint]\nbase_url = "http://127.0.0.1:1/v1"\n[[arms]]\nname = "base"\nmodel = "m"\n'
              'memory = "workspace"\nworkspaces = ["ws-a"]\n[arms.decoding]\nseed = 7\n')


def test_a_replicate_takes_model_memory_decoding_and_workspaces_from_its_arm(tmp_path):
    config = load_run_config(write(tmp_path, REPLICATED + '[[arms]]\nname = "base-aa"\nreplicate_of = "base"\n'))
    base, twin = config.arms
    assert (twin.model, twin.memory, twin.workspaces, twin.replicate_of) == ("m", "workspace", ["ws-a"], "base")
    assert config.decoding_for(twin) == config.decoding_for(base)
    assert base.replicate_of is None


@pytest.mark.parametrize(("arm", "named"), [
    ('name = "aa"\nreplicate_of = "bsae"\n', r"run.toml:12: arms.1.replicate_of: 'bsae' is no arm of this run"),
    ('name = "aa"\nreplicate_of = "aa"\n', "cannot replicate itself"),
    ('name = "aa"\nreplicate_of = "base"\nmodel = "other"\n', "this one sets model"),
    ('name = "aa"\nreplicate_of = "base"\nmemory = "withheld"\n', "this one sets memory"),
])
def test_a_bad_replicate_is_refused_with_its_line(tmp_path, arm, named):
    with pytest.raises(RunConfigError, match=named):
        load_run_config(write(tmp_path, f"{REPLICATED}[[arms]]\n{arm}"))


def test_a_replicate_of_a_replicate_is_refused(tmp_path):
    text = REPLICATED + '[[arms]]\nname = "aa"\nreplicate_of = "base"\n[[arms]]\nname = "aaa"\nreplicate_of = "aa"\n'
    with pytest.raises(RunConfigError, match=r"arms\.2\.replicate_of: 'aa' is itself a replicate \(of 'base'\)"):
        load_run_config(write(tmp_path, text))


def test_the_example_runs_from_a_clone():
    """configs/runs/example.toml loads with the real loader, its memory root is in the repository (the demo's
    workspaces, so it runs on the demo suite), and it has the four arms and the client key's variable."""
    from pathlib import Path

    from demo.memory import memory_files
    from replay.memory.contract import check_memory, has_violations
    from replay.memory.files import workspace_dirs

    repo = Path(__file__).resolve().parents[3]
    config = load_run_config(repo / "configs" / "runs" / "example.toml")
    root = config.memory.root
    assert root is not None and root.is_dir() and root.is_relative_to(repo) and not root.is_relative_to(repo / "runs")
    arms = {arm.name: (arm.model, arm.memory) for arm in config.arms}
    assert arms["base"] == ("worker", "withheld") and arms["base+memory"] == ("worker", "workspace")
    assert arms["candidate"][1] == "withheld" and arms["candidate+memory"] == (arms["candidate"][0], "workspace")
    assert config.endpoint.api_key_env
    workspaces = workspace_dirs(root)
    assert sorted(workspaces) == ["ws-files", "ws-invoicing", "ws-sales", "ws-support"]
    for workspace, path in workspaces.items():
        assert not has_violations(check_memory(path)), workspace
        shipped = {str(f.relative_to(path)): f.read_text(encoding="utf-8") for f in path.rglob("*") if f.is_file()}
        assert shipped == memory_files(workspace), f"{path} is not demo/memory.py's {workspace}: write it again"


OWN = '[[arms]]\nname = "quantised"\nmodel = "worker-base"\nbase_url = "{url}"\n'


def test_an_arm_on_its_own_endpoint_keeps_the_sandbox_rule_and_is_asked_once(tmp_path):
    """A quantised build is served by an engine of its own: its arm names that endpoint."""
    head = '[endpoint]\nbase_url = "http://127.0.0.1:8000/v1"\n'
    config = load_run_config(write(tmp_path, head + ARMS + OWN.format(url="http://127.0.0.1:8001/v1")
                                   + '[[arms]]\nname = "quantised-aa"\nreplicate_of = "quantised"\n'))
    base, quantised, twin = config.arms
    assert [config.base_url_of(arm) for arm in config.arms] == [
        "http://127.0.0.1:8000/v1", "http://127.0.0.1:8001/v1", "http://127.0.0.1:8001/v1"]  # a replicate's too
    assert config.endpoints() == ["http://127.0.0.1:8000/v1", "http://127.0.0.1:8001/v1"]
    with pytest.raises(RunConfigError, match=r"arms\.1\.base_url \(arm 'quantised'\): base_url host '10\.0\.0\.5' is not loopback"):
        load_run_config(write(tmp_path, head + ARMS + OWN.format(url="http://10.0.0.5:8000/v1")))
    allowed = head + 'allow_hosts = ["gpu-2"]\n' + ARMS + OWN.format(url="http://gpu-2:8000/v1")
    assert load_run_config(write(tmp_path, allowed)).endpoints()[1] == "http://gpu-2:8000/v1"


def test_each_arm_is_checked_against_what_its_own_endpoint_serves(tmp_path):
    from replay.run.directory import RunError
    from replay.run.endpoint import check_served

    config = load_run_config(write(tmp_path, '[endpoint]\nbase_url = "http://127.0.0.1:8000/v1"\n' + ARMS
                                   + OWN.format(url="http://127.0.0.1:8001/v1")))
    check_served(config, {"http://127.0.0.1:8000/v1": ["worker-base"], "http://127.0.0.1:8001/v1": ["worker-base"]})
    with pytest.raises(RunError, match=r"the endpoint http://127.0.0.1:8001/v1 does not serve worker-base"):
        check_served(config, {"http://127.0.0.1:8000/v1": ["worker-base"], "http://127.0.0.1:8001/v1": ["other"]})
