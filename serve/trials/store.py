"""Trials persisted in SQLite (WAL), next to the registry's tables in the gateway's state file.

A trial row holds its policy (as validated, with the file's sha256 and the gate policy's), its
current state as JSON and what the controller had counted of the current step at its last
look (`seen`, so a look after a restart adds only what is new); `trial_journal` holds every transition:
the event, the phase before and after, the actions and the evidence per signal at that moment.
Both are written in one transaction, so the journal never disagrees with the state.

A state that cannot be read back raises `TrialStateUnreadableError` — not only unparseable JSON but
any state its policy cannot run (`machine.problems`: a step past the policy's steps, a running
trial without a start time, another set of signals, counts that cannot be, a row whose phase,
route or candidate columns disagree with it, a newer format): the controller then takes the
candidate's weight to 0 rather than guess.
"""

from __future__ import annotations

import json
import re
import sqlite3
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, is_dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import ConfigDict, Field, ValidationError

from core.names import excerpt
from core.records import Strict
from core.sqlitedb import open_wal, transaction
from serve.trials.machine import Action, Counts, Event, Phase, SignalState, TrialState, problems
from serve.trials.sequential import DEFAULT_MIXTURE, EProcess
from serve.trials.trial_policy import TrialError, TrialPolicy

SCHEMA = """
CREATE TABLE IF NOT EXISTS trials (
    id TEXT PRIMARY KEY, route TEXT NOT NULL, candidate TEXT NOT NULL, policy_path TEXT NOT NULL,
    policy_sha256 TEXT NOT NULL, gate_policy_sha256 TEXT NOT NULL, policy TEXT NOT NULL, state TEXT NOT NULL,
    phase TEXT NOT NULL, seen TEXT NOT NULL, created_at TEXT NOT NULL, updated_at TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS trial_journal (
    id INTEGER PRIMARY KEY AUTOINCREMENT, trial TEXT NOT NULL, at TEXT NOT NULL, event TEXT NOT NULL,
    phase_before TEXT NOT NULL, phase_after TEXT NOT NULL, actions TEXT NOT NULL, evidence TEXT NOT NULL);
"""
_SHA256 = re.compile(r"[0-9a-f]{64}")
TERMINAL_PHASES = ("promoted", "held", "aborted", "expired")
UNREADABLE = "unreadable"  # the phase column of a trial whose state could not be read: it is over
ENDED = (*TERMINAL_PHASES, UNREADABLE)


class TrialStateUnreadableError(TrialError):
    """A stored trial whose state cannot be read back; its candidate must get no traffic."""


class FiniteRecord(Strict):
    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True, allow_inf_nan=False)


class CountsRecord(FiniteRecord):
    candidate_bad: int = Field(ge=0)
    candidate_exposure: int = Field(ge=0)
    control_bad: int = Field(ge=0)
    control_exposure: int = Field(ge=0)


class SignalRecord(FiniteRecord):
    log_terms: list[float]
    events: int = Field(ge=0)
    totals: CountsRecord


class StateRecord(FiniteRecord):
    """The stored form of a `TrialState` (format 1)."""

    format: Literal[1] = 1
    phase: Phase
    step: int = Field(ge=0)
    started_at: float | None
    step_started_at: float | None
    step_requests: tuple[int, int]
    suspended: bool
    signals: dict[str, SignalRecord]
    reason: str | None
    gate_at: float | None = None
    step_exposed: list[str] = []


def encode(state: TrialState) -> str:
    signals = {name: SignalRecord(log_terms=list(s.process.log_terms), events=s.process.events,
                                  totals=CountsRecord(**vars(s.totals)))
               for name, s in state.signals.items()}
    record = StateRecord(phase=state.phase, step=state.step, started_at=state.started_at,
                         step_started_at=state.step_started_at, step_requests=state.step_requests,
                         suspended=state.suspended, signals=signals, reason=state.reason, gate_at=state.gate_at,
                         step_exposed=sorted(state.step_exposed))
    return record.model_dump_json()


