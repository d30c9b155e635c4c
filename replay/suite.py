"""Frozen decision suites: validate, load, freeze (DESIGN §3).

A suite is a directory with `suite.toml` and `decisions.jsonl`:

```toml
name = "demo"
version = "1"
description = "..."
created = 2026-08-15T00:00:00Z
extra_strata = []            # optional suite-defined strata

[frozen]                     # written by freeze_suite, never by hand
sha256 = "<sha256 of decisions.jsonl>"
decisions = 80
frozen_at = 2026-08-15T00:00:00Z
```

A frozen suite is immutable: `load_suite` refuses a `decisions.jsonl` whose hash differs
from the manifest, and `freeze_suite` refuses to re-freeze changed content. New cases go into
the next version (a new directory). `freeze_suite` is the only function that writes.
"""

from __future__ import annotations

import hashlib
import os
from collections import Counter
from dataclasses import dataclass
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from core.jsonfile import parse_problem, read_jsonl_values, read_lines, schema_errors
from core.names import excerpt
from core.records import BUILTIN_STRATA, HELD_OUT_EXCLUDED, KNOWN_FAILURE, Decision, Strict
from core.tomlfile import read_toml
from replay.errors import ReplayError
from replay.privacy.redact import residuals
from replay.privacy.release_audit import audit_directory
from replay.suite_checks import check_across, check_decision

M = TypeVar("M", bound=BaseModel)
SUITE_TOML = "suite.toml"
DECISIONS_JSONL = "decisions.jsonl"
NO_CALL = "(no call)"


class FrozenManifest(Strict):
    sha256: str = Field(pattern=r"^[0-9a-f]{64}$")
    decisions: int = Field(ge=0)
    frozen_at: datetime


class Manifest(Strict):
    """What a suite's `suite.toml` and a pack's `pack.toml` both say (a bare `version = 2` reads as "2")."""

    model_config = ConfigDict(extra="forbid", coerce_numbers_to_str=True)

    name: str = Field(min_length=1)
    version: str = Field(min_length=1)
    description: str = ""
    created: datetime | date


class SuiteManifest(Manifest):
    extra_strata: list[str] = Field(default_factory=list)
    frozen: FrozenManifest | None = None


@dataclass(frozen=True)
class SuiteProblem:
    file: str
    line: int | None
    reason: str

    def __str__(self) -> str:
        where = f"{self.file}:{self.line}" if self.line is not None else self.file
        return f"{where}: {self.reason}"


class SuiteError(ReplayError):
    """A suite that cannot be used as it is; `problems` lists every reason."""

    def __init__(self, summary: str, problems: list[SuiteProblem]) -> None:
        self.problems = problems
        lines = [summary, *(f"  {p}" for p in problems)]
        super().__init__("\n".join(lines))


@dataclass(frozen=True)
class Suite:
    path: Path
    manifest: SuiteManifest
    decisions: tuple[Decision, ...]
    sha256: str

    @property
    def frozen(self) -> bool:
        return self.manifest.frozen is not None

    @property
    def strata(self) -> tuple[str, ...]:
        return (*BUILTIN_STRATA, *self.manifest.extra_strata)


def decisions_sha256(suite_dir: Path | str) -> str:
    """The sha256 of `decisions.jsonl`, as the frozen manifest records it (read in chunks)."""
    with (Path(suite_dir) / DECISIONS_JSONL).open("rb") as handle:
        return hashlib.file_digest(handle, "sha256").hexdigest()


def validate_suite(suite_dir: Path | str) -> list[SuiteProblem]:
    """Every problem of the suite, each with file and line; empty when the suite is valid."""
    _, _, problems = _read(Path(suite_dir))
    return problems


def load_suite(suite_dir: Path | str) -> Suite:
    """The suite's decisions; raises SuiteError when it is invalid or a frozen file changed."""
    path = Path(suite_dir)
    manifest, decisions, problems = _read(path)
    if problems or manifest is None:
        raise SuiteError(f"suite {path} is not usable ({len(problems)} problem(s)):", problems)
    return Suite(path, manifest, tuple(decisions), decisions_sha256(path))


