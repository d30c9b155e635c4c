"""Every TOML file is read the same way: any bytes give a `ConfigError` naming the file, never a traceback."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from core.records import Strict
from core.tomlfile import ConfigError, load_toml


class Small(Strict):
    name: str = "x"
    count: int = 0


def test_a_file_that_is_not_utf8_is_a_config_error(tmp_path: Path) -> None:
    path = tmp_path / "policy.toml"
    path.write_bytes(b'name = "caf\xe9"\n')
    with pytest.raises(ConfigError, match=r"policy\.toml: not UTF-8 text \(byte 11\)"):
        load_toml(path, Small, "policy")


@settings(max_examples=200, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.binary(max_size=200))
def test_any_bytes_give_a_model_or_a_config_error(tmp_path: Path, data: bytes) -> None:
    path = tmp_path / "any.toml"
    path.write_bytes(data)
    try:
        load_toml(path, Small, "config")
    except ConfigError as exc:
        assert str(exc).startswith(str(path))
