"""A restart on a full disk (issue 62, item 2): every store the gateway opens at start-up (the state store
with its request log, the trial store in the same file, the capture store) ends the command in one `error:`
line that names the store and says the disk is full, the same line on every try, exit 2, never a traceback
and never "check permissions". That includes the trial controller's start-up record, written after the
stores opened. The disk is a real small tmpfs (tests/support/fulldisk.py); the one test that runs without
root injects SQLite's full-disk error at that record instead."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from core.capture_store import CaptureStore
from core.sqlitedb import StoreError
from serve.cli import main
from serve.gateway.registry import Registry
from serve.trials.store import TrialStore
from tests.support.cli import assert_one_error_line, run_cli
from tests.support.fault_upstream import FaultUpstream
from tests.support.fulldisk import SHM_BYTES, fill, small_disk
from tests.support.gateway_harness import RunningGateway, fake_adapter, write_config
from tests.support.trials import two_step_policy

CAPTURE = '[capture]\nmode = "descriptor"\nsample_rate = 1.0\n'


def with_a_running_trial(config: Path, root: Path) -> None:
    """Start the gateway of `config` once, register a candidate and start trial t1 on it, and stop."""
    with RunningGateway(config) as gw:
        for name in ("prod-v1", "cand-v1"):
            fake_adapter(root, name)
            gw.ok("POST", "/adapters", {"name": name, "path": name})
            gw.ok("POST", f"/adapters/{name}/load")
        gw.ok("POST", "/routes/worker/production", {"version": "prod-v1"})
        policy = two_step_policy(root / "trial.toml", "t", "cand-v1", 10_000, 0.01, 600)
        assert gw.ok("POST", "/trials", {"id": "t1", "policy": str(policy)})["phase"] == "step"


def test_a_first_start_on_a_full_disk_says_so_the_same_way_every_time(tmp_path: Path, root: Path,
                                                                       no_upstream) -> None:
    with small_disk(tmp_path / "disk") as disk:
        config = write_config(disk / "gw", [no_upstream.url], root, extra=CAPTURE)
        fill(disk)
        results = [run_cli("serve", "gateway", "--config", str(config), "--log-level", "warning", cwd=tmp_path)
                   for _ in range(2)]
        for result in results:
            assert_one_error_line(result, f"gateway state store {disk / 'gw' / 'state.sqlite'}: cannot open it: "
                                          "the disk is full (0 bytes free)")
            assert "permission" not in result.stderr
        assert results[0].stderr == results[1].stderr
        assert sorted(p.name for p in (disk / "gw").iterdir()) == ["gateway.toml"]  # no empty store left


@pytest.mark.parametrize(("what", "store", "opens"), [
    ("gateway state store", "state.sqlite", lambda path: Registry(path, ["worker"], "base")),
    ("trial store", "state.sqlite", TrialStore),
    ("capture store", "capture.sqlite", CaptureStore),
])
def test_each_store_on_a_disk_that_filled_up_says_the_disk_is_full(tmp_path: Path, what: str, store: str,
                                                                    opens) -> None:
    """SQLite's own words here are "disk I/O error" (its shared-memory file cannot be made)."""
    with small_disk(tmp_path / "disk") as disk:
        opens(disk / store).close()
        fill(disk)
        with pytest.raises(StoreError) as refused:
            opens(disk / store)
        assert str(refused.value) == (f"{what} {disk / store}: cannot open it: the disk is full (0 bytes free); "
                                      "free space on it, then try again")


def test_a_restart_whose_trial_recovery_finds_the_disk_full_is_one_error_line(tmp_path: Path, root: Path) -> None:
    """The stores open (their shared memory still fits), then recording the running trial's recovery needs
    the write-ahead log, and the disk has no room for it: before, a traceback and exit 3."""
    with small_disk(tmp_path / "disk") as disk, FaultUpstream() as fault:
        config = write_config(disk / "gw", [fault.url], root)
        with_a_running_trial(config, root)
        fill(disk, leave=SHM_BYTES)
        result = run_cli("serve", "gateway", "--config", str(config), "--log-level", "warning", cwd=tmp_path)
        assert_one_error_line(result, f"gateway state store {disk / 'gw' / 'state.sqlite'}: cannot record the "
                                      "trials' recovery at start-up: the disk is full")
        assert "Application startup failed" not in result.stderr


def test_the_trial_recovery_record_on_a_full_disk_is_the_commands_error_line(
        tmp_path: Path, root: Path, fault: FaultUpstream, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """The same start-up path with SQLite's full-disk error injected at the record (no root needed)."""
    config = write_config(tmp_path / "gw", [fault.url], root)
    with_a_running_trial(config, root)

    def disk_full(*_: object) -> None:
        error = sqlite3.OperationalError("database or disk is full")
        error.sqlite_errorcode = sqlite3.SQLITE_FULL  # type: ignore[attr-defined]
        raise error

    monkeypatch.setattr(TrialStore, "note", disk_full)
    capsys.readouterr()
    assert main(["gateway", "--config", str(config), "--log-level", "warning"]) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert line.startswith(f"error: gateway state store {tmp_path / 'gw' / 'state.sqlite'}: cannot record the "
                           "trials' recovery at start-up: the disk is full ("), line
