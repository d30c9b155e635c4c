"""Outcome ledger: which runs, results, comparisons and verdicts depended on which rule (004).

Every replay result keeps the rule ids its request carried, under its run's `run_id` (the run's
directory beside it); comparisons and verdicts name the rule ids they depended on (a comparison's
are derived from the results it compared, a verdict's include those of the comparisons it rests
on). So one query answers "what depended on lc:x?", and disputing lc:x marks all of it as needing
a re-run. Nothing is deleted: a dispute, and a rule restored after review (`undispute`), are rows
of `rule_reviews`; "disputed" is the latest of them, and "needs re-run" is computed from it, so the
record of what happened survives both.

Rule ids are scoped by workspace (`lc:anchor-placement` in ws-a is not the one in ws-b);
queries and disputes take an optional workspace, and without one cover every workspace.

SQLite in WAL mode so `compare`/`report` can read while a run ingests.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

from core.records import ResultRecord
from core.sqlitedb import StoreError
from replay.errors import ReplayError

_SCHEMA = """
CREATE TABLE IF NOT EXISTS results (
    run_id TEXT NOT NULL, arm TEXT NOT NULL, decision_id TEXT NOT NULL,
    workspace TEXT NOT NULL, stratum TEXT NOT NULL, model TEXT NOT NULL, memory TEXT NOT NULL,
    correct INTEGER, outcome TEXT NOT NULL,
    PRIMARY KEY (run_id, arm, decision_id));
CREATE TABLE IF NOT EXISTS result_rules (
    run_id TEXT NOT NULL, arm TEXT NOT NULL, decision_id TEXT NOT NULL,
    workspace TEXT NOT NULL, rule_id TEXT NOT NULL,
    PRIMARY KEY (run_id, arm, decision_id, rule_id));
CREATE INDEX IF NOT EXISTS result_rules_by_rule ON result_rules (rule_id, workspace);
CREATE TABLE IF NOT EXISTS comparisons (
    id INTEGER PRIMARY KEY, run_id TEXT NOT NULL, baseline TEXT NOT NULL, candidate TEXT NOT NULL,
    summary TEXT NOT NULL, recorded_at TEXT NOT NULL,
    UNIQUE (run_id, baseline, candidate));
CREATE TABLE IF NOT EXISTS comparison_rules (
    comparison_id INTEGER NOT NULL REFERENCES comparisons (id),
    workspace TEXT NOT NULL, rule_id TEXT NOT NULL,
    PRIMARY KEY (comparison_id, workspace, rule_id));
CREATE TABLE IF NOT EXISTS verdicts (
    id INTEGER PRIMARY KEY, run_id TEXT NOT NULL, kind TEXT NOT NULL, subject TEXT NOT NULL,
    verdict TEXT NOT NULL, evidence TEXT NOT NULL, recorded_at TEXT NOT NULL,
    UNIQUE (run_id, kind, subject));
CREATE TABLE IF NOT EXISTS verdict_rules (
    verdict_id INTEGER NOT NULL REFERENCES verdicts (id),
    workspace TEXT NOT NULL, rule_id TEXT NOT NULL,
    PRIMARY KEY (verdict_id, workspace, rule_id));