def check_privacy(suite_dir: Path | str) -> list[SuiteProblem]:
    """The privacy check (001 S15): every detectable value (replay/privacy/redact.py) left in any field or
    key of `decisions.jsonl`, by line, decision id, JSON path and type — never the value itself."""
    path = Path(suite_dir) / DECISIONS_JSONL
    if not path.is_file():
        return [SuiteProblem(str(path), None, "missing")]
    problems = []
    for number, raw, unreadable in read_lines(path):
        if raw is None:
            problems.append(SuiteProblem(str(path), number, f"not searched: {unreadable}"))
            continue
        data, _ = parse_problem(raw)
        if data is None:
            data = raw  # not a decision (validate_suite says so); its text is still searched
        ident = data.get("id") if isinstance(data, dict) else None
        problems += [SuiteProblem(str(path), number, f"decision {excerpt(ident)}: {r.kind} value at {r.path}")
                     for r in residuals(data)]
    return problems


def freeze_suite(suite_dir: Path | str, at: datetime | None = None, *, synthetic: bool = False,
                 workspaces: frozenset[str] | None = None) -> FrozenManifest:
    """Write the `[frozen]` manifest into suite.toml (the only write to a suite).

    Refuses an invalid suite, one in which the privacy audit (replay/privacy/release_audit.py, with the registered
    `workspaces` when given) finds anything (unless `synthetic`: its values are invented, as the demo's
    generator's are), and an already-frozen one whose decisions changed; freezing an unchanged frozen suite
    again returns its manifest and writes nothing.
    """
    path = Path(suite_dir)
    manifest, decisions, problems = _read(path)
    if manifest is not None and manifest.frozen is not None and (path / DECISIONS_JSONL).is_file():
        actual = decisions_sha256(path)
        if manifest.frozen.sha256 != actual:
            problem = SuiteProblem(
                str(path / DECISIONS_JSONL),
                None,
                f"already frozen with sha256 {manifest.frozen.sha256}, now {actual}: a frozen suite is immutable; "
                f"copy it to a new directory with a version after {manifest.version!r} and freeze that",
            )
            raise SuiteError(f"refusing to re-freeze suite {path}", [problem])
    if problems or manifest is None:
        raise SuiteError(f"refusing to freeze suite {path}: it is invalid", problems)
    if manifest.frozen is not None:
        return manifest.frozen
    audit = None if synthetic else audit_directory(path, workspaces)
    if audit is not None and not audit.clean:
        raise SuiteError(f"refusing to freeze suite {path}: {audit.refusal()}; build it with workspace keys "
                         "(suite build --keys) so they are pseudonymised, or, for invented values only, freeze "
                         "with --synthetic", [])
    actual = decisions_sha256(path)
    toml_path = path / SUITE_TOML
    write_frozen_block(toml_path, actual, "decisions", len(decisions), at)
    frozen = read_manifest(toml_path, SuiteManifest)[0]
    if frozen is None or frozen.frozen is None:
        raise SuiteError(f"suite {path}: suite.toml did not read back after freezing", [])
    return frozen.frozen


def write_frozen_block(toml_path: Path, sha256: str, count_key: str, count: int, at: datetime | None) -> None:
    """Append the `[frozen]` table to a suite's or pack's TOML manifest, atomically."""
    stamp = (at or datetime.now(UTC)).astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    text = toml_path.read_text(encoding="utf-8")
    block = f'\n[frozen]\nsha256 = "{sha256}"\n{count_key} = {count}\nfrozen_at = {stamp}\n'
    tmp = toml_path.with_name(toml_path.name + ".tmp")
    tmp.write_text(text.rstrip("\n") + "\n" + block, encoding="utf-8")
    os.replace(tmp, toml_path)


def suite_stats(suite: Suite) -> dict[str, Any]:
    """Counts per stratum, cluster, workspace and target tool (JSON-ready)."""
    decisions = suite.decisions
    targets = Counter((d.target.tool or NO_CALL) for d in decisions if d.target is not None)
    held_out = [d for d in decisions if d.target is not None and d.stratum not in HELD_OUT_EXCLUDED]
    return {
        "name": suite.manifest.name,
        "version": suite.manifest.version,
        "frozen": suite.frozen,
        "sha256": suite.sha256,
        "decisions": len(decisions),
        "held_out_positive": sum(1 for d in held_out if d.stratum != KNOWN_FAILURE),
        "known_failure": sum(1 for d in decisions if d.stratum == KNOWN_FAILURE),
        "strata": {s: n for s in suite.strata if (n := sum(1 for d in decisions if d.stratum == s))},
        "clusters": dict(sorted(Counter(d.cluster for d in decisions).items())),
        "workspaces": dict(sorted(Counter(d.workspace for d in decisions).items())),
        "target_tools": dict(sorted(targets.items())),
    }


