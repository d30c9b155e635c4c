"""The capture store: labels reach their own session's decision, and the read-only reader opens the
file it is given."""

from __future__ import annotations

from pathlib import Path

import pytest

from core.capture import CapturedDecision, CaptureStore, ToolResult, read_decisions
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
