"""The request and shadow logs are read by window through their (route, time) index: exactly the rows a
full read filtered in Python would give, at a cost of the window, not the log."""

from __future__ import annotations

import sqlite3
import tempfile
from datetime import UTC, datetime, timedelta
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from serve.gateway.registry import _REQUESTS_SINCE, _SHADOWS_SINCE, Registry, RequestRow, requests_in
from serve.trials.signals import stamp

T0 = datetime(2026, 12, 1, tzinfo=UTC).timestamp()


def test_each_window_is_read_through_its_index(tmp_path: Path) -> None:
    Registry(tmp_path / "s.sqlite", ["worker"], "worker-base").close()
    db = sqlite3.connect(tmp_path / "s.sqlite")
    for query, index in ((_REQUESTS_SINCE, "requests_route_at"), (_SHADOWS_SINCE, "shadow_results_route_at")):
        plan = " ".join(str(r[-1]) for r in db.execute("EXPLAIN QUERY PLAN " + query, ("worker", stamp(T0))))
        assert f"USING INDEX {index} (route=? AND at>?)" in plan, plan
    db.close()


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(rows=st.lists(st.tuples(st.floats(0, 3600 * 24 * 30), st.sampled_from(["worker", "other"])), max_size=30),
       since=st.floats(0, 3600 * 24 * 30), route=st.sampled_from(["worker", "other"]))
def test_a_request_window_is_the_full_log_filtered(tmp_path: Path, rows: list[tuple[float, str]], since: float,
                                                    route: str) -> None:
    path = Path(tempfile.mkdtemp(dir=tmp_path)) / "s.sqlite"
    registry = Registry(path, ["worker", "other"], "worker-base")
    for n, (offset, r) in enumerate(rows):
        registry.record_request(RequestRow(request_id=f"r{n}", endpoint="/v1/chat/completions", requested=r, route=r,
                                           adapter="prod", kind="production", sticky_key="k", upstream="e0",
                                           status=200, reason=None, duration_s=0.1), at=stamp(T0 + offset))
    registry.flush()
    everything = registry.requests(limit=1000)[::-1]
    cut = datetime.fromtimestamp(T0 + since, UTC).replace(microsecond=0) + timedelta(
        milliseconds=int(datetime.fromtimestamp(T0 + since, UTC).microsecond / 1000))
    expected = [r for r in everything if r["route"] == route and
                datetime.fromisoformat(r["at"].replace("Z", "+00:00")) >= cut]
    assert registry.requests_since(route, stamp(T0 + since)) == expected
    db = sqlite3.connect(f"{path.as_uri()}?mode=ro", uri=True)
    assert requests_in(db, route, stamp(T0 + since)) == expected
    db.close()
    registry.close()


def test_a_pruned_shadow_answer_is_overwritten_not_only_unlinked(tmp_path: Path) -> None:
    from serve.gateway.registry import ShadowRow

    path = tmp_path / "s.sqlite"
    registry = Registry(path, ["worker"], "worker-base", keep_rows=10)
    marker = "tenant-answer-91c2e"

    def shadow(n: int, text: str) -> ShadowRow:
        return ShadowRow(request_id=f"r{n}", route="worker", endpoint="/v1/chat/completions", production="prod",
                         candidate="cand", request_sha256="0" * 64, production_answer=f'"{text}"',
                         shadow_answer=None, production_outcome="ok", shadow_outcome="ok", production_tool=None,
                         shadow_tool=None, agreement="same_call", error=None, shadow_latency_s=0.1)

    registry.record_shadow(shadow(0, marker))
    for n in range(1, 1001):  # a prune runs after every 1000 rows written
        registry.record_shadow(shadow(n, "plain"))
    registry.flush()
    registry._db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    registry.close()
    reopened = Registry(path, ["worker"], "worker-base")
    assert "r0" not in {r["request_id"] for r in reopened.shadow_results(limit=100)}  # pruned
    reopened.close()
    assert marker.encode() not in path.read_bytes()
