"""The capture store's bounds: retention deletes a decision from the file's bytes (not only from
queries), `max_rows` keeps the newest, and a time window is read through an index in SQL, returning
exactly the rows a full read filtered in Python would."""

from __future__ import annotations

import sqlite3
import tempfile
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from core.capture_store import CapturedDecision, CaptureStore, parse_instant, read_decisions, stored_time, window_query

NOW = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
BASE = CapturedDecision(
    id="r-0", captured_at="2026-12-01T12:00:00Z", mode="full", workspace="ws-a", session="s-1", route="worker",
    adapter="worker-base", kind="production", request_sha256="0" * 64, message_hashes=[], roles=["user"],
    tools_offered=["search"], tool_choice="auto", parse_outcome="ok", chosen_tool="search", chosen_keys=[],
    call_id=None, calls=1, duration_s=0.1)


def at(n: int, when: datetime, route: str = "worker", text: str = "") -> CapturedDecision:
    return replace(BASE, id=f"r-{n}", captured_at=stored_time(when), route=route,
                   request={"messages": [{"role": "user", "content": text}]} if text else None)


def on_disk(path: Path) -> bytes:
    return b"".join(p.read_bytes() for p in (path, path.with_name(path.name + "-wal")) if p.exists())


def test_a_decision_past_retention_is_gone_from_the_files_bytes(tmp_path: Path) -> None:
    path = tmp_path / "c.sqlite"
    store = CaptureStore(path)
    marker = "tenant-secret-7f3a9c"
    store.insert(at(1, NOW - timedelta(days=31), text=marker * 50))
    store.insert(at(2, NOW - timedelta(days=1), text="recent"))
    store._db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    assert marker.encode() in on_disk(path)  # the test can see it before
    assert store.prune(NOW, retention_days=30, max_rows=1_000_000) == 1
    store._db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    assert marker.encode() not in on_disk(path)
    store.close()
    assert marker.encode() not in on_disk(path)
    assert [d.id for d in read_decisions(path)] == ["r-2"]


def test_freed_pages_go_back_to_the_file_system(tmp_path: Path) -> None:
    path = tmp_path / "c.sqlite"
    store = CaptureStore(path)
    for n in range(400):
        store.insert(at(n, NOW - timedelta(days=40), text="x" * 2000))
    store.insert(at(999, NOW))
    grown = store.held()
    assert store.prune(NOW, retention_days=30, max_rows=1_000_000) == 400
    held = store.held()
    store.close()
    assert held.rows == 1 and held.bytes < grown.bytes / 10


def test_beyond_max_rows_the_oldest_go(tmp_path: Path) -> None:
    path = tmp_path / "c.sqlite"
    store = CaptureStore(path)
    for n in range(10):
        store.insert(at(n, NOW - timedelta(minutes=10 - n)))
    assert store.prune(NOW, retention_days=30, max_rows=4) == 6
    assert store.prune(NOW, retention_days=30, max_rows=4) == 0
    store.close()
    assert [d.id for d in read_decisions(path)] == ["r-6", "r-7", "r-8", "r-9"]


def test_a_store_made_before_retention_is_converted_once_on_open(tmp_path: Path) -> None:
    path = tmp_path / "c.sqlite"
    old = sqlite3.connect(path)
    old.execute("CREATE TABLE t (x)")  # auto_vacuum is fixed once a table exists
    old.commit()
    assert old.execute("PRAGMA auto_vacuum").fetchone()[0] == 0
    old.close()
    CaptureStore(path).close()
    db = sqlite3.connect(path)
    assert db.execute("PRAGMA auto_vacuum").fetchone()[0] == 2
    db.close()


def test_a_stored_time_is_fixed_width_utc() -> None:
    assert stored_time("2026-12-01T13:00:00+01:00") == "2026-12-01T12:00:00.000000Z"
    assert stored_time("2026-12-01T12:00:00.5Z") == "2026-12-01T12:00:00.500000Z"


instants = st.datetimes(min_value=datetime(2026, 1, 1), max_value=datetime(2027, 1, 1),  # noqa: DTZ001
                        timezones=st.sampled_from([UTC]))


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(rows=st.lists(st.tuples(instants, st.sampled_from(["worker", "other", "w2"])), max_size=30),
       since=instants, route=st.one_of(st.none(), st.sampled_from(["worker", "other"])),
       offset=st.sampled_from(["Z", "+00:00", "+02:00"]))
def test_a_window_read_is_the_full_read_filtered(tmp_path: Path, rows: list[tuple[datetime, str]], since: datetime,
                                                  route: str | None, offset: str) -> None:
    path = Path(tempfile.mkdtemp(dir=tmp_path)) / "c.sqlite"  # one store per example
    store = CaptureStore(path)
    for n, (when, r) in enumerate(rows):
        store.insert(at(n, when, route=r))
    store.close()
    shift = timedelta(hours=2) if offset == "+02:00" else timedelta()
    given_since = (since + shift).replace(tzinfo=None).isoformat() + offset
    everything = read_decisions(path)
    expected = [d for d in everything if parse_instant(d.captured_at) >= since and route in (None, d.route)]
    assert read_decisions(path, given_since, route) == expected


def test_a_window_is_read_through_an_index(tmp_path: Path) -> None:
    path = tmp_path / "c.sqlite"
    CaptureStore(path).close()
    db = sqlite3.connect(path)
    for route in (None, "worker"):
        plan = " ".join(str(r[-1]) for r in db.execute("EXPLAIN QUERY PLAN " + window_query(
            "2026-12-01T00:00:00.000000Z", route)[0], window_query("2026-12-01T00:00:00.000000Z", route)[1]))
        assert "USING INDEX decisions_" in plan and "captured_at" in plan, plan
    db.close()


def test_a_store_copied_off_an_older_gateway_without_the_indexes_is_still_read_by_window(tmp_path: Path) -> None:
    path = tmp_path / "c.sqlite"
    store = CaptureStore(path)
    for n, age in enumerate((3, 2, 1)):
        store.insert(at(n, NOW - timedelta(days=age), route="worker" if n else "other"))
    store.close()
    db = sqlite3.connect(path)
    db.executescript("DROP INDEX decisions_captured_at; DROP INDEX decisions_route_captured_at;")
    db.close()
    assert [d.id for d in read_decisions(path, stored_time(NOW - timedelta(days=2)), "worker")] == ["r-1", "r-2"]
    assert [d.id for d in read_decisions(path, stored_time(NOW - timedelta(days=2)))] == ["r-1", "r-2"]
