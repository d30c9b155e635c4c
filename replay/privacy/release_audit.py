"""The privacy audit of what leaves the platform (DESIGN §9 and §12; issue 65): a curated set (`train.jsonl`,
`provenance.jsonl`, `manifest.json`: to a rented trainer) or a suite (`decisions.jsonl`, `suite.toml`: to a
rented evaluator), every file of it read line by line.

It counts the pseudonyms per type, and finds every value the recognizers would still find and every registered
workspace name (with the keys file's names) — a JSON line with the key context redaction reads, any other line
as text — each named by file, line, type and JSON path, never by the value. A suite decision's identifiers (`id`,
`workspace`, `session`, `cluster`, `memory.workspace`) are the one place a workspace's name stays: replay
injects `<memory.root>/<workspace>`, sends `X-Workspace-Id` and joins results by them, and curation excludes a
suite's sessions and reads its runs by them; they are not scanned for workspace names. `curate build`,
`suite build` and `suite freeze` run the same audit on what they are about to write, and write nothing when it
finds anything.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from core.jsonfile import parse_problem
from core.regularfile import NotReadableError, read_regular_bytes
from replay.errors import ReplayError
from replay.privacy.redact import PSEUDONYM, find, residuals
from replay.privacy.tenants import TenantNames

SUITE_IDS = frozenset({"$.id", "$.workspace", "$.session", "$.cluster", "$.memory.workspace"})
"""A suite decision's identifiers: the workspace's name stays there (the platform's own tools join on it)."""
SHOWN = 5
"""Findings named in a build's one error line (`privacy audit` lists them all)."""


class PrivacyAuditError(ReplayError):
    """A directory the audit cannot read as a curated set or a suite."""


@dataclass(frozen=True)
class AuditFinding:
    file: str
    line: int
    kind: str
    path: str | None = None
    """The JSON path in a JSON line; None in a text line."""

    def __str__(self) -> str:
        return f"{self.file}:{self.line}: {self.kind}" + (f" at {self.path}" if self.path else "")


@dataclass
class PrivacyAudit:
    directory: str
    files: dict[str, int] = field(default_factory=dict)
    """Lines read per file."""
    pseudonyms: Counter[str] = field(default_factory=Counter)
    findings: list[AuditFinding] = field(default_factory=list)
    workspaces: int | None = None
    """Registered workspace names looked for; None without the keys file (no name was looked for)."""

    def scan(self, file: str, lines: Iterable[str], names: TenantNames, suite: bool = False) -> None:
        """Audit one file's lines (`suite`: a suite's decisions, whose identifiers keep the workspace's name)."""
        count = 0
        for number, line in enumerate(lines, start=1):
            count += 1
            self.pseudonyms.update(m.group(0)[1:].split("_")[0] for m in PSEUDONYM.finditer(line))
            data, _ = parse_problem(line) if line.lstrip()[:1] in ("{", "[") else (None, None)
            if isinstance(data, (dict, list)):
                self.findings += [AuditFinding(file, number, r.kind, r.path) for r in residuals(data, names=names)
                                  if not (suite and r.kind == "WORKSPACE" and r.path in SUITE_IDS)]
            else:
                self.findings += [AuditFinding(file, number, f.kind) for f in find(line, names=names)]
        self.files[file] = count

    @property
    def clean(self) -> bool:
        return not self.findings

    def refusal(self) -> str:
        """What a build or a freeze refuses with, in one line: file, line and type of the first findings, never a
        value."""
        shown = "; ".join(map(str, self.findings[:SHOWN]))
        more = f"; and {len(self.findings) - SHOWN} more (`worker-replay privacy audit` lists them all)" \
            if len(self.findings) > SHOWN else ""
        return (f"the privacy check finds {len(self.findings)} detectable value(s) (file:line: type at JSON path; "
                f"values are never shown): {shown}{more}")

    def to_json(self) -> str:
        return json.dumps({"directory": self.directory, "files": self.files, "pseudonyms": dict(self.pseudonyms),
                           "workspaces_scanned": self.workspaces, "clean": self.clean,
                           "findings": [{"file": f.file, "line": f.line, "kind": f.kind, "path": f.path}
                                        for f in self.findings]}, indent=2, sort_keys=True)

    def __str__(self) -> str:
        counts = ", ".join(f"{k} {v}" for k, v in sorted(self.pseudonyms.items())) or "none"
        names = (f"{self.workspaces} registered workspace name(s) looked for" if self.workspaces is not None
                 else "workspace names not looked for (give --keys KEYS.toml)")
        lines = [f"{self.directory}: {sum(self.files.values())} line(s) in {len(self.files)} file(s); "
                 f"pseudonyms: {counts}; {names}",
                 f"privacy audit: {'clean' if self.clean else f'{len(self.findings)} value(s) left'}"]
        return "\n".join([*lines, *(f"  {f}" for f in self.findings)])


def audit_directory(directory: Path, workspaces: frozenset[str] | None = None) -> PrivacyAudit:
    """Audit every file of a curated set or a suite directory (and its subdirectories: a split's train and
    test), with the registered workspace names when given."""
    if not directory.is_dir():
        raise PrivacyAuditError(f"no directory at {directory}")
    files = sorted(p for p in directory.rglob("*") if p.is_symlink() or not p.is_dir())  # a FIFO too: refused below
    if not files:
        raise PrivacyAuditError(f"{directory} holds no file: not a curated set or a suite")
    names = TenantNames(workspaces or frozenset())
    audit = PrivacyAudit(str(directory), workspaces=None if workspaces is None else len(workspaces))
    for path in files:
        try:
            text = read_regular_bytes(path, follow_links=False).decode("utf-8", errors="replace")
        except NotReadableError as exc:
            raise PrivacyAuditError(f"{path}: cannot be audited: {exc.reason}") from None
        audit.scan(str(path), text.splitlines(), names, suite=path.name == "decisions.jsonl")
    return audit