def format_stats(stats: dict[str, Any]) -> str:
    """`suite_stats` as plain-text tables."""
    frozen = f"frozen, sha256 {stats['sha256'][:12]}…" if stats["frozen"] else "NOT frozen"
    lines = [
        f"suite {stats['name']} v{stats['version']} ({frozen})",
        f"{stats['decisions']} decisions: {stats['held_out_positive']} held-out positive, "
        f"{stats['known_failure']} known-failure",
    ]
    for title, key in (("stratum", "strata"), ("workspace", "workspaces"), ("target tool", "target_tools"),
                       ("cluster", "clusters")):
        table = stats[key]
        width = max([len(title), *(len(k) for k in table)])
        lines += ["", f"{title:<{width}}  count", f"{'-' * width}  -----"]
        lines += [f"{k:<{width}}  {v:>5}" for k, v in table.items()]
    return "\n".join(lines)


def _read(path: Path) -> tuple[SuiteManifest | None, list[Decision], list[SuiteProblem]]:
    """Manifest, decisions and every problem found in both files."""
    toml_path, jsonl_path = path / SUITE_TOML, path / DECISIONS_JSONL
    if not path.is_dir():
        return None, [], [SuiteProblem(str(path), None, "not a suite directory (it does not exist)")]
    manifest, problems = read_manifest(toml_path, SuiteManifest)
    if not jsonl_path.is_file():
        return manifest, [], [*problems, SuiteProblem(str(jsonl_path), None, "missing")]
    extra = manifest.extra_strata if manifest is not None else []
    problems += [SuiteProblem(str(toml_path), None, f"extra stratum {s!r} is built in") for s in extra
                 if s in BUILTIN_STRATA]
    parsed: list[tuple[int, Decision]] = []
    lines = 0
    for line in read_jsonl_values(jsonl_path, "a decision"):
        lines += 1
        decision, reasons = (None, list(line.problems)) if line.value is None else _read_decision(line.value, extra)
        problems += [SuiteProblem(str(jsonl_path), line.number, r) for r in reasons]
        if decision is not None:
            parsed.append((line.number, decision))
    if lines == 0:
        problems.append(SuiteProblem(str(jsonl_path), None, "no decisions"))
    problems += [SuiteProblem(str(jsonl_path), line, reason) for line, reason in check_across(parsed)]
    if manifest is not None and manifest.frozen is not None:
        problems += _frozen_problems(manifest.frozen, toml_path, jsonl_path, decisions_sha256(path), lines)
    problems.sort(key=lambda p: (p.file, p.line or 0))
    return manifest, [d for _, d in parsed], problems


def _frozen_problems(
    frozen: FrozenManifest, toml_path: Path, jsonl_path: Path, actual: str, lines: int
) -> list[SuiteProblem]:
    """A frozen suite is immutable: its decisions must hash and count as the manifest says."""
    if actual != frozen.sha256:
        return [SuiteProblem(
            str(jsonl_path), None,
            f"changed since the suite was frozen: expected sha256 {frozen.sha256}, actual {actual}. "
            "A frozen suite is immutable; put new cases into the next version",
        )]
    if lines != frozen.decisions:
        return [SuiteProblem(str(toml_path), None,
                             f"[frozen] says {frozen.decisions} decisions, decisions.jsonl has {lines}")]
    return []


def read_manifest(toml_path: Path, model: type[M]) -> tuple[M | None, list[SuiteProblem]]:
    """A TOML manifest (a suite's or a pack's) as `model`, or the problems with it."""
    if not toml_path.is_file():
        return None, [SuiteProblem(str(toml_path), None, "missing")]
    data, problem = read_toml(toml_path)
    if data is None:
        return None, [SuiteProblem(str(toml_path), None, problem or "unreadable")]
    try:
        return model.model_validate(data), []
    except ValidationError as exc:
        return None, [SuiteProblem(str(toml_path), None, r) for r in schema_errors(exc)]


def _read_decision(data: dict[str, Any], extra: list[str]) -> tuple[Decision | None, list[str]]:
    try:
        decision = Decision.model_validate(data)
    except ValidationError as exc:
        return None, schema_errors(exc)
    return decision, check_decision(decision, extra)


