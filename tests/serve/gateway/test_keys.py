"""The client keys file: its rules in words with their lines, owner-only mode, hashes only, reloads."""

from __future__ import annotations

import hashlib
import os
import re
import time
from pathlib import Path

import pytest

from core.tomlfile import ConfigError
from serve.cli import main as serve_main
from serve.gateway.fairshare import ShareLimits
from serve.gateway.keys import KEY_MAX_CHARS, KeysFile, KeysFileError, make_key, parse_keys

DEFAULTS = ShareLimits(weight=1.0, max_in_flight=8)


def entry(name: str, key: str, workspace: str | None = "ws-a", extra: str = "") -> str:
    bound = f'workspace = "{workspace}"\n' if workspace else 'workspaces = "*"\n'
    return f'[[keys]]\nname = "{name}"\n{bound}hash = "sha256:{hashlib.sha256(key.encode()).hexdigest()}"\n{extra}'


def write(path: Path, text: str, mode: int = 0o600) -> Path:
    path.write_text(text)
    path.chmod(mode)
    return path


def problems(text: str, tmp_path: Path) -> str:
    with pytest.raises(KeysFileError) as info:
        parse_keys(text.encode(), tmp_path / "keys.toml", DEFAULTS)
    return str(info.value)


def test_keys_are_found_by_their_hash_and_carry_workspace_share_and_limits(tmp_path):
    ring = parse_keys((entry("a-1", "key-one") + entry("svc", "key-two", None, "weight = 0.25\n")).encode(),
                      tmp_path / "k.toml", DEFAULTS)
    bound, service = ring.find("key-one"), ring.find("key-two")
    assert bound is not None and (bound.name, bound.workspace, bound.share) == ("a-1", "ws-a", "ws:ws-a")
    assert bound.limits == DEFAULTS
    assert service is not None and (service.workspace, service.share, service.allowed) == (None, "key:svc", None)
    assert service.limits == ShareLimits(weight=0.25, max_in_flight=8) and service.may_name("ws-anything")
    assert ring.find("key-three") is None and ring.find("") is None
    assert ring.find("k" * (1 << 20)) is None  # a 1 MiB key: unknown, and never hashed


def test_the_file_holds_only_hashes_never_a_key(tmp_path):
    key, digest = make_key()
    assert key.startswith("wt_") and len(key) == 46 and len(key) <= KEY_MAX_CHARS
    text = f'[[keys]]\nname = "a"\nworkspace = "ws-a"\nhash = "{digest}"\n'
    assert parse_keys(text.encode(), tmp_path / "k.toml", DEFAULTS).find(key) is not None
    assert key not in text
    message = problems(f'[[keys]]\nname = "a"\nworkspace = "ws-a"\nhash = "{key}"\n', tmp_path)
    assert "keys.toml:4: key entry 1 ('a'): hash must be \"sha256:\" and 64 lowercase hex digits" in message
    assert key not in message  # a key pasted where its hash belongs is not echoed back


def test_each_rule_is_named_in_words_with_the_entry_and_its_line(tmp_path):
    text = (entry("a-1", "k1") + entry("a-2", "k2") + entry("a-3", "k3")  # lines 1, 5, 9
            + entry("a-1", "k4", "ws-b")  # 13: name again
            + entry("b-2", "k1", "ws-b")  # 17: the same key as a-1
            + '[[keys]]\nname = "both"\nworkspace = "ws-c"\nworkspaces = ["ws-d"]\nhash = "sha256:' + "0" * 64 + '"\n'
            + '[[keys]]\nname = "x"\nworkspace = "../etc"\nhash = "sha256:' + "1" * 64 + '"\nweight = 0\ncolour = 1\n')
    message = problems(text, tmp_path)
    path = tmp_path / "keys.toml"
    assert f"{path}:9: workspace 'ws-a' has 3 keys (a-1, a-2, a-3); at most 2" in message
    assert f"{path}:13: key entry 4 ('a-1'): the name 'a-1' is also entry 1's" in message
    assert f"{path}:17: key entry 5 ('b-2'): the same key as 'a-1'" in message
    assert f"{path}:21: key entry 6 ('both'): give exactly one of workspace" in message
    assert f"{path}:28: key entry 7 ('x'): workspace must be a name (1–128 characters" in message
    assert f"{path}:30: key entry 7 ('x'): weight: Input should be greater than 0" in message
    assert f"{path}:31: key entry 7 ('x'): 'colour' is not a field of a key entry" in message
    assert "loc" not in message and "[type=" not in message  # no pydantic paths or error codes


