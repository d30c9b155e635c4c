"""Every TOML file is read the same way: any bytes give a `ConfigError` naming the file, never a traceback."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from core.records import Strict
from core.tomlfile import ConfigError, load_toml, read_private, read_regular


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


def test_read_regular_reads_once_and_refuses_what_is_not_a_bounded_regular_file(tmp_path: Path) -> None:
    path = tmp_path / "a.toml"
    path.write_bytes(b"x" * 10)
    assert read_regular(path, 10) == b"x" * 10
    with pytest.raises(ConfigError, match="larger than 9 bytes"):
        read_regular(path, 9)
    fifo = tmp_path / "fifo.toml"
    os.mkfifo(fifo)
    with pytest.raises(ConfigError, match="not a regular file"):
        read_regular(fifo, 10)  # no writer: a blocking open would hang here
    with pytest.raises(ConfigError, match="not a regular file"):
        read_regular(tmp_path, 10)
    with pytest.raises(ConfigError, match="No such file"):
        read_regular(tmp_path / "absent", 10)


def test_a_fifo_is_refused_not_waited_on(tmp_path: Path) -> None:
    import os

    fifo = tmp_path / "config.toml"
    os.mkfifo(fifo)
    with pytest.raises(ConfigError, match="not a regular file"):
        load_toml(fifo, Small, "config")


def test_a_path_no_file_can_have_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="not a file path"):
        load_toml(tmp_path / "a\0b.toml", Small, "config")


@pytest.mark.parametrize(("text", "reason"), [
    ("name = " + "[" * 5000 + "]" * 5000, "nest too deeply to read"),
    ("name = " + "[" * 101 + "]" * 101, "nested deeper than 100 levels"),
    ("name = " + "{a = " * 3000 + "1" + "}" * 3000, "nest too deeply to read"),
    ("count = 1" + "0" * 5000, "invalid TOML: Exceeds the limit"),
])
def test_deep_or_huge_values_are_a_config_error_not_a_traceback(tmp_path: Path, text: str, reason: str) -> None:
    path = tmp_path / "deep.toml"
    path.write_text(text)
    with pytest.raises(ConfigError, match=r"deep\.toml: ") as error:
        load_toml(path, Small, "config")
    assert reason in str(error.value)


def test_a_private_file_others_may_access_is_refused_on_the_descriptor_it_is_read_from(tmp_path: Path) -> None:
    path = tmp_path / "secrets.toml"
    path.write_text('x = 1\n')
    for mode in (0o644, 0o660, 0o602, 0o610):
        path.chmod(mode)
        with pytest.raises(ConfigError, match=rf"^{path}: other users can access the test keys \(mode {mode:o}\)"):
            read_private(path, "test keys")
    path.chmod(0o600)
    assert read_private(path, "test keys") == b"x = 1\n"
    path.chmod(0o400)
    assert read_private(path, "test keys") == b"x = 1\n"
    with pytest.raises(ConfigError, match="not a regular file"):
        read_private(tmp_path, "test keys")
