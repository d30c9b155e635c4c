"""The capture store (001 S13): the SQLite file the gateway writes and replay reads.

The gateway (`serve/gateway/capture.py`) writes it from live traffic; the suite builder
(`replay/corpus/capture_suite.py`) reads it off the serving host. A row's hashes tie a content-free
descriptor to the request the model saw: over the canonical form (core/canonical.py), or, in rows
written before it (`hashing = "raw"`), over the body as sent (`message_hash`, `request_sha256`). A
resolver recomputes them with these very functions.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
from collections.abc import Mapping
from contextlib import AbstractContextManager
from dataclasses import dataclass, fields
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, Protocol

from pydantic import TypeAdapter, ValidationError

from core.errors import WorkerTierError
from core.guard import GuardKind
from core.jsonfile import parse_problem, schema_errors
from core.names import excerpt
from core.sqlitedb import StoreError, connect_readonly, open_wal, transaction

CANONICAL = "canonical"
"""A row's `hashing` when its hashes are over the canonical form (core/canonical.py)."""
RAW = "raw"
"""A row's `hashing` when its hashes are over the body as sent (stores written before the canonical form)."""
CORPUS = "corpus"
"""The `mode` of a decision read from the runtime's own records (replay/corpus/corpus_suite.py), never
captured: it holds its request, as a `full` capture does."""


def message_hash(message: Any) -> str:
    """A `raw` descriptor's hash of one message as sent (16 hex digits of sha256 over sorted-key JSON): the
    hash of stores written before the canonical form (core/canonical.py), still checked for their rows."""
    return hashlib.sha256(json.dumps(message, sort_keys=True).encode()).hexdigest()[:16]


