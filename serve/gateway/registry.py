"""The gateway's durable state in SQLite (WAL): adapter versions, routes, canaries, shadows,
the admin log, the per-request routing log and stored shadow comparisons.

Routing reads an immutable in-memory `State` snapshot; every admin change is one SQLite
transaction that also bumps a revision and appends to `admin_log`, after which the snapshot
is re-read. So a crash never leaves half a change, and a restarted gateway comes back with
exactly the routes, canaries, shadows and loaded adapters it had (the app re-applies the
loaded adapters to each engine).

Adapter names are never reused (DESIGN §2): a registered name stays in the table for good,
and its files are fingerprinted so a later load under the same name refuses changed weights.
"""

from __future__ import annotations

import json
import logging
import os
import secrets
import sqlite3
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager, suppress
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal, overload

from core.attestation import ADAPTER_WEIGHT_FILES, adapter_fingerprint
from core.jsonfile import JsonFileError, read_json_value
from core.names import excerpt
from core.sqlitedb import open_wal, transaction
from serve.errors import ServeError

AdapterState = Literal["registered", "loaded", "unloaded"]
StickyBy = Literal["workspace", "session"]
BASE = ":base"  # how the base model is stored, so renaming the served base keeps the routes
STORE = "gateway state store"
"""How errors name the state file (`gateway.state_db`): routes, adapters, the request and shadow logs (and the
trials, serve/trials/store.py)."""
_PRUNE_EVERY = 1000  # log rows written between two prunes
_FLUSH_AT = 1000  # buffered log rows that force a flush before the periodic one
_MAX_PENDING = 100_000  # log rows kept for a retry while the store fails; the oldest go first
# A log row's own values cannot be written (text that is not valid Unicode, an integer beyond 64 bits,
# a constraint): that row is dropped, the others are written. Any other sqlite3.Error is the store's.
_ROW_ERRORS = (ValueError, TypeError, OverflowError, sqlite3.InterfaceError, sqlite3.IntegrityError, sqlite3.DataError)
log = logging.getLogger(__name__)

SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS adapters (
    name TEXT PRIMARY KEY, path TEXT NOT NULL, rank INTEGER NOT NULL, base_model TEXT NOT NULL,
    fingerprint TEXT NOT NULL,
    state TEXT NOT NULL CHECK (state IN ('registered', 'loaded', 'unloaded')),
    registered_at TEXT NOT NULL, changed_at TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS routes (
    name TEXT PRIMARY KEY, production TEXT NOT NULL, previous TEXT, changed_at TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS canaries (
    route TEXT PRIMARY KEY, candidate TEXT NOT NULL, percent REAL NOT NULL, sticky_by TEXT NOT NULL,
    started_at TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS shadows (
    route TEXT PRIMARY KEY, candidate TEXT NOT NULL, sample_rate REAL NOT NULL, started_at TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS admin_log (
    revision INTEGER PRIMARY KEY, at TEXT NOT NULL, action TEXT NOT NULL, detail TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS requests (
    id INTEGER PRIMARY KEY AUTOINCREMENT, request_id TEXT NOT NULL, at TEXT NOT NULL, endpoint TEXT NOT NULL,
    requested TEXT, route TEXT, adapter TEXT, kind TEXT, sticky_key TEXT, upstream TEXT,
    status INTEGER NOT NULL, reason TEXT, duration_s REAL NOT NULL);
CREATE TABLE IF NOT EXISTS shadow_results (
    id INTEGER PRIMARY KEY AUTOINCREMENT, request_id TEXT NOT NULL, at TEXT NOT NULL, route TEXT NOT NULL,
    endpoint TEXT NOT NULL, production TEXT NOT NULL, candidate TEXT NOT NULL, request_sha256 TEXT NOT NULL,
    production_answer TEXT, shadow_answer TEXT, production_outcome TEXT NOT NULL, shadow_outcome TEXT NOT NULL,
    production_tool TEXT, shadow_tool TEXT, agreement TEXT NOT NULL, error TEXT, shadow_latency_s REAL);
CREATE INDEX IF NOT EXISTS requests_route_at ON requests (route, at);
CREATE INDEX IF NOT EXISTS shadow_results_route_at ON shadow_results (route, at);
"""
# A route's window of the logs: an index range on (route, at) — `at` is `now()`'s fixed-width UTC text, so
# it sorts as time — named, as without statistics SQLite prefers walking the table in `id` order.
_REQUESTS_SINCE = "SELECT * FROM requests INDEXED BY requests_route_at WHERE route = ? AND at >= ? ORDER BY id"
_SHADOWS_SINCE = ("SELECT id, request_id, at, route, endpoint, production, candidate, request_sha256, "
                  "production_outcome, shadow_outcome, production_tool, shadow_tool, agreement, error, "
                  "shadow_latency_s FROM shadow_results INDEXED BY shadow_results_route_at WHERE route = ? AND "
                  "at >= ? ORDER BY id")


def requests_in(db: sqlite3.Connection, route: str, since: str) -> list[dict[str, Any]]:
    """The route's logged requests at or after `since` (an ISO time in `now()`'s format), from a
    connection to a state store (the registry's own, or a read-only one in another thread)."""
    return [dict(r) for r in _rows(db, _REQUESTS_SINCE, (route, since))]


def shadow_results_in(db: sqlite3.Connection, route: str, since: str) -> list[dict[str, Any]]:
    """The route's stored shadow comparisons at or after `since` (without the answers' text)."""
    return [dict(r) for r in _rows(db, _SHADOWS_SINCE, (route, since))]


def _rows(db: sqlite3.Connection, query: str, args: tuple[str, ...]) -> list[sqlite3.Row]:
    cursor = db.cursor()
    cursor.row_factory = sqlite3.Row
    return cursor.execute(query, args).fetchall()


class AdapterError(ServeError, ValueError):
    """Adapter files that cannot be registered: outside the root, wrong base model, rank too high."""


class NameTakenError(ServeError, ValueError):
    """An adapter name that was registered before (names are never reused)."""


@dataclass(frozen=True)
class RequestRow:
    """One routed request as the `requests` table stores it (the canary split per request)."""

    request_id: str
    endpoint: str
    requested: str | None
    """The request's `model` as sent."""
    route: str | None
    adapter: str | None
    """The adapter version (or the base model's served name) that answered."""
    kind: str | None
    """How the router chose it: production, canary or pinned."""
    sticky_key: str | None
    """The workspace or session that kept a canary cohort sticky."""
    upstream: str | None
    status: int
    reason: str | None
    """Why a request failed (the `reason` label of the error metrics); None on success."""
    duration_s: float


@dataclass(frozen=True)
class ShadowRow:
    """One shadow comparison as the `shadow_results` table stores it."""

    request_id: str
    route: str
    endpoint: str
    production: str
    candidate: str
    request_sha256: str
    production_answer: str | None
    """The production answer as JSON text."""
    shadow_answer: str | None
    """The candidate's answer as JSON text."""
    production_outcome: str
    shadow_outcome: str
    production_tool: str | None
    shadow_tool: str | None
    agreement: str
    """How the two first calls compare (`core.scoring.CallAgreement`)."""
    error: str | None
    shadow_latency_s: float | None


@dataclass(frozen=True)
class AdapterFiles:
    path: Path
    rank: int
    base_model: str
    fingerprint: str


@dataclass(frozen=True)
class Adapter:
    name: str
    path: str
    rank: int
    base_model: str
    fingerprint: str
    state: AdapterState
    registered_at: str
    changed_at: str


@dataclass(frozen=True)
class Canary:
    candidate: str
    percent: float
    sticky_by: StickyBy
    started_at: str


@dataclass(frozen=True)
class Shadow:
    candidate: str
    sample_rate: float
    started_at: str


@dataclass(frozen=True)
class Route:
    name: str
    production: str  # an adapter name or the base model's served name
    previous: str | None  # the rollback target; None when there is none
    canary: Canary | None
    shadow: Shadow | None
    changed_at: str


@dataclass(frozen=True)
class State:
    revision: int
    base: str
    routes: Mapping[str, Route]
    adapters: Mapping[str, Adapter]

    def loaded(self) -> list[Adapter]:
        return [a for a in self.adapters.values() if a.state == "loaded"]

    def references(self, name: str) -> list[str]:
        """What keeps an adapter in use (so it may not be unloaded)."""
        uses = []
        for route in self.routes.values():
            if route.production == name:
                uses.append(f"production of route {route.name!r}")
            if route.previous == name:
                uses.append(f"rollback target of route {route.name!r}")
            if route.canary and route.canary.candidate == name:
                uses.append(f"canary of route {route.name!r}")
            if route.shadow and route.shadow.candidate == name:
                uses.append(f"shadow of route {route.name!r}")
        return uses

    def public(self) -> dict[str, Any]:
        return {"revision": self.revision, "base": self.base,
                "routes": {name: asdict(route) for name, route in self.routes.items()},
                "adapters": [asdict(a) for a in self.adapters.values()]}


def now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def files_outside(directory: Path, root: Path) -> list[str]:
    """Entries of an adapter directory (symlinks included, at any depth) that resolve outside `root`."""
    outside = []
    for base, dirs, files in os.walk(directory):
        for name in (*dirs, *files):
            entry = Path(base) / name
            if not entry.resolve().is_relative_to(root):
                outside.append(str(entry.relative_to(directory)))
    return sorted(outside)


def inspect_adapter(path: str, root: Path, base_model: str, max_rank: int) -> AdapterFiles:
    """Check a PEFT LoRA directory before it is registered; relative paths are read under `root`."""
    root = root.resolve()
    if "\0" in path:
        raise AdapterError(f"path {path!r} contains a NUL byte")
    given = Path(path)
    try:
        resolved = (given if given.is_absolute() else root / given).resolve()
    except (OSError, RuntimeError) as exc:  # RuntimeError: a symlink loop
        raise AdapterError(f"path {path!r} cannot be resolved: {exc}") from None
    if not resolved.is_relative_to(root):
        raise AdapterError(f"path {path!r} is outside the adapter root {root}")
    outside = files_outside(resolved, root)
    if outside:
        raise AdapterError(f"{resolved}: {', '.join(outside)} resolve outside the adapter root {root} "
                           "(the engine reads every file of the directory)")
    config_file = resolved / "adapter_config.json"
    if not config_file.exists():
        raise AdapterError(f"{config_file} does not exist")
    try:
        config = read_json_value(config_file)
    except JsonFileError as exc:
        raise AdapterError(str(exc)) from exc
    if not isinstance(config, dict):
        raise AdapterError(f"{config_file}: not a JSON object")
    if config.get("peft_type") != "LORA":
        raise AdapterError(f"{config_file}: peft_type is {config.get('peft_type')!r}, not 'LORA'")
    ranks = [config.get("r"), *dict(config.get("rank_pattern") or {}).values()]
    if not all(isinstance(r, int) and r > 0 for r in ranks):
        raise AdapterError(f"{config_file}: rank 'r' must be a positive integer")
    rank = max(ranks)
    if rank > max_rank:
        raise AdapterError(f"{config_file}: rank {rank} is above the engine's limit {max_rank}")
    trained_on = str(config.get("base_model_name_or_path") or "")
    if Path(trained_on).name != base_model:
        raise AdapterError(f"{config_file}: trained on {trained_on!r}, but the base model is {base_model!r}")
    if not any((resolved / name).is_file() for name in ADAPTER_WEIGHT_FILES):
        raise AdapterError(f"{resolved}: no {' or '.join(ADAPTER_WEIGHT_FILES)}")
    return AdapterFiles(resolved, rank, trained_on, adapter_fingerprint(resolved))


class LogWriteError(ServeError, RuntimeError):
    """The request/shadow log could not be written; its rows stay buffered for the next try."""


class Registry:
    """Durable gateway state. Single-writer: the app serialises admin changes with one lock."""

    def __init__(self, path: Path, routes: Sequence[str], base: str, keep_rows: int = 100_000,
                 on_drop: Callable[[str, str], None] | None = None):
        self._path = path
        self._on_drop = on_drop or (lambda _table, _reason: None)
        self._drop_logged: set[str] = set()
        self._base = base
        self._route_names = tuple(routes)
        self._keep = keep_rows
        self._pending: list[tuple[str, dict[str, Any]]] = []
        self._written = 0
        self._failing = False  # the last flush failed: only the periodic flush retries
        self._db = open_wal(path, SCHEMA, STORE, ready=self._ready)
        self.state = self._read()

    def _ready(self, db: sqlite3.Connection) -> None:
        """The store's settings and first rows, written as part of opening it (a full disk stops the start)."""
        db.row_factory = sqlite3.Row
        db.execute("PRAGMA synchronous=NORMAL")
        db.execute("PRAGMA secure_delete=ON")  # pruned shadow answers (tenant text) are overwritten
        with transaction(db):
            db.execute("INSERT OR IGNORE INTO meta VALUES ('revision', '0')")
            db.execute("INSERT OR IGNORE INTO meta VALUES ('prefix_cache_secret', ?)", (secrets.token_hex(32),))
            for name in self._route_names:
                db.execute("INSERT OR IGNORE INTO routes VALUES (?, ?, NULL, ?)", (name, BASE, now()))

    def prefix_cache_secret(self) -> bytes:
        """The key of the prefix cache's salts (serve/gateway/prefixcache.py): 256 random bits made once per
        state store and kept in it, so a restarted gateway gives each workspace the same salt (its cache)."""
        row = self._db.execute("SELECT value FROM meta WHERE key = 'prefix_cache_secret'").fetchone()
        return bytes.fromhex(row[0])

    def close(self) -> None:
        try:
            self.flush()
        finally:
            self._db.close()

    def _tx(self) -> AbstractContextManager[None]:
        return transaction(self._db)

    @contextmanager
    def _change(self, action: str, detail: Mapping[str, Any]) -> Iterator[None]:
        """One admin change: its writes, a new revision and its log line, all or nothing."""
        with self._tx():
            yield
            revision = self.state.revision + 1
            self._db.execute("UPDATE meta SET value = ? WHERE key = 'revision'", (str(revision),))
            self._db.execute("INSERT INTO admin_log VALUES (?, ?, ?, ?)",
                             (revision, now(), action, json.dumps(detail, sort_keys=True)))
        self.state = self._read()

    def _enc(self, version: str | None) -> str | None:
        return BASE if version == self._base else version

    @overload
    def _dec(self, stored: str) -> str: ...

    @overload
    def _dec(self, stored: None) -> None: ...

    def _dec(self, stored: str | None) -> str | None:
        return self._base if stored == BASE else stored

    def _read(self) -> State:
        db = self._db
        revision = int(db.execute("SELECT value FROM meta WHERE key = 'revision'").fetchone()[0])
        adapters = {r["name"]: Adapter(**dict(r)) for r in db.execute("SELECT * FROM adapters ORDER BY registered_at")}
        canaries = {r["route"]: Canary(r["candidate"], r["percent"], r["sticky_by"], r["started_at"])
                    for r in db.execute("SELECT * FROM canaries")}
        shadows = {r["route"]: Shadow(r["candidate"], r["sample_rate"], r["started_at"])
                   for r in db.execute("SELECT * FROM shadows")}
        rows = {r["name"]: r for r in db.execute("SELECT * FROM routes")}
        routes = {name: Route(name, self._dec(rows[name]["production"]), self._dec(rows[name]["previous"]),
                              canaries.get(name), shadows.get(name), rows[name]["changed_at"])
                  for name in self._route_names}
        return State(revision, self._base, routes, adapters)

    # --- admin changes -------------------------------------------------------------------

    def register(self, name: str, files: AdapterFiles) -> Adapter:
        """Record a new adapter version (state `registered`); a name used before raises `NameTakenError`."""
        at = now()
        try:
            with self._change("register", {"name": name, "path": str(files.path), "fingerprint": files.fingerprint}):
                self._db.execute("INSERT INTO adapters VALUES (?, ?, ?, ?, ?, 'registered', ?, ?)",
                                 (name, str(files.path), files.rank, files.base_model, files.fingerprint, at, at))
        except sqlite3.IntegrityError as exc:
            raise NameTakenError(f"adapter name {name!r} was registered before; names are never reused") from exc
        return self.state.adapters[name]

    def set_adapter_state(self, name: str, state: AdapterState) -> Adapter:
        """Record that the engines loaded or unloaded the version (one admin-log entry)."""
        with self._change(f"adapter_{state}", {"name": name}):
            self._db.execute("UPDATE adapters SET state = ?, changed_at = ? WHERE name = ?", (state, now(), name))
        return self.state.adapters[name]

    def set_production(self, route: str, version: str) -> Route:
        """Make `version` production; the old production becomes the rollback target. A canary or
        shadow of the new production version has nothing left to test and ends."""
        current = self.state.routes[route]
        if version == current.production:
            return current
        with self._change("set_production", {"route": route, "version": version, "previous": current.production}):
            self._write_route(route, version, current.production)
            self._db.execute("DELETE FROM canaries WHERE route = ? AND candidate = ?", (route, version))
            self._db.execute("DELETE FROM shadows WHERE route = ? AND candidate = ?", (route, version))
        return self.state.routes[route]

    def rollback(self, route: str) -> Route:
        """Swap production and the rollback target (a second rollback undoes the first). As with
        `set_production`, a canary or shadow of the version that becomes production ends."""
        current = self.state.routes[route]
        assert current.previous is not None
        with self._change("rollback", {"route": route, "from": current.production, "to": current.previous}):
            self._write_route(route, current.previous, current.production)
            self._db.execute("DELETE FROM canaries WHERE route = ? AND candidate = ?", (route, current.previous))
            self._db.execute("DELETE FROM shadows WHERE route = ? AND candidate = ?", (route, current.previous))
        return self.state.routes[route]

    def _write_route(self, route: str, production: str, previous: str | None) -> None:
        self._db.execute("UPDATE routes SET production = ?, previous = ?, changed_at = ? WHERE name = ?",
                         (self._enc(production), self._enc(previous), now(), route))

    def set_canary(self, route: str, candidate: str, percent: float, sticky_by: StickyBy) -> Route:
        """Start (or re-percent) the route's canary: `percent` of sticky keys go to `candidate`."""
        with self._change("canary_start", {"route": route, "candidate": candidate, "percent": percent,
                                           "sticky_by": sticky_by}):
            self._db.execute("INSERT OR REPLACE INTO canaries VALUES (?, ?, ?, ?, ?)",
                             (route, candidate, percent, sticky_by, now()))
        return self.state.routes[route]

    def stop_canary(self, route: str) -> Route:
        """End the route's canary; every request goes to production again."""
        with self._change("canary_stop", {"route": route}):
            self._db.execute("DELETE FROM canaries WHERE route = ?", (route,))
        return self.state.routes[route]

    def set_shadow(self, route: str, candidate: str, sample_rate: float) -> Route:
        """Start the route's shadow: a `sample_rate` share of production requests is copied to `candidate`."""
        with self._change("shadow_start", {"route": route, "candidate": candidate, "sample_rate": sample_rate}):
            self._db.execute("INSERT OR REPLACE INTO shadows VALUES (?, ?, ?, ?)",
                             (route, candidate, sample_rate, now()))
        return self.state.routes[route]

    def stop_shadow(self, route: str) -> Route:
        """End the route's shadow: no further production requests are copied."""
        with self._change("shadow_stop", {"route": route}):
            self._db.execute("DELETE FROM shadows WHERE route = ?", (route,))
        return self.state.routes[route]

    def admin_log(self, limit: int = 100) -> list[dict[str, Any]]:
        """The latest admin changes, newest first, each with its revision and detail."""
        rows = self._db.execute("SELECT * FROM admin_log ORDER BY revision DESC LIMIT ?", (limit,))
        return [{**dict(r), "detail": json.loads(r["detail"])} for r in rows]

    # --- request and shadow logs -----------------------------------------------------------
    # Log rows are buffered and written in one transaction per flush (the app flushes every
    # second and on shutdown; every read flushes first): one commit per request would cost
    # more than the rest of the gateway's work for that request. Routing state is never buffered.

    def record_request(self, row: RequestRow, at: str | None = None) -> None:
        """Log one routed request (the canary split per request), stamped `at` (default: now)."""
        self._buffer("requests", row, at)

    def record_shadow(self, row: ShadowRow) -> None:
        """Log one shadow comparison."""
        self._buffer("shadow_results", row)

    def _buffer(self, table: str, row: RequestRow | ShadowRow, at: str | None = None) -> None:
        self._pending.append((table, {"at": at or now(), **vars(row)}))
        if len(self._pending) >= _FLUSH_AT and not self._failing:
            self.flush_quietly()

    def flush_quietly(self) -> None:
        """Flush where a failure must not reach the caller (a request, a read, before another connection
        reads the logs): the periodic flush reports it, and the rows stay buffered."""
        with suppress(LogWriteError):
            self.flush()

    def flush(self) -> None:
        """Write buffered log rows; rows beyond `keep_rows` per table are pruned now and then.

        A row that cannot be written (text that is not valid Unicode, a number SQLite cannot hold)
        is dropped alone: counted through `on_drop(table, "unwritable")`, logged once per table,
        never blocking the rows after it. On a store error (disk full, table gone) every row stays
        buffered for the next try (beyond `_MAX_PENDING` the oldest are given up, counted as
        `overflow`) and LogWriteError says why.
        """
        if not self._pending:
            return
        pending = self._pending
        dropped: list[tuple[str, Exception]] = []
        try:
            with self._tx():
                for table, row in pending:
                    try:
                        self._db.execute(f"INSERT INTO {table} ({', '.join(row)}) VALUES ({', '.join('?' * len(row))})",
                                         tuple(row.values()))
                    except _ROW_ERRORS as exc:  # this row's values; the statement left no trace
                        dropped.append((table, exc))
        except sqlite3.Error as exc:
            self._failing = True
            overflow = len(pending) - _MAX_PENDING
            if overflow > 0:
                for table, _ in pending[:overflow]:
                    self._on_drop(table, "overflow")
                del pending[:overflow]
            raise LogWriteError(f"{self._path}: cannot write the request log ({len(pending)} rows kept for the "
                                f"next try): {exc}") from exc
        for table, error in dropped:
            self._dropped(table, error)
        self._pending, self._failing = [], False
        self._written += len(pending) - len(dropped)
        if self._keep and self._written >= _PRUNE_EVERY:
            self._written = 0
            with self._tx():
                for name in ("requests", "shadow_results"):
                    self._db.execute(f"DELETE FROM {name} WHERE id <= (SELECT MAX(id) FROM {name}) - ?", (self._keep,))

    def _dropped(self, table: str, error: Exception) -> None:
        self._on_drop(table, "unwritable")
        if table not in self._drop_logged:
            self._drop_logged.add(table)
            log.warning("%s: a %s row could not be written and was dropped (%s: %s); further drops are only "
                        "counted (worker_gateway_log_rows_dropped_total)", self._path, table, type(error).__name__,
                        excerpt(str(error), 200))

    def requests(self, limit: int = 100) -> list[dict[str, Any]]:
        """The latest routed requests, newest first."""
        self.flush_quietly()
        return [dict(r) for r in self._db.execute("SELECT * FROM requests ORDER BY id DESC LIMIT ?", (limit,))]

    def requests_since(self, route: str, since: str) -> list[dict[str, Any]]:
        """The route's logged requests at or after `since` (an ISO time in `now()`'s format)."""
        self.flush_quietly()
        return requests_in(self._db, route, since)

    def shadow_results_since(self, route: str, since: str) -> list[dict[str, Any]]:
        """The route's stored shadow comparisons at or after `since` (without the answers' text)."""
        self.flush_quietly()
        return shadow_results_in(self._db, route, since)

    @property
    def path(self) -> Path:
        return self._path

    def shadow_results(self, route: str | None = None, limit: int = 100) -> list[dict[str, Any]]:
        """The latest shadow comparisons (of one route, or all), newest first, answers included."""
        self.flush_quietly()
        query = "SELECT * FROM shadow_results" + (" WHERE route = ?" if route else "") + " ORDER BY id DESC LIMIT ?"
        args = (route, limit) if route else (limit,)
        rows = [dict(r) for r in self._db.execute(query, args)]
        for row in rows:
            for key in ("production_answer", "shadow_answer"):
                row[key] = json.loads(row[key]) if row[key] is not None else None
        return rows

    def shadow_summary(self) -> dict[str, dict[str, int]]:
        """Stored comparisons per `route/candidate`, counted by agreement level."""
        self.flush_quietly()
        summary: dict[str, dict[str, int]] = {}
        rows = self._db.execute("SELECT route, candidate, agreement, COUNT(*) AS n FROM shadow_results "
                                "GROUP BY route, candidate, agreement")
        for r in rows:
            summary.setdefault(f"{r['route']}/{r['candidate']}", {})[r["agreement"]] = r["n"]
        return summary
