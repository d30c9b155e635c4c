"""Gateway config: the shipped file loads, bad keys are named with their line, paths resolve."""

from __future__ import annotations

from pathlib import Path
from typing import cast

import pytest

from serve.cli import main
from serve.engine.launcher import ConfigError
from serve.gateway.config import GatewayConfig, load_gateway_config
from serve.gateway.fairshare import ShareLimits
from tests.support.cli import run_cli

SHIPPED = Path(__file__).resolve().parents[3] / "configs" / "gateway.toml"
MINIMAL = """[gateway]
state_db = "state/gw.sqlite"
[base]
model = "SmolLM2-135M-Instruct"
[adapters]
root = "adapters"
[[upstreams]]
name = "engine-0"
url = "http://127.0.0.1:8000"
"""


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "gateway.toml"
    path.write_text(text)
    return path


def test_shipped_config_fronts_the_cpu_engine(monkeypatch, tmp_path):
    monkeypatch.setenv("WORKER_TIER_CACHE", str(tmp_path))
    config = load_gateway_config(SHIPPED)
    assert config.base.served_model_name == "worker-base"
    assert config.gateway.routes == ["worker"] and config.gateway.default_route == "worker"
    assert [u.url for u in config.upstreams] == ["http://127.0.0.1:8000"]
    assert config.adapters.max_rank == 16
    assert config.gateway.state_db == tmp_path / "gateway" / "state.sqlite"
    assert config.adapters.root == tmp_path / "adapters"


def test_relative_paths_are_read_beside_the_config_and_port_can_be_overridden(tmp_path):
    config = load_gateway_config(write(tmp_path, MINIMAL), port=9123)
    assert config.gateway.state_db == tmp_path / "state" / "gw.sqlite"
    assert config.adapters.root == tmp_path / "adapters"
    assert config.gateway.port == 9123


@pytest.mark.parametrize(("text", "named", "line"), [
    (MINIMAL.replace("[base]\n", "[base]\nmodle = 1\n"), "base.modle", 4),
    (MINIMAL + "[shadow]\nqueue_size = 0\n", "shadow.queue_size", 11),
    (MINIMAL.replace('url = "http://127.0.0.1:8000"', 'url = "127.0.0.1:8000"'), "upstreams.0.url", 9),
    (MINIMAL + "[gatway]\nport = 1\n", "gatway", 10),
])
def test_bad_keys_and_values_are_named_with_their_line(tmp_path, text, named, line):
    path = write(tmp_path, text)
    with pytest.raises(ConfigError) as err:
        load_gateway_config(path)
    assert f"{path}:{line}: {named}:" in str(err.value)


@pytest.mark.parametrize(("extra", "message"), [
    ('default_route = "other"\n', "default_route"),
    ('routes = ["worker", "worker"]\n', "listed twice"),
    ('routes = ["worker", "worker-base"]\n', "base model"),
])
def test_inconsistent_names_are_rejected(tmp_path, extra, message):
    with pytest.raises(ConfigError, match=message):
        load_gateway_config(write(tmp_path, MINIMAL.replace("[gateway]\n", "[gateway]\n" + extra)))


def test_admin_token_prefers_the_environment(tmp_path, monkeypatch):
    config = load_gateway_config(write(tmp_path, MINIMAL + '[admin]\ntoken = "from-file"\ntoken_env = "GW_T"\n'))
    monkeypatch.delenv("GW_T", raising=False)
    assert config.admin.resolved_token() == "from-file"
    monkeypatch.setenv("GW_T", "from-env")
    assert config.admin.resolved_token() == "from-env"


def test_cli_reports_a_bad_gateway_config_without_a_traceback(tmp_path, capsys):
    path = write(tmp_path, MINIMAL + "[metrics]\nnvm = false\n")
    assert main(["gateway", "--config", str(path)]) == 2
    err = capsys.readouterr().err
    assert "metrics.nvm" in err and "Traceback" not in err


def test_field_docstrings_reach_the_json_schema():
    from serve.gateway.config import GatewayConfig

    schema = GatewayConfig.model_json_schema()
    gateway = schema["$defs"]["GatewaySection"]["properties"]
    assert gateway["default_route"]["description"] == "The route of a request that names no `model`."
    assert "413" in gateway["max_body_bytes"]["description"]
@pytest.mark.parametrize("names", ['[""]', '["ws-a", ""]', '["  "]', '[" ws-a"]'])
def test_capture_allowlist_refuses_empty_or_padded_workspace_names(tmp_path, names):
    """Issue 14 item 13: `""` would allowlist every request that carries no workspace header."""
    text = MINIMAL + f'[capture]\nmode = "full"\nworkspaces = {names}\n'
    with pytest.raises(ConfigError, match="capture.workspaces"):
        load_gateway_config(write(tmp_path, text))