def test_two_keys_of_a_workspace_share_one_set_of_limits(tmp_path):
    message = problems(entry("a-1", "k1", extra="max_in_flight = 2\n") + entry("a-2", "k2"), tmp_path)
    assert "the keys of workspace 'ws-a' (a-1, a-2) have different limits" in message
    ring = parse_keys((entry("a-1", "k1", extra="max_in_flight = 2\n")
                       + entry("a-2", "k2", extra="max_in_flight = 2\n")).encode(), tmp_path / "k.toml", DEFAULTS)
    one, two = ring.find("k1"), ring.find("k2")
    assert one is not None and two is not None and one.share == two.share and one.limits == two.limits


def test_only_keys_tables_and_a_readable_toml(tmp_path):
    assert "'auth' cannot be in a keys file" in problems('[auth]\nx = 1\n', tmp_path)
    assert "keys must be [[keys]] tables" in problems('keys = 3\n', tmp_path)
    assert "invalid TOML" in problems('[[keys]\n', tmp_path)
    assert len(parse_keys(b"", tmp_path / "k.toml", DEFAULTS)) == 0


@pytest.mark.parametrize("mode", [0o644, 0o640, 0o604, 0o620])
def test_a_keys_file_others_can_access_is_refused(tmp_path, mode):
    path = write(tmp_path / "keys.toml", entry("a-1", "k1"), mode)
    with pytest.raises(ConfigError, match=rf"other users can access the client keys file \(mode {mode:o}\).*chmod 600"):
        KeysFile(path, DEFAULTS)
    path.chmod(0o400)
    assert KeysFile(path, DEFAULTS).ring.find("k1") is not None


def test_ten_thousand_keys_load_and_each_is_found(tmp_path):
    text = "".join(entry(f"k-{i}", f"key-{i}", f"ws-{i // 2}") for i in range(10_000))
    path = write(tmp_path / "keys.toml", text)
    keys = KeysFile(path, DEFAULTS)
    assert len(keys.ring) == 10_000
    found = keys.ring.find("key-9999")
    assert found is not None and found.workspace == "ws-4999"
    assert keys.ring.find("key-10000") is None


def test_a_changed_file_is_seen_once_and_a_bad_one_keeps_nothing(tmp_path):
    path = write(tmp_path / "keys.toml", entry("a-1", "k1"))
    keys = KeysFile(path, DEFAULTS)
    assert not keys.changed()
    write(path, entry("a-1", "k1") + entry("a-2", "k2"))
    os.utime(path, ns=(time.time_ns(), time.time_ns() + 10**9))  # a new mtime even on a coarse clock
    assert keys.changed() and not keys.changed()
    assert keys.read().find("k2") is not None
    write(path, "[[keys]]\nname = 'oops'\n")
    with pytest.raises(KeysFileError, match="hash is missing"):
        keys.read()


def test_keys_make_prints_a_key_and_the_entry_that_admits_it(tmp_path, capsys):
    assert serve_main(["keys", "make", "--workspace", "ws-acme"]) == 0
    out = capsys.readouterr().out
    key = re.search(r"it is not stored anywhere\): (\S+)", out)
    assert key is not None
    entry_text = out[out.index("[[keys]]"):]
    ring = parse_keys(entry_text.encode(), tmp_path / "k.toml", DEFAULTS)
    found = ring.find(key.group(1))
    assert found is not None and found.workspace == "ws-acme" and key.group(1) not in entry_text
    assert serve_main(["keys", "make", "--workspace", "ws-a", "--workspace", "ws-b", "--service", "--name", "cp"]) == 0
    out = capsys.readouterr().out
    service = parse_keys(out[out.index("[[keys]]"):].encode(), tmp_path / "k.toml", DEFAULTS)
    (only,) = service.by_digest.values()
    assert (only.name, only.allowed) == ("cp", frozenset({"ws-a", "ws-b"}))
    assert serve_main(["keys", "make", "--workspace", "ws-a", "--workspace", "ws-b"]) == 2
    assert "bound to one --workspace" in capsys.readouterr().err