def decode(text: str, policy: TrialPolicy) -> TrialState:
    """The stored state, if its policy can run it; else `TrialStateUnreadableError` saying every reason."""
    try:
        record = StateRecord.model_validate_json(text)
        signals = {name: SignalState(EProcess(DEFAULT_MIXTURE, tuple(s.log_terms), s.events),
                                     Counts(**s.totals.model_dump()))
                   for name, s in record.signals.items()}
    except (ValidationError, ValueError) as exc:
        raise TrialStateUnreadableError(f"stored trial state cannot be read: {exc}") from exc
    state = TrialState(record.phase, record.step, record.started_at, record.step_started_at, record.step_requests,
                       record.suspended, signals, record.reason, record.gate_at, frozenset(record.step_exposed))
    found = problems(policy, state)
    if found:
        raise TrialStateUnreadableError(f"stored trial state cannot be used with its policy: {'; '.join(found)}")
    return state


def evidence(state: TrialState) -> dict[str, dict[str, Any]]:
    """Per signal: the e-value, bad events seen, and running totals per cohort (journal, status, metrics)."""
    return {name: {"e_value": s.process.e_value, "log_e": s.process.log_e, "events": s.process.events,
                   **vars(s.totals)}
            for name, s in state.signals.items()}


def describe(item: Event | Action) -> dict[str, Any]:
    return {"type": type(item).__name__,
            **{k: asdict(v) if is_dataclass(v) and not isinstance(v, type) else v for k, v in vars(item).items()
               if k != "signals"}}


@dataclass(frozen=True)
class StoredTrial:
    id: str
    route: str
    candidate: str
    policy: TrialPolicy
    policy_path: str
    policy_sha256: str
    gate_policy_sha256: str
    seen: str
    created_at: str
    state_json: str
    phase: str  # the row's phase column (what `running` selects on)

    def state(self) -> TrialState:
        state = decode(self.state_json, self.policy)
        if state.phase != self.phase:
            raise TrialStateUnreadableError(f"trial {self.id!r}: its row says {excerpt(self.phase)}, its state "
                                            f"{state.phase}")
        return state