def request_sha256(body: Mapping[str, Any]) -> str:
    """The hash of a whole request body as sent (sorted keys, compact JSON): a `raw` descriptor's request
    hash, and the shadow's key of a request."""
    return hashlib.sha256(json.dumps(body, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def choice_label(choice: Any) -> str:
    """A request's `tool_choice` as a descriptor records it (pass `auto` when the body has none):
    a named function as `function:<name>`, else the value itself."""
    if isinstance(choice, Mapping):
        return f"function:{(choice.get('function') or {}).get('name', '')}"
    return str(choice)


# `auto_vacuum` only takes effect when set before the first table exists (a new store); an older store is
# converted once when opened (`CaptureStore`). `secure_delete` is per connection, also set there.
SCHEMA = """
PRAGMA auto_vacuum = INCREMENTAL;
CREATE TABLE IF NOT EXISTS decisions (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    id TEXT UNIQUE NOT NULL,
    captured_at TEXT NOT NULL,
    mode TEXT NOT NULL,
    workspace TEXT NOT NULL,
    session TEXT NOT NULL,
    route TEXT NOT NULL,
    adapter TEXT NOT NULL,
    kind TEXT NOT NULL,
    request_sha256 TEXT NOT NULL,
    message_hashes TEXT NOT NULL,
    roles TEXT NOT NULL,
    tools_offered TEXT NOT NULL,
    tool_choice TEXT NOT NULL,
    parse_outcome TEXT NOT NULL,
    chosen_tool TEXT,
    chosen_keys TEXT NOT NULL,
    call_id TEXT,
    calls INTEGER NOT NULL,
    duration_s REAL NOT NULL,
    outcome TEXT,
    request TEXT,
    chosen_arguments TEXT,
    request_id TEXT,
    api TEXT,
    hashing TEXT,
    forced INTEGER,
    thread TEXT
);
DROP INDEX IF EXISTS decisions_session;
CREATE INDEX IF NOT EXISTS decisions_workspace_session ON decisions (workspace, session, seq);
CREATE INDEX IF NOT EXISTS decisions_call ON decisions (workspace, session, call_id, seq);
CREATE INDEX IF NOT EXISTS decisions_tool ON decisions (workspace, session, chosen_tool, seq);
CREATE INDEX IF NOT EXISTS decisions_captured_at ON decisions (captured_at);
CREATE INDEX IF NOT EXISTS decisions_route_captured_at ON decisions (route, captured_at);
"""
TIME_FORMAT = "%Y-%m-%dT%H:%M:%S.%fZ"
"""How `captured_at` is stored: UTC, fixed width, so stored times sort as text and a time window is an
index range (`captured_at >= ?`), never a scan of the whole store."""
_JSON_COLUMNS = ("message_hashes", "roles", "tools_offered", "chosen_keys", "request", "chosen_arguments")


@dataclass(frozen=True)
class ToolResult:
    call_id: str | None
    tool: str
    kind: GuardKind


@dataclass(frozen=True)
class CapturedDecision:
    """One stored decision (`request` and `chosen_arguments` only in `full` mode)."""

    id: str
    captured_at: str
    mode: str
    workspace: str
    session: str
    route: str
    adapter: str
    kind: str
    request_sha256: str
    message_hashes: list[str]
    roles: list[str]
    tools_offered: list[str]
    tool_choice: str
    parse_outcome: str
    chosen_tool: str | None
    chosen_keys: list[str]
    call_id: str | None
    calls: int
    duration_s: float
    outcome: str | None = None
    request: dict[str, Any] | None = None
    chosen_arguments: dict[str, Any] | None = None
    # The request's X-Request-Id (the client's when it sent one): a column, never a key, as
    # clients reuse ids. `id` is the gateway's own, unique per request.
    request_id: str | None = None
    # The API the request came through (`chat`, `messages`, `responses`): the shape its messages were
    # hashed in, and the API replay sends it through. A store older than the column holds chat only.
    api: str = "chat"
    # The form the hashes are over (core/canonical.py): `canonical`, or `raw` (the body as sent) in a
    # store older than the column.
    hashing: str = RAW
    # A forced tool route set the tool choice (`tool_choice` is the one the model saw; the runtime chose none).
    forced: bool = False
    # Which conversation of the session this turn belongs to (a subagent's turns come under its parent's
    # session id): 16 hex digits of the canonical hash of the turn's first message. None in older stores.
    thread: str | None = None
    seq: int | None = None


class Threaded(Protocol):
    """What names a decision's conversation: a captured decision, or an audit's lighter row."""

    @property
    def workspace(self) -> str: ...

    @property
    def session(self) -> str: ...

    @property
    def thread(self) -> str | None: ...


def thread_key(decision: Threaded) -> tuple[str, str, str | None]:
    """What identifies one conversation: its session and, within it, its thread (the main loop, or one
    subagent's loop that the runtime ran under the same session id)."""
    return decision.workspace, decision.session, decision.thread


def stored_time(value: str | datetime) -> str:
    """A time as the store holds it (`TIME_FORMAT`); a string that is not an ISO time is a TimeError."""
    instant = parse_instant(value) if isinstance(value, str) else value
    return instant.astimezone(UTC).strftime(TIME_FORMAT)


@dataclass(frozen=True)
class Held:
    """What a capture store holds: its decisions and the bytes of its file and write-ahead log."""

    rows: int
    bytes: int


def _migrate(db: sqlite3.Connection) -> None:
    """Bring a store written by an earlier version up to this one (part of opening it)."""
    columns = {row[1] for row in db.execute("PRAGMA table_info(decisions)")}
    for column, kind in (("request_id", "TEXT"), ("api", "TEXT"), ("hashing", "TEXT"), ("forced", "INTEGER"),
                         ("thread", "TEXT")):  # a store written before the column existed
        if column not in columns:
            db.execute(f"ALTER TABLE decisions ADD COLUMN {column} {kind}")
    db.execute("PRAGMA secure_delete = ON")
    if db.execute("PRAGMA auto_vacuum").fetchone()[0] != 2:  # a store made before retention
        db.execute("PRAGMA auto_vacuum = INCREMENTAL")
        db.execute("VACUUM")  # once: rewrites the file so freed pages can be given back


LABEL_BY_CALL_ID = ("SELECT seq FROM decisions INDEXED BY decisions_call WHERE workspace = ? AND session = ? "
                    "AND call_id = ? AND outcome IS NULL ORDER BY seq DESC LIMIT 1")
LABEL_BY_TOOL = ("SELECT seq FROM decisions INDEXED BY decisions_tool WHERE workspace = ? AND session = ? "
                 "AND chosen_tool = ? AND thread IS ? AND outcome IS NULL ORDER BY seq DESC LIMIT 1")
"""A tool result's decision, found through an index on the call id (or the tool), so labelling costs the same in
a session's first turn and its thousandth (through the session's own index it walked the session's rows)."""

_INSERTED = tuple(f.name for f in fields(CapturedDecision) if f.name != "seq")
"""The columns `insert` writes: every field of a decision but the store's own `seq`."""


class CaptureStore:
    """The gateway's writer of the store. Deleted rows are overwritten (`secure_delete`) and their pages
    returned to the file system (`auto_vacuum = INCREMENTAL`), so retention removes text from the disk,
    not only from queries."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._db = open_wal(path, SCHEMA, "capture store", ready=_migrate)
        # A commit writes the write-ahead log without an fsync (the WAL's own checkpoints sync it): a stopped or
        # crashed gateway loses nothing, a machine that loses power may lose the last captures, never the store.
        # An fsync per capture was about a third of the capture worker's CPU (BENCHMARKS.md, gateway speed).
        self._db.execute("PRAGMA synchronous=NORMAL")

    def close(self) -> None:
        self._db.close()

    def _tx(self) -> AbstractContextManager[None]:
        return transaction(self._db)

    def label(self, workspace: str, session: str, results: list[ToolResult], thread: str | None = None) -> None:
        """Attach each result's kind to the session's decision whose call produced it: by call id, else the
        latest unlabelled call of that tool in the same thread. A session is a (workspace, session) pair:
        two tenants may use the same session id."""
        with self._tx():
            self._label(workspace, session, results, thread)

    def insert(self, decision: CapturedDecision) -> None:
        """Store one captured decision (its JSON fields as text)."""
        with self._tx():
            self._insert(decision)

    def record(self, decision: CapturedDecision, results: list[ToolResult]) -> None:
        """The capture worker's write: `results` (the tool results the decision's request carried) label the
        session's earlier decisions, and the decision is stored, in one transaction: one commit per capture,
        and a capture is stored with its labels or not at all."""
        with self._tx():
            if results and decision.session:
                self._label(decision.workspace, decision.session, results, decision.thread)
            self._insert(decision)

    def _label(self, workspace: str, session: str, results: list[ToolResult], thread: str | None) -> None:
        for result in results:
            row = None
            if result.call_id is not None:
                row = self._db.execute(LABEL_BY_CALL_ID, (workspace, session, result.call_id)).fetchone()
            if row is None:
                row = self._db.execute(LABEL_BY_TOOL, (workspace, session, result.tool, thread)).fetchone()
            if row is not None:
                self._db.execute("UPDATE decisions SET outcome = ? WHERE seq = ?", (result.kind, row[0]))

    def _insert(self, decision: CapturedDecision) -> None:
        # Its fields one level deep (`asdict` deep-copies the whole request, then `json.dumps` copies it again).
        row = {name: getattr(decision, name) for name in _INSERTED}
        row["captured_at"] = stored_time(decision.captured_at)
        for column in _JSON_COLUMNS:
            row[column] = None if row[column] is None else json.dumps(row[column])
        names = ", ".join(row)
        self._db.execute(f"INSERT INTO decisions ({names}) VALUES ({', '.join('?' * len(row))})", tuple(row.values()))

    def prune(self, now: datetime, retention_days: float, max_rows: int) -> int:
        """Delete the decisions captured more than `retention_days` before `now`, then the oldest beyond
        `max_rows` (whole rows: `full` text goes with them); give the freed pages back to the file system
        and truncate the write-ahead log. Returns the rows deleted."""
        cut = stored_time(now - timedelta(days=retention_days))
        with self._tx():
            deleted = self._db.execute("DELETE FROM decisions WHERE captured_at < ?", (cut,)).rowcount
            deleted += self._db.execute("DELETE FROM decisions WHERE seq <= (SELECT seq FROM decisions ORDER BY "
                                        "seq DESC LIMIT 1 OFFSET ?)", (max_rows,)).rowcount
        if deleted:
            self._db.executescript("PRAGMA incremental_vacuum;")  # run to the end: each step frees one page
            self._db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        return deleted

    def held(self) -> Held:
        """Rows stored and bytes on disk (the file and its write-ahead log)."""
        rows = self._db.execute("SELECT COUNT(*) FROM decisions").fetchone()[0]
        wal = self.path.with_name(self.path.name + "-wal")
        return Held(rows, self.path.stat().st_size + (wal.stat().st_size if wal.exists() else 0))


def window_query(since: str | None, route: str | None, indexed: bool = True) -> tuple[str, tuple[str, ...]]:
    """The SQL of `read_decisions`: the window is an index range on the stored time (and route), so a
    read costs the rows in the window, not every row ever captured. A store copied off a gateway older
    than these indexes has none (`indexed=False`): the same rows, at the cost of a scan."""
    where, args = [], []
    if route is not None:
        where.append("route = ?")
        args.append(route)
    if since is not None:
        where.append("captured_at >= ?")
        args.append(since)
    # Named, as without statistics SQLite prefers walking the whole table in `seq` order to sorting a window.
    index = "" if not indexed else " INDEXED BY decisions_route_captured_at" if route is not None else \
        " INDEXED BY decisions_captured_at" if since is not None else ""
    return (f"SELECT * FROM decisions{index}" + (f" WHERE {' AND '.join(where)}" if where else "") + " ORDER BY seq",
            tuple(args))


def read_decisions(path: Path | str, since: str | None = None, route: str | None = None) -> list[CapturedDecision]:
    """Every stored decision (at or after `since`, an ISO time; of `route` when given), in capture order;
    read-only, and a missing store is a `StoreError` (never created). A `since` that is not an ISO time is
    a TimeError; a row that is not a decision (a column missing, not JSON, of the wrong shape, a bad time)
    is a StoreError naming the store and the row. The window is chosen in SQL on the stored time, which
    the gateway writes in `TIME_FORMAT`; a returned row's time in another format is a StoreError, as the
    window could not have been chosen right around it."""
    try:
        cut = None if since is None else stored_time(since)
    except TimeError:
        raise TimeError(f"--since {excerpt(since or '')!r} is not an ISO time (e.g. 2026-11-29T10:00:00Z)") from None
    db = connect_readonly(path)
    try:
        db.row_factory = sqlite3.Row
        indexes = {row[0] for row in db.execute("SELECT name FROM sqlite_master WHERE type = 'index'")}
        indexed = {"decisions_captured_at", "decisions_route_captured_at"} <= indexes
        rows = db.execute(*window_query(cut, route, indexed)).fetchall()
    except sqlite3.Error as exc:
        raise StoreError(f"{path}: cannot read this capture store: {exc}") from exc
    finally:
        db.close()
    decisions = [_decision_of(path, row) for row in rows]
    if cut is not None:
        for decision in decisions:
            if stored_time(decision.captured_at) != decision.captured_at:
                raise StoreError(f"{path}: decisions row {decision.seq}: captured_at is not in the store's time "
                                 f"format ({TIME_FORMAT}), so a time window cannot be read from this store")
    return decisions


_ROW = TypeAdapter(CapturedDecision)


def _decision_of(path: Path | str, row: sqlite3.Row) -> CapturedDecision:
    """One stored row as a decision; a row the gateway cannot have written is a `StoreError`
    naming the file and the row (the store is a file a user hands over)."""
    where = f"{path}: decisions row {row['seq'] if 'seq' in row.keys() else '?'}"  # noqa: SIM118
    known = {f.name for f in fields(CapturedDecision)}
    values = {k: row[k] for k in row.keys() if k in known}  # noqa: SIM118 (sqlite3.Row iterates values)
    if values.get("api") is None:
        values["api"] = "chat"
    if values.get("hashing") is None:
        values["hashing"] = RAW
    values["forced"] = bool(values.get("forced"))
    for column in _JSON_COLUMNS:
        if isinstance(values.get(column), str | bytes):
            values[column], problem = parse_problem(values[column])
            if problem is not None:
                raise StoreError(f"{where}: {column}: {problem}")
    try:
        decision = _ROW.validate_python(values)
        parse_instant(decision.captured_at)
    except ValidationError as exc:
        raise StoreError(f"{where}: {'; '.join(schema_errors(exc))}") from exc
    except TimeError as exc:
        raise StoreError(f"{where}: captured_at: not an ISO time") from exc
    return decision


class TimeError(WorkerTierError, ValueError):
    """A time that is not ISO 8601."""


def parse_instant(value: Any) -> datetime:
    """An ISO time (`Z` allowed); one without a zone is UTC. Anything else is a TimeError."""
    try:
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except (ValueError, TypeError, AttributeError):
        raise TimeError(f"{excerpt(str(value))!r} is not an ISO time (e.g. 2026-11-29T10:00:00Z)") from None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