@pytest.mark.parametrize(("extra", "blocker"), [
    ("", "state/gw.sqlite"),  # a directory where the state store should be
    ('[capture]\nmode = "descriptor"\ndb = "cap/capture.sqlite"\n', "cap/capture.sqlite"),
    ('[capture]\nmode = "descriptor"\ndb = "plain/capture.sqlite"\n', "plain"),  # a file where its directory should be
])
def test_an_unusable_store_at_start_up_is_one_line_naming_the_file(tmp_path, capsys, extra, blocker):
    """Issue 14 item 11."""
    path = write(tmp_path, MINIMAL + extra)
    if blocker == "plain":
        (tmp_path / "plain").write_text("not a directory")
    else:
        (tmp_path / blocker).mkdir(parents=True)
    assert main(["gateway", "--config", str(path)]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1
    assert str(tmp_path / blocker.split("/")[0]) in err


@pytest.mark.parametrize("line", ["retention_days = nan", "retention_days = inf", "retention_days = -1",
                                  "retention_days = 0", "retention_days = 4000", "max_rows = 0", "max_rows = -5",
                                  "retention_interval_s = 0", "retention_interval_s = inf"])
def test_capture_bounds_must_be_finite_positive_and_sane(tmp_path, line):
    with pytest.raises(ConfigError, match=line.split(" ")[0]):
        load_gateway_config(write(tmp_path, MINIMAL + f"[capture]\n{line}\n"))


def test_capture_is_bounded_by_default(tmp_path):
    capture = load_gateway_config(write(tmp_path, MINIMAL)).capture
    assert (capture.retention_days, capture.max_rows) == (30.0, 1_000_000)


def test_auth_and_fair_share_sections_resolve_and_refuse_typos(tmp_path):
    config = load_gateway_config(write(tmp_path, MINIMAL + '[auth]\nkeys_file = "keys.toml"\n'
                                                 "[fair_share]\nengine_slots = 16\nmax_in_flight = 4\n"))
    assert config.auth.keys_file == tmp_path / "keys.toml"
    assert config.fair_share.limits() == ShareLimits(weight=1.0, max_in_flight=4)
    assert load_gateway_config(write(tmp_path, MINIMAL)).auth.keys_file is None
    with pytest.raises(ConfigError, match=r"gateway.toml:11: fair_share.engine_slot"):
        load_gateway_config(write(tmp_path, MINIMAL + "[fair_share]\nengine_slot = 16\n"))



KEYED = '[auth]\nkeys_file = "keys.toml"\n'


@pytest.mark.parametrize(("auth", "setting", "scope"), [
    ("", "", "shared"),                # without keys each caller names its own workspace: a salt would bind no one
    (KEYED, "", "workspace"),          # keyed tenants: each its own prefix cache
    (KEYED, '"shared"', "shared"),
    ("", '"workspace"', "workspace"),
])
def test_the_prefix_cache_scope_defaults_to_workspace_with_client_keys(tmp_path, auth, setting, scope):
    line = f"prefix_cache_scope = {setting}\n" if setting else ""
    config = load_gateway_config(write(tmp_path, MINIMAL.replace("[gateway]\n", "[gateway]\n" + line) + auth))
    assert config.prefix_cache_scope == scope


def test_an_unknown_prefix_cache_scope_is_named_with_its_line(tmp_path):
    with pytest.raises(ConfigError, match=r"gateway.toml:2: gateway.prefix_cache_scope"):
        load_gateway_config(write(tmp_path, MINIMAL.replace("[gateway]\n", '[gateway]\nprefix_cache_scope = "tenant"\n')))


def test_a_second_checkout_moves_the_engine_and_the_stores_by_flag(monkeypatch, tmp_path):
    """`worker-serve gateway --engine-url --state-db --capture-db`: another engine and stores, the file unchanged."""
    monkeypatch.setenv("WORKER_TIER_CACHE", str(tmp_path / "cache"))
    started: dict[str, object] = {}
    monkeypatch.setattr("serve.app.create_app", lambda config: config)
    monkeypatch.setattr("uvicorn.run", lambda app, **kw: started.update(config=app, **kw))
    assert main(["gateway", "--config", str(SHIPPED), "--port", "9100", "--engine-url", "http://127.0.0.1:8001",
                 "--engine-url", "http://127.0.0.1:8002", "--state-db", str(tmp_path / "gw.sqlite"),
                 "--capture-db", str(tmp_path / "capture.sqlite")]) == 0
    config = cast(GatewayConfig, started["config"])
    assert started["port"] == 9100
    assert [(u.name, u.url) for u in config.upstreams] == [
        ("engine-0", "http://127.0.0.1:8001"), ("engine-1", "http://127.0.0.1:8002")]
    assert config.gateway.state_db == tmp_path / "gw.sqlite"
    assert config.capture.db == tmp_path / "capture.sqlite"
    unchanged = load_gateway_config(SHIPPED)
    assert [u.url for u in unchanged.upstreams] == ["http://127.0.0.1:8000"]
    assert unchanged.gateway.state_db == tmp_path / "cache" / "gateway" / "state.sqlite"


def test_an_engine_url_with_a_path_is_a_usage_error(tmp_path):
    result = run_cli("serve", "gateway", "--config", str(SHIPPED), "--engine-url", "http://127.0.0.1:8001/v1",
                     cwd=tmp_path)
    assert result.returncode == 2 and "is not an engine's base URL (scheme and host only" in result.stderr


def test_evidence_reads_the_stores_the_gateway_was_started_with(tmp_path):
    result = run_cli("serve", "evidence", "--config", str(SHIPPED), "--state-db", str(tmp_path / "other.sqlite"),
                     "--out", str(tmp_path / "ev"), cwd=tmp_path)
    assert result.returncode == 2 and f"no gateway state at {tmp_path / 'other.sqlite'}" in result.stderr