class TrialStore:
    def __init__(self, path: Path) -> None:
        self._db = open_wal(path, SCHEMA, "trial store")
        self._db.row_factory = sqlite3.Row

    def close(self) -> None:
        self._db.close()

    def create(self, trial_id: str, policy: TrialPolicy, policy_path: str, policy_sha256: str,
               gate_policy_sha256: str, state: TrialState, at: str, note: Mapping[str, Any] | None = None) -> None:
        """A new trial; refused while another trial on the same route has not ended."""
        with transaction(self._db):
            running = self._db.execute(
                f"SELECT id FROM trials WHERE route = ? AND phase NOT IN ({', '.join('?' * len(ENDED))})",
                (policy.route, *ENDED)).fetchone()
            if running is not None:
                raise TrialError(f"route {policy.route!r} already runs trial {running['id']!r}")
            try:
                self._db.execute("INSERT INTO trials VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, '{}', ?, ?)",
                                 (trial_id, policy.route, policy.candidate, policy_path, policy_sha256,
                                  gate_policy_sha256, policy.model_dump_json(), encode(state), state.phase, at, at))
            except sqlite3.IntegrityError:
                raise TrialError(f"a trial named {trial_id!r} exists already; names are never reused") from None
            self._journal(trial_id, at, {"type": "Created", "policy_sha256": policy_sha256, **(note or {})}, state,
                          state, [])

    def record(self, trial_id: str, at: str, event: Event | Mapping[str, Any], before: TrialState, after: TrialState,
               actions: Sequence[Action], seen: str | None = None) -> None:
        """The new state and its journal line, in one transaction (before any action is carried out)."""
        with transaction(self._db):
            self._db.execute("UPDATE trials SET state = ?, phase = ?, updated_at = ?, seen = COALESCE(?, seen) "
                             "WHERE id = ?", (encode(after), after.phase, at, seen, trial_id))
            self._journal(trial_id, at, dict(event) if isinstance(event, Mapping) else describe(event), before,
                          after, actions)

    def note(self, trial_id: str, at: str, what: Mapping[str, Any], state: TrialState | None) -> None:
        """A journal line that changes no state (a recovery; `None`: the state could not be read)."""
        with transaction(self._db):
            self._journal(trial_id, at, dict(what), state, state, [])

    def _journal(self, trial_id: str, at: str, event: Mapping[str, Any], before: TrialState | None,
                 after: TrialState | None, actions: Sequence[Action]) -> None:
        self._db.execute("INSERT INTO trial_journal (trial, at, event, phase_before, phase_after, actions, evidence) "
                         "VALUES (?, ?, ?, ?, ?, ?, ?)",
                         (trial_id, at, json.dumps(event, sort_keys=True), before.phase if before else "unreadable",
                          after.phase if after else "unreadable", json.dumps([describe(a) for a in actions],
                                                                             sort_keys=True),
                          json.dumps(evidence(after) if after else {}, sort_keys=True)))

    def get(self, trial_id: str) -> StoredTrial:
        row = self._db.execute("SELECT * FROM trials WHERE id = ?", (trial_id,)).fetchone()
        if row is None:
            raise TrialError(f"no trial named {trial_id!r}")
        return self._stored(row)

    def _stored(self, row: sqlite3.Row) -> StoredTrial:
        try:
            policy = TrialPolicy.model_validate_json(row["policy"])
        except ValidationError as exc:
            raise TrialStateUnreadableError(f"trial {row['id']!r}: stored policy cannot be read: {exc}") from exc
        if (policy.route, policy.candidate) != (row["route"], row["candidate"]):
            raise TrialStateUnreadableError(f"trial {row['id']!r}: its row's route and candidate are not its policy's")
        if not all(_SHA256.fullmatch(str(row[k])) for k in ("policy_sha256", "gate_policy_sha256")):
            raise TrialStateUnreadableError(f"trial {row['id']!r}: a stored sha256 is not one")
        return StoredTrial(row["id"], row["route"], row["candidate"], policy, row["policy_path"],
                           row["policy_sha256"], row["gate_policy_sha256"], row["seen"], row["created_at"],
                           row["state"], row["phase"])

    def mark_unreadable(self, trial_id: str, at: str, error: str) -> None:
        """End a trial whose state cannot be read (the row keeps the state as found, for inspection)."""
        with transaction(self._db):
            self._db.execute("UPDATE trials SET phase = ?, updated_at = ? WHERE id = ?", (UNREADABLE, at, trial_id))
            self._journal(trial_id, at, {"type": "Unreadable", "error": error[:500], "candidate_weight": 0}, None,
                          None, [])

    def running(self) -> list[tuple[str, str, str]]:
        """(id, route, candidate) of every trial that has not ended, read without decoding its state."""
        marks = ", ".join("?" * len(ENDED))
        rows = self._db.execute(f"SELECT id, route, candidate FROM trials WHERE phase NOT IN ({marks}) ORDER BY "
                                "created_at", ENDED)
        return [(r["id"], r["route"], r["candidate"]) for r in rows]

    def latest(self) -> list[tuple[str, str, str, str, str]]:
        """(id, route, candidate, phase, updated_at) of each route's most recent trial."""
        rows = self._db.execute("SELECT id, route, candidate, phase, updated_at FROM trials t WHERE created_at = "
                                "(SELECT MAX(created_at) FROM trials WHERE route = t.route) ORDER BY route")
        return [(r["id"], r["route"], r["candidate"], r["phase"], r["updated_at"]) for r in rows]

    def trials(self) -> list[dict[str, Any]]:
        rows = self._db.execute("SELECT id, route, candidate, phase, policy_sha256, created_at, updated_at "
                                "FROM trials ORDER BY created_at")
        return [dict(r) for r in rows]

    def journal(self, trial_id: str) -> list[dict[str, Any]]:
        rows = self._db.execute("SELECT * FROM trial_journal WHERE trial = ? ORDER BY id", (trial_id,))
        return [{**dict(r), **{k: json.loads(r[k]) for k in ("event", "actions", "evidence")}} for r in rows]
