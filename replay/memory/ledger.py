"""Outcome ledger: which results, comparisons and verdicts depended on which rule (004).

Every replay result keeps the rule ids its request carried; comparisons and verdicts name
the rule ids they depended on (a comparison's are derived from the results it compared,
a verdict's include those of the comparisons it rests on). So one query answers "what
depended on lc:x?", and disputing lc:x marks all of it as needing a re-run. Nothing is
deleted: a dispute is a row, and "needs re-run" is computed from it, so the record of
what happened survives the dispute.

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
from typing import Any

from core.jsonfile import read_jsonl
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
CREATE TABLE IF NOT EXISTS disputes (
    rule_id TEXT NOT NULL, workspace TEXT NOT NULL, reason TEXT NOT NULL, disputed_at TEXT NOT NULL,
    PRIMARY KEY (rule_id, workspace));
"""
# "" in a workspace column means "every workspace" (SQLite keys cannot hold NULL reliably).
ANY_WORKSPACE = ""
# True when a (workspace, rule_id) reference of alias `ref` is disputed.
_DISPUTED = "EXISTS (SELECT 1 FROM disputes d WHERE d.rule_id = {ref}.rule_id AND d.workspace IN ('', {ref}.workspace))"


class LedgerError(ReplayError, ValueError):
    """A ledger input that cannot be recorded (with file:line where a file is involved)."""


@dataclass(frozen=True)
class RuleRef:
    """A rule as used somewhere: its id in one workspace."""

    workspace: str
    rule_id: str


@dataclass(frozen=True)
class Dispute:
    rule_id: str
    workspace: str | None
    reason: str
    disputed_at: datetime


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
    """Everything that used one rule, and whether it is disputed."""

    rule_id: str
    workspace: str | None
    disputes: tuple[Dispute, ...]
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
        lines += [f"disputed {d.disputed_at:%Y-%m-%d %H:%M}: {d.reason}" for d in self.disputes]
        runs = sorted({r.run_id for r in self.results})
        for run_id in runs:
            own = [r for r in self.results if r.run_id == run_id]
            arms = sorted({r.arm for r in own})
            lines.append(f"run {run_id}: {len(own)} result(s) in arm(s) {', '.join(arms)}"
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
        except (OSError, sqlite3.Error) as exc:
            raise StoreError(f"{self.path}: cannot open the provenance ledger: {exc}") from exc

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
        count = 0
        with self._tx() as db:
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

    def ingest_jsonl(self, run_id: str, path: str | Path) -> int:
        """Ingest a run's `results.jsonl`; a bad line is an error naming file:line."""
        path = Path(path)
        records = []
        for line in read_jsonl(path, ResultRecord, "a result"):
            if line.value is None:
                raise LedgerError(f"{path}:{line.number}: not a result record: {line.problems[0]}")
            records.append(line.value)
        return self.ingest_results(run_id, records)

    def record_comparison(
        self, run_id: str, baseline: str, candidate: str, summary: Mapping[str, Any],
        rules: Iterable[RuleRef] | None = None,
    ) -> int:
        """Record a paired comparison; its rules default to those its arms' results carried.

        Recording the same (run, baseline, candidate) again replaces it. Returns its id.
        """
        with self._tx() as db:
            if rules is None:
                rows = db.execute(
                    "SELECT DISTINCT workspace, rule_id FROM result_rules WHERE run_id = ? AND arm IN (?, ?)",
                    (run_id, baseline, candidate),
                ).fetchall()
                rules = [RuleRef(r["workspace"], r["rule_id"]) for r in rows]
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
        return Trace(
            rule_id=rule_id,
            workspace=workspace,
            disputes=tuple(self._disputes(rule_id, workspace)),
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
        if not reason.strip():
            raise LedgerError(f"disputing {rule_id} needs a reason")
        with self._tx() as db:
            db.execute(
                "INSERT OR REPLACE INTO disputes VALUES (?, ?, ?, ?)",
                (rule_id, workspace or ANY_WORKSPACE, reason.strip(), (at or datetime.now(UTC)).isoformat()),
            )
        return self.trace(rule_id, workspace)

    def tainted_rule_ids(self) -> frozenset[str]:
        """Every disputed rule id (in any workspace)."""
        return frozenset(r[0] for r in self._db.execute("SELECT DISTINCT rule_id FROM disputes"))

    def is_tainted(self, rule_ids: Iterable[str], workspace: str | None = None) -> bool:
        """Whether any of these rule ids is disputed (in `workspace`, or in any workspace if None)."""
        disputes = self._db.execute("SELECT rule_id, workspace FROM disputes").fetchall()
        wanted = set(rule_ids)
        return any(
            d["rule_id"] in wanted and (workspace is None or d["workspace"] in (ANY_WORKSPACE, workspace))
            for d in disputes
        )

    def tainted_in(self, run_id: str, arms: Iterable[str] | None = None) -> frozenset[RuleRef]:
        """The disputed rules that a run's results (of these arms, or all) carried: for compare/report."""
        arm_list = list(arms) if arms is not None else None
        sql = ("SELECT DISTINCT u.workspace, u.rule_id FROM result_rules u "
               f"WHERE u.run_id = ? AND {_DISPUTED.format(ref='u')}")
        args: list[Any] = [run_id]
        if arm_list is not None:
            sql += f" AND u.arm IN ({', '.join('?' * len(arm_list))})"
            args += arm_list
        return frozenset(RuleRef(r["workspace"], r["rule_id"]) for r in self._db.execute(sql, args))

    def _disputes(self, rule_id: str, workspace: str | None) -> Iterator[Dispute]:
        rows = self._db.execute("SELECT * FROM disputes WHERE rule_id = ? ORDER BY disputed_at", (rule_id,))
        for row in rows:
            if workspace is None or row["workspace"] in (ANY_WORKSPACE, workspace):
                yield Dispute(row["rule_id"], row["workspace"] or None, row["reason"],
                              datetime.fromisoformat(row["disputed_at"]))


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
