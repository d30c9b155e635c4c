"""The capture store: labels reach their own session's decision, and the read-only reader opens the
file it is given."""

from __future__ import annotations

import sqlite3
from dataclasses import replace
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from core.capture_store import (
    LABEL_BY_CALL_ID,
    LABEL_BY_TOOL,
    CapturedDecision,
    CaptureStore,
    ToolResult,
    read_decisions,
)
from core.sqlitedb import StoreError


def captured(n: int, workspace: str, session: str, tool: str = "search") -> CapturedDecision:
    return CapturedDecision(
        id=f"r-{workspace}-{session}-{n}", captured_at="2026-08-02T10:00:00Z", mode="descriptor",
        workspace=workspace, session=session, route="worker", adapter="worker-base", kind="production",
        request_sha256="0" * 64, message_hashes=[], roles=["user"], tools_offered=[tool], tool_choice="auto",
        parse_outcome="ok", chosen_tool=tool, chosen_keys=[], call_id=f"c-{n}", calls=1, duration_s=0.1)


def test_a_label_reaches_only_its_own_workspaces_session(tmp_path: Path) -> None:
    path = tmp_path / "c.sqlite"
    db = CaptureStore(path)
    db.insert(captured(1, "ws-a", "s-remind"))
    db.insert(captured(1, "ws-b", "s-remind"))  # another tenant, the same session id
    db.label("ws-b", "s-remind", [ToolResult("c-1", "search", "blocked")])
    db.label("ws-a", "s-other", [ToolResult("c-1", "search", "failed")])  # no such session: touches nothing
    db.close()
    assert {d.workspace: d.outcome for d in read_decisions(path)} == {"ws-a": None, "ws-b": "blocked"}


def test_a_label_without_a_call_id_reaches_the_latest_call_of_its_own_thread(tmp_path: Path) -> None:
    """A subagent's loop runs under its parent's session id: a result matched by tool name labels the
    latest unlabelled call of that tool in the same thread, never the other thread's."""
    path = tmp_path / "c.sqlite"
    db = CaptureStore(path)
    db.insert(replace(captured(1, "ws-a", "s-1"), call_id=None, thread="main"))
    db.insert(replace(captured(2, "ws-a", "s-1"), call_id=None, thread="agent"))
    db.label("ws-a", "s-1", [ToolResult(None, "search", "failed")], thread="main")
    db.close()
    assert {d.thread: d.outcome for d in read_decisions(path)} == {"main": "failed", "agent": None}


def steps(path: Path, query: str, params: tuple[object, ...]) -> tuple[int, object]:
    """SQLite's virtual-machine steps for one query, and its answer: what the query costs, whatever the clock."""
    counted = [0]

    def count() -> int:
        counted[0] += 1
        return 0

    with sqlite3.connect(path) as db:
        db.set_progress_handler(count, 1)
        answer = db.execute(query, params).fetchone()
    return counted[0], answer


@pytest.mark.parametrize("query", ["call", "tool"])
def test_finding_a_results_decision_costs_the_same_in_a_long_session_as_in_a_short_one(tmp_path: Path,
                                                                                      query: str) -> None:
    """The result of the session's first call arrives after N more calls (its label is still missing): the lookup
    is an index search, so it does not walk the N later decisions (it did through the session's own index)."""
    cost = {}
    for later in (10, 3000):
        path = tmp_path / f"{later}.sqlite"
        db = CaptureStore(path)
        db.insert(captured(0, "ws-a", "s-1", tool="lookup"))
        for n in range(1, later + 1):
            db.insert(captured(n, "ws-a", "s-1"))
        db.close()
        sql, params = ((LABEL_BY_CALL_ID, ("ws-a", "s-1", "c-0")) if query == "call"
                       else (LABEL_BY_TOOL, ("ws-a", "s-1", "lookup", None)))
        cost[later], row = steps(path, sql, params)
        assert row == (1,)  # the first decision's seq
    assert cost[3000] <= cost[10] + 20, cost


def test_a_store_written_before_canonical_hashing_reads_as_raw_and_gains_the_columns(tmp_path: Path) -> None:
    """A store an older gateway wrote (no `hashing`, `forced`, `thread` columns) is read as it was written:
    raw hashes, no forced choice, no thread; the gateway adds the columns when it opens the store."""
    path = tmp_path / "old.sqlite"
    db = CaptureStore(path)
    db.insert(captured(1, "ws-a", "s-1"))
    db.close()
    with sqlite3.connect(path) as raw:
        for column in ("hashing", "forced", "thread"):
            raw.execute(f"ALTER TABLE decisions DROP COLUMN {column}")
    [old] = read_decisions(path)
    assert (old.hashing, old.forced, old.thread) == ("raw", False, None)
    CaptureStore(path).close()
    with sqlite3.connect(path) as raw:
        assert {"hashing", "forced", "thread"} <= {row[1] for row in raw.execute("PRAGMA table_info(decisions)")}
    assert read_decisions(path)[0].hashing == "raw"


def test_the_reader_opens_the_file_named_and_creates_none(tmp_path: Path) -> None:
    for name in ("cap#1.sqlite", "cap%41.sqlite"):
        db = CaptureStore(tmp_path / name)
        db.insert(captured(1, "ws-a", f"s-{len(name)}-{name[3]}"))
        db.close()
    decoy = CaptureStore(tmp_path / "capA.sqlite")
    decoy.insert(captured(1, "ws-a", "decoy"))
    decoy.close()
    before = stores(tmp_path)
    assert [d.session for d in read_decisions(tmp_path / "cap#1.sqlite")] == ["s-12-#"]
    assert [d.session for d in read_decisions(tmp_path / "cap%41.sqlite")] == ["s-13-%"]
    with pytest.raises(StoreError, match="no such file"):
        read_decisions(tmp_path / "missing#1.sqlite")
    assert stores(tmp_path) == before


