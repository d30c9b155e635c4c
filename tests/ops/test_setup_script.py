"""scripts/setup.sh installs what each README command needs, once: the demo the engine extra, the tests `dev` too.

The venv here is a stand-in whose `python`, `worker-serve` and `worker-demo` record their arguments, so the
script's own choices are what is checked (the real install is what `make test` itself runs first).
"""

from __future__ import annotations

import ctypes.util
import os
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SETUP = REPO / "scripts" / "setup.sh"
TEST_TOOLS = ("chromium", "prometheus", "promtool", "systemd-analyze", "systemd-sysusers", "shellcheck")


def _recorder(path: Path, log: Path) -> None:
    path.write_text(f'#!/bin/sh\necho "$(basename "$0") $*" >> "{log}"\n')
    path.chmod(0o755)


@pytest.fixture
def venv(tmp_path: Path) -> tuple[Path, Path, dict[str, str]]:
    """A venv of recorders, and an environment where the test tools are present (so apt is never asked)."""
    log = tmp_path / "calls.log"
    bin_dir = tmp_path / "venv" / "bin"
    bin_dir.mkdir(parents=True)
    for name in ("python", "worker-serve", "worker-demo"):
        _recorder(bin_dir / name, log)
    tools = tmp_path / "tools"
    tools.mkdir()
    for name in TEST_TOOLS:
        _recorder(tools / name, tmp_path / "tools.log")
    env = {**os.environ, "VENV": str(tmp_path / "venv"), "WORKER_TIER_ENGINE": "cpu",
           "PATH": f"{tools}:{os.environ['PATH']}"}
    return tmp_path / "venv", log, env


def _setup(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["bash", str(SETUP), *args], env=env, capture_output=True, text=True, timeout=60,
                          check=True)


def _installs(log: Path) -> list[str]:
    lines = log.read_text().splitlines() if log.exists() else []
    return [line.split(" -e ")[1] for line in lines if " pip install " in line]


def test_the_demo_installs_the_engine_extra_only_and_the_tests_add_dev_once(venv):
    path, log, env = venv
    first = _setup(env)
    assert _installs(log) == ['.[cpu]'], "the demo needs no linters, fuzzers or the Agent SDK"
    assert "installing worker-tier[cpu]" in first.stderr
    assert any(line.startswith("worker-demo adapters") for line in log.read_text().splitlines())

    _setup(env)
    assert _installs(log) == ['.[cpu]'], "a second demo installs nothing"

    _setup(env, "--test-tools")
    assert _installs(log) == ['.[cpu]', '.[cpu,dev]']
    _setup(env, "--test-tools")
    _setup(env)
    assert _installs(log) == ['.[cpu]', '.[cpu,dev]'], "a venv set up for the tests serves the demo as it is"
    assert [p.name for p in path.glob(".installed-*")] == [p.name for p in path.glob(".installed-cpu,dev-*")]


def test_the_benchmarks_get_dev_without_the_test_tools_and_a_wrong_option_is_refused(venv):
    _, log, env = venv
    env = {**env, "PATH": os.environ["PATH"]}  # no stand-in test tools: --dev must not look for them
    done = _setup(env, "--dev")
    assert _installs(log) == ['.[cpu,dev]'] and "Debian" not in done.stderr
    refused = subprocess.run(["bash", str(SETUP), "--tests"], env=env, capture_output=True, text=True, timeout=60)
    assert refused.returncode == 2 and "unknown option --tests" in refused.stderr
    assert _installs(log) == ['.[cpu,dev]'], "nothing ran"


def test_a_changed_pyproject_installs_again(venv):
    path, log, env = venv
    _setup(env)
    stamp = next(path.glob(".installed-*"))
    stamp.rename(path / ".installed-cpu-0000000000000000")
    _setup(env)
    assert _installs(log) == ['.[cpu]', '.[cpu]']
    assert len(list(path.glob(".installed-*"))) == 1


def test_a_cpu_machine_without_tcmalloc_gets_debians_package_under_the_name_its_release_has(venv, tmp_path):
    """The engine preloads tcmalloc (configs/engine/cpu-smollm2.toml): where the loader cannot find it, the set-up
    installs it as root (the t64 name on Debian 13, the old one where only that exists) or says how to."""
    _, _, env = venv
    stand_ins = tmp_path / "apt"
    stand_ins.mkdir()
    apt_log = tmp_path / "apt.log"
    (stand_ins / "apt-get").write_text(f'#!/bin/sh\necho "apt-get $*" >> "{apt_log}"\n')
    (stand_ins / "apt-cache").write_text('#!/bin/sh\n[ "$2" = libtcmalloc-minimal4 ]\n')  # an older release
    no_tcmalloc = stand_ins / "python-without-tcmalloc"
    no_tcmalloc.write_text("#!/bin/sh\nexit 1\n")  # ctypes.util.find_library finds nothing
    for stand_in in stand_ins.iterdir():
        stand_in.chmod(0o755)
    env = {**env, "PATH": f"{stand_ins}:{env['PATH']}", "PYTHON": str(no_tcmalloc)}
    done = _setup(env)
    if os.geteuid() == 0:
        installs = [line for line in apt_log.read_text().splitlines() if " install " in line]
        assert installs == ["apt-get install -y -qq libtcmalloc-minimal4"]
        assert "installing Debian's libtcmalloc-minimal4t64 or libtcmalloc-minimal4" in done.stderr
    else:
        assert not apt_log.exists()
        assert "as root: apt-get install libtcmalloc-minimal4t64 or libtcmalloc-minimal4" in done.stderr
    env["PYTHON"] = "python3"
    apt_log.unlink(missing_ok=True)
    found = _setup(env)
    if ctypes.util.find_library("tcmalloc_minimal"):
        assert not apt_log.exists() and "tcmalloc" not in found.stderr, "where the loader finds it, nothing is asked"
