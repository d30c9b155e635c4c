"""I/O faults under the three console scripts, each run as a user would (its own process): a full disk under an
output file or under stdout is one `error:` line and exit 2 with nothing half-written left; stdout closed by its
reader (`… | head`) is quiet, exit 141, as Unix tools do. The rule itself: tests/core/test_console.py."""

from __future__ import annotations

import errno
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import IO

import pytest

from tests.support.cli import assert_one_error_line
from tests.support.curation import copy_workspace, keys_file, policy_file
from tests.support.e13 import ARMS, BASE, Q_ONLY, e13_results
from tests.support.runs import write_sealed

ROOT = Path(__file__).resolve().parents[1]
CURATION_POLICY = ROOT / "configs" / "curation" / "s1.1.toml"
QA_CONFIG = ROOT / "configs" / "qa" / "checks.toml"
FULL_DISK = "No space left on device"


def run(package: str, *args: str, cwd: Path, stdout: int | IO[str] | None = subprocess.PIPE
        ) -> subprocess.CompletedProcess[str]:
    """`python -m PACKAGE ARGS…` with this checkout's code, stdout block-buffered as in a shell."""
    env = {key: value for key, value in os.environ.items() if key != "PYTHONUNBUFFERED"}
    return subprocess.run([sys.executable, "-m", package, *args], cwd=cwd, stdout=stdout, stderr=subprocess.PIPE,
                          text=True, timeout=120, check=False, env={**env, "PYTHONPATH": str(ROOT)})


@pytest.fixture
def inputs(tmp_path: Path) -> Path:
    """A replay run directory (`run`), a Claude Code corpus (`corpus`), its keys (`keys.toml`) and a curation
    policy it meets (`policy.toml`)."""
    write_sealed(tmp_path / "run", e13_results(ARMS))
    copy_workspace(tmp_path / "corpus", "ws-w")
    keys_file(tmp_path, ["ws-w"])
    policy_file(tmp_path, 'size = 2\nshortfall = "shrink"\nclean_from = ["verified_action"]\n[shares]\nclean = 100\n')
    return tmp_path


@pytest.fixture
def full_disk(tmp_path: Path) -> Iterator[Path]:
    """A 16 KiB tmpfs filled to the last byte: creating a file or a directory there works, writing to one fails."""
    mount = tmp_path / "full"
    mount.mkdir()
    try:
        subprocess.run(["mount", "-t", "tmpfs", "-o", "size=16k", "tmpfs", str(mount)], check=True,
                       capture_output=True)
    except (OSError, subprocess.CalledProcessError) as exc:
        pytest.skip(f"a full disk here is a small tmpfs, which needs root to mount ({exc})")
    try:
        with pytest.raises(OSError) as filled, (mount / "filler").open("wb") as filler:
            while True:
                filler.write(b"\0" * 4096)
                filler.flush()
        assert filled.value.errno == errno.ENOSPC
        yield mount
    finally:
        subprocess.run(["umount", str(mount)], check=True)


STDOUT_COMMANDS = {
    "worker-replay compare": ("replay", "compare", "run", "--baseline", BASE, "--candidate", Q_ONLY,
                              "--ledger", "ledger.sqlite"),
    "worker-replay curate pool --json": ("replay", "curate", "pool", "corpus", "--json", "--policy",
                                         str(CURATION_POLICY)),
    "worker-replay qa check --json": ("replay", "qa", "check", "corpus", "--json", "--config", str(QA_CONFIG)),
    "worker-serve keys make": ("serve", "keys", "make", "--workspace", "ws-w"),
    "worker-demo pack": ("demo", "pack", "--out", "pack", "--per-family", "1"),
}


@pytest.mark.parametrize("command", STDOUT_COMMANDS)
def test_stdout_closed_by_its_reader_ends_the_command_quietly_with_141(inputs: Path, command: str) -> None:
    read, write = os.pipe()
    os.close(read)  # `… | head`, head already gone
    try:
        result = run(*STDOUT_COMMANDS[command], cwd=inputs, stdout=write)
    finally:
        os.close(write)
    assert (result.returncode, result.stderr) == (141, "")


@pytest.mark.parametrize("command", STDOUT_COMMANDS)
def test_stdout_on_a_full_device_is_one_error_line(inputs: Path, command: str) -> None:
    with open("/dev/full", "w") as full:
        assert_one_error_line(run(*STDOUT_COMMANDS[command], cwd=inputs, stdout=full), FULL_DISK)


@pytest.mark.parametrize("command", ["worker-replay qa check --json", "worker-replay curate pool --json"])
def test_stdout_redirected_to_a_full_disk_is_one_error_line(inputs: Path, full_disk: Path, command: str) -> None:
    with (full_disk / "out.json").open("w") as out:
        assert_one_error_line(run(*STDOUT_COMMANDS[command], cwd=inputs, stdout=out), FULL_DISK)


@pytest.mark.parametrize(("args", "named"), [
    (("replay", "curate", "build", "corpus", "--keys", "keys.toml", "--policy", "policy.toml", "--out", "{full}/set"),
     "cannot write the set into {full}/set"),
    (("replay", "suite", "build", "--from-corpus", "corpus", "--keys", "keys.toml", "--out", "{full}/suite"),
     "cannot write the suite into {full}/suite"),
    (("demo", "pack", "--out", "{full}/pack"), "{full}/pack/pack.toml"),
])
def test_an_output_on_a_full_disk_is_one_error_line_and_leaves_nothing(inputs: Path, full_disk: Path,
                                                                         args: tuple[str, ...], named: str) -> None:
    result = run(*(arg.format(full=full_disk) for arg in args), cwd=inputs)
    assert_one_error_line(result, named.format(full=full_disk), FULL_DISK)
    left = sorted(str(path.relative_to(full_disk)) for path in full_disk.rglob("*") if path.is_file())
    assert left == ["filler"]
