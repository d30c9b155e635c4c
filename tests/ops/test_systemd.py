"""The systemd units of systemd/: `systemd-analyze verify` has nothing to say about them, their
sandbox is as tight as docs/production.md promises, everything they write lies in a writable
directory, and the sysusers file creates the dedicated user.

`verify` needs every ExecStart binary to exist, so it runs on copies whose ExecStart points at
this virtual environment's real `worker-serve` and `worker-replay` instead of the installed
/opt/worker-tier/venv (nothing else is changed; `User=` is not resolved by `verify`)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path, PurePosixPath

import pytest

from serve.gateway.config import load_gateway_config

REPO = Path(__file__).resolve().parents[2]
UNITS = REPO / "systemd"
INSTALLED_BIN = "/opt/worker-tier/venv/bin/"
SERVICES = ("worker-engine.service", "worker-gateway.service", "worker-replay@.service", "worker-memory-stats.service")
TIMERS = ("worker-memory-stats.timer",)
# `systemd-analyze security --offline` exposure (0 = locked down, 10 = none), as measured, rounded
# up: a change that loosens a sandbox fails here.
MAX_EXPOSURE = {"worker-engine.service": 3.0, "worker-gateway.service": 1.4, "worker-replay@.service": 0.9,
                "worker-memory-stats.service": 0.2}


def tool(name: str) -> str:
    found = shutil.which(name)
    if found is None:
        pytest.fail(f"{name} is missing: install Debian's `systemd` (scripts/setup.sh --test-tools checks for it)")
    return found


def unit(name: str) -> dict[str, dict[str, list[str]]]:
    """Sections of a unit file, each key with all its values in order (keys repeat in systemd)."""
    sections: dict[str, dict[str, list[str]]] = {}
    current: dict[str, list[str]] = {}
    for line in (UNITS / name).read_text().splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith("["):
            current = sections.setdefault(line.strip("[]"), {})
        else:
            key, _, value = line.partition("=")
            current.setdefault(key, []).append(value)
    return sections


def copies_for_verify(directory: Path) -> list[Path]:
    """The units with ExecStart at this venv's console scripts; the template as an instance; the timers beside
    the services they start."""
    venv_bin = Path(sys.executable).parent
    for name in SERVICES:
        text = (UNITS / name).read_text()
        assert INSTALLED_BIN in text, name
        (directory / name).write_text(text.replace(INSTALLED_BIN, f"{venv_bin}/"))
    for name in TIMERS:
        shutil.copy(UNITS / name, directory / name)
    return [directory / name.replace("@.", "@nightly.") for name in (*SERVICES, *TIMERS)]


def verify(paths: list[Path]) -> subprocess.CompletedProcess:
    return subprocess.run([tool("systemd-analyze"), "verify", *map(str, paths)], capture_output=True, text=True,
                          timeout=120)


def test_units_verify_without_a_single_message(tmp_path):
    paths = copies_for_verify(tmp_path)
    checked = verify(paths)
    # verify exits 0 on unknown keys and only prints them: any output at all is a failure.
    assert (checked.returncode, checked.stdout + checked.stderr) == (0, "")


def test_verify_reports_a_misspelt_directive_and_a_missing_binary(tmp_path):
    (engine, gateway, *_) = copies_for_verify(tmp_path)
    gateway.write_text(gateway.read_text().replace("ProtectSystem=strict", "ProtectSytem=strict"))
    assert "Unknown key 'ProtectSytem'" in verify([gateway]).stderr
    engine.write_text(engine.read_text().replace(str(Path(sys.executable).parent), "/nonexistent"))
    missing = verify([engine])
    assert missing.returncode != 0 and "/nonexistent/worker-serve" in missing.stderr


@pytest.mark.parametrize("name", SERVICES)
def test_every_unit_runs_sandboxed_as_the_dedicated_user_with_restart_and_graceful_stop(name):
    service = unit(name)["Service"]
    one = {key: values[-1] for key, values in service.items()}
    assert (one["User"], one["Group"]) == ("worker-tier", "worker-tier")
    for key, value in {"NoNewPrivileges": "yes", "ProtectSystem": "strict", "ProtectHome": "yes",
                       "PrivateTmp": "yes", "ProtectKernelTunables": "yes", "ProtectKernelModules": "yes",
                       "ProtectControlGroups": "yes", "RestrictSUIDSGID": "yes", "LockPersonality": "yes",
                       "CapabilityBoundingSet": "", "Restart": "on-failure", "KillSignal": "SIGTERM"}.items():
        assert one.get(key) == value, f"{name}: {key}={one.get(key)}"
    assert re.fullmatch(r"\d+s", one["TimeoutStopSec"])
    assert service["EnvironmentFile"][0] == "-/etc/worker-tier/worker-tier.env"
    assert all(PurePosixPath(f.lstrip("-")).is_relative_to("/etc/worker-tier") for f in service["EnvironmentFile"])
    assert "worker-tier" in one["StateDirectory"].split()


def test_gateway_starts_after_the_engine_without_being_bound_to_it():
    engine, gateway = unit("worker-engine.service"), unit("worker-gateway.service")
    assert "worker-engine.service" in gateway["Unit"]["After"][0].split()
    assert "worker-engine.service" in gateway["Unit"]["Wants"][0].split()
    assert "Requires" not in gateway["Unit"] and "BindsTo" not in gateway["Unit"]  # 503 while the engine loads
    assert engine["Service"]["ExecStart"] == [
        f"{INSTALLED_BIN}worker-serve engine --config /etc/worker-tier/engine.toml"]
    assert gateway["Service"]["ExecStart"][0].startswith(
        f"{INSTALLED_BIN}worker-serve gateway --config /etc/worker-tier/gateway.toml")
    assert engine["Install"]["WantedBy"] == gateway["Install"]["WantedBy"] == ["multi-user.target"]


def test_memory_stats_runs_hourly_over_the_configured_roots_into_the_textfile_collector(tmp_path):
    service = unit("worker-memory-stats.service")["Service"]
    assert service["Type"] == ["oneshot"] and "/etc/worker-tier/memory-stats.env" in service["EnvironmentFile"]
    (command,) = service["ExecStart"]
    # unbraced, so systemd splits several roots into several arguments (and an unset coverage into none)
    assert command.split()[1:] == ["memory", "stats", "$WORKER_MEMORY_ROOTS", "$WORKER_QA_COVERAGE", "--textfile",
                                   "/var/lib/prometheus/node-exporter/worker_memory.prom"]
    assert "Install" not in unit("worker-memory-stats.service")  # the timer starts it
    # a oneshot's start never times out by default: a hung run must end before the next hour's is due
    (start_timeout,) = service["TimeoutStartSec"]
    assert re.fullmatch(r"\d+min", start_timeout) and int(start_timeout.removesuffix("min")) < 60
    timer = unit("worker-memory-stats.timer")
    assert timer["Timer"]["OnCalendar"] == ["hourly"] and timer["Timer"]["Persistent"] == ["true"]
    assert timer["Install"]["WantedBy"] == ["timers.target"]
    (*_, copy) = copies_for_verify(tmp_path)
    copy.write_text(copy.read_text().replace("OnCalendar=hourly", "OnCalendar=hourlyy"))
    assert "hourlyy" in verify([copy]).stderr  # verify reads the timer, not only the services


def test_replay_template_reads_its_instance_files_and_writes_its_run_directory():
    replay = unit("worker-replay@.service")
    service = replay["Service"]
    assert "/etc/worker-tier/replay/%i.env" in service["EnvironmentFile"]  # required: it names the suite
    (command,) = service["ExecStart"]
    assert command.split()[1:] == ["run", "--suite", "${WORKER_REPLAY_SUITE}", "--config",
                                   "/etc/worker-tier/replay/%i.toml", "--out", "/var/lib/worker-tier/runs/%i"]
    assert "Install" not in replay  # started by hand or a timer, never at boot


@pytest.mark.parametrize("name", SERVICES)
def test_everything_a_unit_writes_is_in_a_writable_directory(name):
    """ProtectSystem=strict makes the whole file system read-only but for these directories."""
    service = unit(name)["Service"]
    writable = [PurePosixPath("/var/lib", d) for v in service.get("StateDirectory", []) for d in v.split()]
    writable += [PurePosixPath("/var/cache", d) for v in service.get("CacheDirectory", []) for d in v.split()]
    writable += [PurePosixPath(p.lstrip("-")) for v in service.get("ReadWritePaths", []) for p in v.split()]
    written = [PurePosixPath(v.split("=", 1)[1]) for v in service.get("Environment", [])
               if v.split("=", 1)[0] in {"HOME", "WORKER_TIER_CACHE", "XDG_CACHE_HOME", "VLLM_CACHE_ROOT",
                                         "TRITON_CACHE_DIR", "CUDA_CACHE_PATH", "HF_HOME", "WORKER_REPLAY_LEDGER"}]
    written.append(PurePosixPath(service["WorkingDirectory"][0]))
    written += [PurePosixPath(a) for a in service["ExecStart"][0].split() if a.startswith("/var/")]
    unwritable = [str(p) for p in written if not any(p.is_relative_to(w) for w in writable)]
    assert unwritable == [], f"{name}: read-only under ProtectSystem=strict"


def test_shipped_gateway_config_keeps_its_state_and_adapters_in_the_state_directory(monkeypatch):
    (cache,) = [v.split("=", 1)[1] for v in unit("worker-gateway.service")["Service"]["Environment"]
                if v.startswith("WORKER_TIER_CACHE=")]
    monkeypatch.setenv("WORKER_TIER_CACHE", cache)
    config = load_gateway_config(REPO / "configs" / "gateway.toml")
    assert config.gateway.state_db == Path("/var/lib/worker-tier/gateway/state.sqlite")
    assert config.adapters.root == Path("/var/lib/worker-tier/adapters")


@pytest.mark.parametrize("name", SERVICES)
def test_exposure_stays_as_low_as_measured(name, tmp_path):
    path = tmp_path / name.replace("@.", "@nightly.")
    path.write_text((UNITS / name).read_text())
    checked = subprocess.run([tool("systemd-analyze"), "security", "--offline=true", "--no-pager",
                              f"--threshold={round(MAX_EXPOSURE[name] * 10)}", str(path)],
                             capture_output=True, text=True, timeout=120)
    level = re.search(r"Overall exposure level for \S+: (\d+\.\d)", checked.stdout)
    assert level and float(level.group(1)) <= MAX_EXPOSURE[name], checked.stdout[-400:] + checked.stderr
    assert checked.returncode == 0, checked.stderr


def test_sysusers_creates_the_dedicated_system_user(tmp_path):
    root = tmp_path / "root"
    (root / "etc").mkdir(parents=True)
    created = subprocess.run([tool("systemd-sysusers"), f"--root={root}", str(UNITS / "worker-tier.sysusers")],
                             capture_output=True, text=True, timeout=60, env={**os.environ, "SYSTEMD_LOG_LEVEL": "err"})
    assert created.returncode == 0, created.stderr
    (entry,) = [line.split(":") for line in (root / "etc" / "passwd").read_text().splitlines()]
    assert entry[0] == "worker-tier" and int(entry[2]) < 1000  # a system user
    assert entry[5:] == ["/var/lib/worker-tier", "/usr/sbin/nologin"]
