"""The capture store read back: any row a user's file can hold is a decision or a `StoreError`
naming the file and the row, never a traceback."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from core.capture import CapturedDecision, CaptureStore, read_decisions
from core.sqlitedb import StoreError

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