def stores(folder: Path) -> list[str]:
    """The files of a folder, less the WAL files SQLite keeps beside a store a reader opened."""
    return sorted(p.name for p in folder.iterdir() if not p.name.endswith(("-wal", "-shm")))


DECISION = CapturedDecision(
    id="r-1", captured_at="2026-08-02T10:00:00Z", mode="descriptor", workspace="ws-a", session="s-1", route="worker",
    adapter="worker-base", kind="production", request_sha256="0" * 64, message_hashes=["ab"], roles=["user"],
    tools_offered=["lookup"], tool_choice="auto", parse_outcome="ok", chosen_tool="lookup", chosen_keys=["id"],
    call_id="c1", calls=1, duration_s=0.5)


def store(path: Path) -> Path:
    capture = CaptureStore(path)
    capture.insert(DECISION)
    capture.close()
    return path


def tamper(path: Path, column: str, value: object) -> None:
    with sqlite3.connect(path) as db:
        db.execute(f"UPDATE decisions SET {column} = ?", (value,))


@pytest.mark.parametrize(("column", "value", "reason"), [
    ("message_hashes", "[" * 50_000 + "]" * 50_000, "message_hashes: invalid JSON: arrays and objects are nested"),
    ("roles", '["user", ' + "1" * 5000 + "]", "roles: invalid JSON: Exceeds the limit"),
    ("request", "{oops", "request: invalid JSON"),
    ("chosen_keys", '{"a": 1}', "field chosen_keys: Input should be a valid list"),
    ("captured_at", "yesterday", "captured_at: not an ISO time"),
    ("calls", "many", "field calls: Input should be a valid integer"),
])
def test_a_row_the_gateway_cannot_have_written_is_one_error_naming_file_and_row(tmp_path: Path, column: str,
                                                                              value: object, reason: str) -> None:
    path = store(tmp_path / "capture.sqlite")
    assert read_decisions(path)[0].id == "r-1"
    tamper(path, column, value)
    with pytest.raises(StoreError, match=r"capture\.sqlite: decisions row 1: ") as error:
        read_decisions(path)
    assert reason in str(error.value)


COLUMNS = ("captured_at", "message_hashes", "roles", "tools_offered", "chosen_keys", "request", "chosen_arguments",
           "calls", "duration_s", "workspace")


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(column=st.sampled_from(COLUMNS),
       value=st.none() | st.integers(-(2**63), 2**63 - 1) | st.floats() | st.text(max_size=60) | st.binary(max_size=30)
       | st.sampled_from(["[]", "{}", '["a"]', '{"messages": []}', "[" * 200]))
def test_any_value_in_any_column_is_a_decision_or_a_store_error(tmp_path: Path, column: str, value: object) -> None:
    path = tmp_path / "any.sqlite"
    path.unlink(missing_ok=True)
    store(path)
    try:
        tamper(path, column, value)
    except sqlite3.IntegrityError:
        return  # a NOT NULL column: SQLite itself refuses
    try:
        read_decisions(path)
    except StoreError as exc:
        assert str(exc).startswith(str(path))


NAMES = {"workspace": ["ws-a", "ws-b"], "session": ["s-1", "s-2"], "thread": ["main", "agent", None],
         "tool": ["search", "lookup", None], "call_id": ["c-1", "c-2", None]}
CAPTURES = st.lists(st.tuples(
    st.fixed_dictionaries({k: st.sampled_from(v) for k, v in NAMES.items()}),
    st.lists(st.builds(ToolResult, st.sampled_from(NAMES["call_id"]), st.sampled_from(["search", "lookup"]),
                       st.sampled_from(["ok", "failed", "blocked"])), max_size=3)), max_size=12)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(captures=CAPTURES)
def test_recorded_captures_label_as_the_rule_says_whatever_their_order(tmp_path_factory: pytest.TempPathFactory,
                                                                       captures: list) -> None:
    """`record` (the worker's one transaction per capture) against the rule done by hand: each result labels the
    newest unlabelled decision of its workspace's session with its call id, else with its tool in the capture's
    own thread; then the capture is stored."""
    path = tmp_path_factory.mktemp("record") / "c.sqlite"
    db = CaptureStore(path)
    expected: list[dict] = []
    for n, (names, results) in enumerate(captures):
        decision = replace(captured(n, names["workspace"], names["session"], names["tool"] or "search"),
                           chosen_tool=names["tool"], call_id=names["call_id"], thread=names["thread"])
        db.record(decision, results)
        for result in results:
            mine = [d for d in expected if (d["workspace"], d["session"]) == (names["workspace"], names["session"])
                    and d["outcome"] is None]
            by_call = [d for d in mine if result.call_id is not None and d["call_id"] == result.call_id]
            by_tool = [d for d in mine if d["tool"] == result.tool and d["thread"] == names["thread"]]
            if by_call or by_tool:
                (by_call or by_tool)[-1]["outcome"] = result.kind
        expected.append({**names, "id": decision.id, "outcome": None})
    db.close()
    assert [(d.id, d.outcome) for d in read_decisions(path)] == [(d["id"], d["outcome"]) for d in expected]