CREATE TABLE IF NOT EXISTS runs (
    run_id TEXT PRIMARY KEY, run_dir TEXT NOT NULL, results_sha256 TEXT NOT NULL, recorded_at TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS rule_reviews (
    id INTEGER PRIMARY KEY, rule_id TEXT NOT NULL, workspace TEXT NOT NULL,
    action TEXT NOT NULL CHECK (action IN ('dispute', 'undispute')), reason TEXT NOT NULL, at TEXT NOT NULL);
CREATE INDEX IF NOT EXISTS rule_reviews_by_rule ON rule_reviews (rule_id, workspace);
CREATE VIEW IF NOT EXISTS open_disputes AS
    SELECT r.rule_id, r.workspace, r.reason, r.at FROM rule_reviews r
    WHERE r.action = 'dispute'
      AND r.id = (SELECT MAX(l.id) FROM rule_reviews l WHERE l.rule_id = r.rule_id AND l.workspace = r.workspace);
"""
# "" in a workspace column means "every workspace" (SQLite keys cannot hold NULL reliably).
ANY_WORKSPACE = ""
# True when a (workspace, rule_id) reference of alias `ref` is disputed.
_DISPUTED = ("EXISTS (SELECT 1 FROM open_disputes d WHERE d.rule_id = {ref}.rule_id "
             "AND d.workspace IN ('', {ref}.workspace))")


class LedgerError(ReplayError, ValueError):
    """A ledger input that cannot be recorded (with file:line where a file is involved)."""


@dataclass(frozen=True)
class RuleRef:
    """A rule as used somewhere: its id in one workspace."""

    workspace: str
    rule_id: str


@dataclass(frozen=True)
class Dispute:
    """A rule disputed now (no `undispute` since): `workspace` None means in every workspace."""

    rule_id: str
    workspace: str | None
    reason: str
    disputed_at: datetime

    @property
    def ref(self) -> str | RuleRef:
        """What it taints, as `compare` takes it: a bare id in every workspace, a RuleRef in its own."""
        return self.rule_id if self.workspace is None else RuleRef(self.workspace, self.rule_id)


@dataclass(frozen=True)
class Review:
    """One dispute of a rule, or its restoration after review; the ledger keeps every one."""

    rule_id: str
    workspace: str | None
    action: Literal["dispute", "undispute"]
    reason: str
    at: datetime


@dataclass(frozen=True)
class ResultUse:
    run_id: str
    arm: str
    decision_id: str
    workspace: str
    memory: str
    correct: bool | None
    outcome: str
    needs_rerun: bool


@dataclass(frozen=True)
class ComparisonUse:
    id: int
    run_id: str
    baseline: str
    candidate: str
    summary: Mapping[str, Any]
    needs_rerun: bool


@dataclass(frozen=True)
class VerdictUse:
    id: int
    run_id: str
    kind: str
    subject: str
    verdict: str
    evidence: Mapping[str, Any]
    needs_rerun: bool


@dataclass(frozen=True)
class Trace:
    """Everything that used one rule, whether it is disputed now, and its disputes and restorations."""

    rule_id: str
    workspace: str | None
    disputes: tuple[Dispute, ...]
    reviews: tuple[Review, ...]
    runs: Mapping[str, str]
    """run_id → the run directory, of every run in the trace that the ledger knows."""
    results: tuple[ResultUse, ...]
    comparisons: tuple[ComparisonUse, ...]
    verdicts: tuple[VerdictUse, ...]

    @property
    def needs_rerun(self) -> int:
        """How many items are marked for a re-run."""
        items: tuple[ResultUse | ComparisonUse | VerdictUse, ...] = (*self.results, *self.comparisons, *self.verdicts)
        return sum(1 for item in items if item.needs_rerun)

    def format(self) -> str:
        """The `worker-replay trace` / `dispute` output: one line per item, re-runs marked."""
        scope = f" in {self.workspace}" if self.workspace else ""
        lines = [f"{self.rule_id}{scope}: {len(self.results)} result(s), {len(self.comparisons)} comparison(s), "
                 f"{len(self.verdicts)} verdict(s); {self.needs_rerun} need a re-run"]
        lines += [f"{'disputed' if r.action == 'dispute' else 'restored'} {r.at:%Y-%m-%d %H:%M}"
                  f"{f' in {r.workspace}' if r.workspace else ''}: {r.reason}" for r in self.reviews]
        for run_id in sorted({r.run_id for r in self.results}):
            own = [r for r in self.results if r.run_id == run_id]
            arms = ", ".join(f"{arm} ({sum(r.arm == arm for r in own)})" for arm in sorted({r.arm for r in own}))
            where = f" ({self.runs[run_id]})" if run_id in self.runs else ""
            lines.append(f"run {run_id}{where}: {len(own)} result(s) in arm(s) {arms}"
                         f"{_rerun_mark(any(r.needs_rerun for r in own))}")
        lines += [f"comparison #{c.id} {c.run_id}: {c.baseline} vs {c.candidate}{_rerun_mark(c.needs_rerun)}"
                  for c in self.comparisons]
        lines += [f"verdict #{v.id} {v.run_id}: {v.kind} {v.subject} -> {v.verdict}{_rerun_mark(v.needs_rerun)}"
                  for v in self.verdicts]
        return "\n".join(lines)


class Ledger:
    """One SQLite ledger file. Use as a context manager, or call `close()`."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._db = sqlite3.connect(self.path, timeout=30.0)
            self._db.row_factory = sqlite3.Row
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA foreign_keys=ON")
            with self._db:
                self._db.executescript(_SCHEMA)
            self._migrate()
        except (OSError, sqlite3.Error) as exc:
            raise StoreError(f"{self.path}: cannot open the provenance ledger: {exc}") from exc

    def _migrate(self) -> None:
        """A ledger written before `undispute` kept one `disputes` row per rule: moved into `rule_reviews`, once."""
        with self._tx() as db:
            if db.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'disputes'").fetchone():
                db.execute("INSERT INTO rule_reviews (rule_id, workspace, action, reason, at) SELECT rule_id, "
                           "workspace, 'dispute', reason, disputed_at FROM disputes ORDER BY disputed_at")
                db.execute("DROP TABLE disputes")

    def __enter__(self) -> Ledger:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._db.close()

    @contextmanager
    def _tx(self) -> Iterator[sqlite3.Connection]:
        with self._db:
            yield self._db

    # ── recording ────────────────────────────────────────────────────────────

    def ingest_results(self, run_id: str, records: Iterable[ResultRecord]) -> int:
        """Record a run's results; re-ingesting replaces rows instead of duplicating them.

        Returns how many records were ingested.
        """
        with self._tx() as db:
            return _ingest(db, run_id, records)

    def knows_run(self, run_id: str, results_sha256: str) -> bool:
        """Whether this run's results, as sealed with this digest, are already ingested."""
        row = self._db.execute("SELECT 1 FROM runs WHERE run_id = ? AND results_sha256 = ?",
                               (run_id, results_sha256)).fetchone()
        return row is not None

    def ingest_run(self, run_id: str, run_dir: str | Path, results_sha256: str,
                   records: Iterable[ResultRecord]) -> int:
        """Record a sealed run (its directory and results' digest) and its results, in one transaction."""
        with self._tx() as db:
            count = _ingest(db, run_id, records)
            db.execute("INSERT OR REPLACE INTO runs VALUES (?, ?, ?, ?)",
                       (run_id, str(run_dir), results_sha256, _now()))
        return count

    def rules_of(self, run_id: str, arms: Iterable[str]) -> frozenset[RuleRef]:
        """The rules that a run's results of these arms carried."""
        arm_list = list(arms)
        rows = self._db.execute(
            "SELECT DISTINCT workspace, rule_id FROM result_rules "
            f"WHERE run_id = ? AND arm IN ({', '.join('?' * len(arm_list))})", (run_id, *arm_list),
        ).fetchall()
        return frozenset(RuleRef(r["workspace"], r["rule_id"]) for r in rows)

    def record_comparison(
        self, run_id: str, baseline: str, candidate: str, summary: Mapping[str, Any],
        rules: Iterable[RuleRef] | None = None,
    ) -> int:
        """Record a paired comparison; its rules default to those its arms' results carried.

        Recording the same (run, baseline, candidate) again replaces it. Returns its id.
        """
        if rules is None:
            rules = self.rules_of(run_id, (baseline, candidate))
        with self._tx() as db:
            comparison_id: int = db.execute(
                "INSERT INTO comparisons (run_id, baseline, candidate, summary, recorded_at) VALUES (?, ?, ?, ?, ?) "
                "ON CONFLICT (run_id, baseline, candidate) DO UPDATE SET summary = excluded.summary, "
                "recorded_at = excluded.recorded_at RETURNING id",
                (run_id, baseline, candidate, _json(summary), _now()),
            ).fetchone()[0]
            db.execute("DELETE FROM comparison_rules WHERE comparison_id = ?", (comparison_id,))
            db.executemany(
                "INSERT OR IGNORE INTO comparison_rules VALUES (?, ?, ?)",
                [(comparison_id, r.workspace, r.rule_id) for r in rules],
            )
        return comparison_id

    def record_verdict(
        self, run_id: str, kind: str, subject: str, verdict: str, evidence: Mapping[str, Any],
        rules: Iterable[RuleRef] = (), comparison_ids: Iterable[int] = (),
    ) -> int:
        """Record a gate or lesson verdict (`kind` e.g. "gate", "lesson").

        It depends on `rules` and on every rule of the comparisons it rests on. Recording the
        same (run, kind, subject) again replaces it. Returns its id.
        """
        refs = set(rules)
        with self._tx() as db:
            for comparison_id in comparison_ids:
                if db.execute("SELECT 1 FROM comparisons WHERE id = ?", (comparison_id,)).fetchone() is None:
                    raise LedgerError(f"verdict {kind}:{subject} rests on unknown comparison {comparison_id}")
                rows = db.execute("SELECT workspace, rule_id FROM comparison_rules WHERE comparison_id = ?",
                                  (comparison_id,))
                refs |= {RuleRef(r["workspace"], r["rule_id"]) for r in rows}
            verdict_id: int = db.execute(
                "INSERT INTO verdicts (run_id, kind, subject, verdict, evidence, recorded_at) "
                "VALUES (?, ?, ?, ?, ?, ?) "
                "ON CONFLICT (run_id, kind, subject) DO UPDATE SET verdict = excluded.verdict, "
                "evidence = excluded.evidence, recorded_at = excluded.recorded_at RETURNING id",
                (run_id, kind, subject, verdict, _json(evidence), _now()),
            ).fetchone()[0]
            db.execute("DELETE FROM verdict_rules WHERE verdict_id = ?", (verdict_id,))
            db.executemany(
                "INSERT OR IGNORE INTO verdict_rules VALUES (?, ?, ?)",
                [(verdict_id, r.workspace, r.rule_id) for r in refs],
            )
        return verdict_id

    # ── provenance queries ───────────────────────────────────────────────────

    def trace(self, rule_id: str, workspace: str | None = None) -> Trace:
        """Every result, comparison and verdict that used `rule_id` (in `workspace`, or any)."""
        where, args = _rule_filter("u", rule_id, workspace)
        # An item needs a re-run when ANY rule it used is disputed, not only the traced one.
        results = self._db.execute(
            "SELECT DISTINCT r.*, EXISTS (SELECT 1 FROM result_rules x WHERE x.run_id = r.run_id AND x.arm = r.arm "
            f"AND x.decision_id = r.decision_id AND {_DISPUTED.format(ref='x')}) AS tainted "
            "FROM result_rules u JOIN results r USING (run_id, arm, decision_id) "
            f"WHERE {where} ORDER BY r.run_id, r.arm, r.decision_id", args,
        ).fetchall()
        comparisons = self._db.execute(
            "SELECT DISTINCT c.*, EXISTS (SELECT 1 FROM comparison_rules x WHERE x.comparison_id = c.id "
            f"AND {_DISPUTED.format(ref='x')}) AS tainted "
            f"FROM comparison_rules u JOIN comparisons c ON c.id = u.comparison_id WHERE {where} ORDER BY c.id", args,
        ).fetchall()
        verdicts = self._db.execute(
            "SELECT DISTINCT v.*, EXISTS (SELECT 1 FROM verdict_rules x WHERE x.verdict_id = v.id "
            f"AND {_DISPUTED.format(ref='x')}) AS tainted "
            f"FROM verdict_rules u JOIN verdicts v ON v.id = u.verdict_id WHERE {where} ORDER BY v.id", args,
        ).fetchall()
        run_ids = {r["run_id"] for r in results}
        runs = {row["run_id"]: row["run_dir"] for row in self._db.execute(
            f"SELECT run_id, run_dir FROM runs WHERE run_id IN ({', '.join('?' * len(run_ids))})", sorted(run_ids))}
        reviews = tuple(self._reviews(rule_id, workspace))
        return Trace(
            rule_id=rule_id,
            workspace=workspace,
            disputes=tuple(d for d in self.disputes() if d.rule_id == rule_id
                           and (workspace is None or d.workspace in (None, workspace))),
            reviews=reviews,
            runs=runs,
            results=tuple(
                ResultUse(r["run_id"], r["arm"], r["decision_id"], r["workspace"], r["memory"],
                          None if r["correct"] is None else bool(r["correct"]), r["outcome"], bool(r["tainted"]))
                for r in results
            ),
            comparisons=tuple(
                ComparisonUse(c["id"], c["run_id"], c["baseline"], c["candidate"], json.loads(c["summary"]),
                              bool(c["tainted"]))
                for c in comparisons
            ),
            verdicts=tuple(
                VerdictUse(v["id"], v["run_id"], v["kind"], v["subject"], v["verdict"], json.loads(v["evidence"]),
                           bool(v["tainted"]))
                for v in verdicts
            ),
        )

    def dispute(self, rule_id: str, reason: str, workspace: str | None = None, at: datetime | None = None) -> Trace:
        """Mark `rule_id` disputed; everything that used it now needs a re-run. Returns its trace."""
        self._review(rule_id, workspace, "dispute", reason, at)
        return self.trace(rule_id, workspace)

    def undispute(self, rule_id: str, reason: str, workspace: str | None = None, at: datetime | None = None) -> Trace:
        """Restore a disputed rule after review: a row beside its dispute, which stays in the history. Only the
        dispute made with the same scope (`workspace`, or every workspace) is restored. Returns its trace."""
        scope = workspace or ANY_WORKSPACE
        if not any(d.rule_id == rule_id and (d.workspace or ANY_WORKSPACE) == scope for d in self.disputes()):
            others = sorted(f"--workspace {d.workspace}" if d.workspace else "every workspace (no --workspace)"
                            for d in self.disputes() if d.rule_id == rule_id)
            where = f" in {workspace} alone" if workspace else " in every workspace"
            hint = f"; its dispute to restore: {', '.join(others)}" if others else ""
            raise LedgerError(f"{rule_id} is not disputed{where}{hint}")
        self._review(rule_id, workspace, "undispute", reason, at)
        return self.trace(rule_id, workspace)

    def disputes(self) -> tuple[Dispute, ...]:
        """Every rule disputed now, oldest dispute first."""
        rows = self._db.execute("SELECT * FROM open_disputes ORDER BY at, rule_id, workspace")
        return tuple(Dispute(r["rule_id"], r["workspace"] or None, r["reason"], datetime.fromisoformat(r["at"]))
                     for r in rows)

    def _review(self, rule_id: str, workspace: str | None, action: Literal["dispute", "undispute"], reason: str,
                at: datetime | None) -> None:
        if not reason.strip():
            raise LedgerError(f"{'disputing' if action == 'dispute' else 'restoring'} {rule_id} needs a reason")
        with self._tx() as db:
            db.execute("INSERT INTO rule_reviews (rule_id, workspace, action, reason, at) VALUES (?, ?, ?, ?, ?)",
                       (rule_id, workspace or ANY_WORKSPACE, action, reason.strip(),
                        (at or datetime.now(UTC)).isoformat()))

    def _reviews(self, rule_id: str, workspace: str | None) -> Iterator[Review]:
        rows = self._db.execute("SELECT * FROM rule_reviews WHERE rule_id = ? ORDER BY id", (rule_id,))
        for row in rows:
            if workspace is None or row["workspace"] in (ANY_WORKSPACE, workspace):
                yield Review(row["rule_id"], row["workspace"] or None, row["action"], row["reason"],
                             datetime.fromisoformat(row["at"]))


def _ingest(db: sqlite3.Connection, run_id: str, records: Iterable[ResultRecord]) -> int:
    count = 0
    for record in records:
        key = (run_id, record.arm, record.decision_id)
        correct = record.score.joint_correct
        db.execute(
            "INSERT OR REPLACE INTO results VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (*key, record.workspace, record.stratum, record.model, record.memory,
             None if correct is None else int(correct), record.parsed.outcome.value),
        )
        db.execute("DELETE FROM result_rules WHERE run_id = ? AND arm = ? AND decision_id = ?", key)
        db.executemany(
            "INSERT OR IGNORE INTO result_rules VALUES (?, ?, ?, ?, ?)",
            [(*key, record.workspace, rule_id) for rule_id in record.injected_rule_ids],
        )
        count += 1
    return count


def _rerun_mark(needs_rerun: bool) -> str:
    return "  NEEDS RE-RUN" if needs_rerun else ""


def _rule_filter(alias: str, rule_id: str, workspace: str | None) -> tuple[str, list[str]]:
    if workspace is None:
        return f"{alias}.rule_id = ?", [rule_id]
    return f"{alias}.rule_id = ? AND {alias}.workspace = ?", [rule_id, workspace]


def _json(value: Mapping[str, Any]) -> str:
    return json.dumps(value, sort_keys=True, default=str)


def _now() -> str:
    return datetime.now(UTC).isoformat()
