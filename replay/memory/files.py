"""Workspace memory in the `memory-system` file format (DESIGN §5), read for replay.

One workspace directory holds:

* `rules/learned-corrections.md` — `## Rules` and `## Pending` (both binding: Pending only
  means "not yet merged") and possibly `## Retired`; one rule per line,
  `- text <!-- lc:slug evidence:user-explicit -->`. A rule may carry indented continuation
  lines (a temporary Wrong/Right example); they belong to it. A rule without `evidence:`
  is *legacy*. Headings may be `## Rules`, `## Rules: active` or the older `## Rules — active`.
* `memory/reference/corrections-log.md` — the provenance ledger: `## lc:<slug>` entries with
  `**Field:** value` lines, and `## Retired` with `- lc:<old>: superseded by lc:<new> (...), DATE`
  (the older ` — ` separator is accepted too).
* `memory/profile.md`, `memory/index.md`, `memory/weekly-summary.md` — the essentials injected
  every turn.

Reading never fails on a messy file: what cannot be understood is reported by
`checks.check_memory` (with file:line) and left out of the parsed rules, so a replay arm never
injects text whose authority it could not establish (004). Only a missing directory is an
error, because injecting "nothing" for a mistyped path would silently look like `withheld`.

Workspaces live under a memory root, one directory per tenant. A workspace is a name
(`core.names`), and its directory must resolve inside the root: `..`, an absolute path or a
symlink to elsewhere would inject another tenant's rules. Inside a workspace, a file that is a
link out of the workspace directory is reported and not read, and so is any other entry that is
not a regular file (a link, a FIFO, a socket, a device): the tenant writes this directory, and
opening a FIFO would wait for a writer for good (`core.regularfile`).
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from datetime import date
from enum import StrEnum
from pathlib import Path
from typing import Literal

from core.names import BadNameError, check_name
from core.regularfile import NotReadableError, read_regular_bytes
from replay.errors import ReplayError

LC_FILE = "rules/learned-corrections.md"
LOG_FILE = "memory/reference/corrections-log.md"
# Injection order of the essentials (the memory-system skill lists them in this order).
ESSENTIAL_FILES = ("memory/profile.md", "memory/index.md", "memory/weekly-summary.md")
AUTHORISED_EVIDENCE = "user-explicit"

_SLUG = r"[A-Za-z0-9][A-Za-z0-9._-]*"
_SLUG_RE = re.compile(rf"^{_SLUG}$")
_HEADING_RE = re.compile(r"^##(?!#)\s*(?P<title>.*?)\s*$")
_TITLE_RE = re.compile(r"^(?P<name>[A-Za-z]+)(?P<rest>.*)$")
# What may follow the section name: nothing, or a separator (": ", " — ", " – ", " - ", "(").
_TITLE_REST_RE = re.compile(r"^(\s*(:|—|–|-|\().*)?$")
_RULE_RE = re.compile(r"^-\s+(?P<body>.*)$")
_CONTINUATION_RE = re.compile(r"^(\t| {2,})\S")
_FIELD_RE = re.compile(r"^\*\*(?P<name>[^*]+?):\*\*\s*(?P<value>.*)$")
# `## lc:slug`, also with a trailing title: `## lc:slug — learned correction` or `## lc:slug: ...`.
_LOG_ENTRY_RE = re.compile(r"^lc:(?P<slug>[^\s:]+?)(?::?\s+(?:(?:—|–|-)\s+)?.*|:)?$")
_RETIRED_LINE_RE = re.compile(rf"^-\s+lc:(?P<slug>{_SLUG})(?::\s*|\s+(?:—|–|-)\s+)(?P<reason>.*?)\s*$")
_SUPERSEDED_RE = re.compile(rf"superseded by lc:(?P<slug>{_SLUG})")
_TRAILING_DATE_RE = re.compile(r",\s*(?P<date>\d{4}-\d{2}-\d{2})\s*$")
class MemoryLoadError(ReplayError, ValueError):
    """The workspace memory directory cannot be read at all."""


class Section(StrEnum):
    RULES = "rules"
    PENDING = "pending"
    RETIRED = "retired"


BINDING = (Section.RULES, Section.PENDING)


@dataclass(frozen=True)
class Rule:
    """One rule line. `id` is `lc:<slug>`, or None when the line carries no readable id.

    `file` is None (and `line` 0) for an arm's own `rule:<text>` rule, which has no file.

    `authorised` is what 004 allows to be injected as a standing rule: an id,
    `evidence:user-explicit`, in a binding section, and not retired anywhere.
    """

    id: str | None
    text: str
    section: Section
    evidence: str | None
    legacy: bool
    authorised: bool
    retired: bool
    file: Path | None
    line: int
    detail: tuple[str, ...] = ()

    @property
    def end_line(self) -> int:
        """Last line of the rule (its continuation lines included)."""
        return self.line + len(self.detail)


@dataclass(frozen=True)
class LogEntry:
    """A `## lc:<slug>` provenance record of the corrections log."""

    id: str
    rule_current: str | None
    history: str | None
    evidence: str | None
    scope: str | None
    source_quote: str | None
    wrong: str | None
    right: str | None
    file: Path
    line: int


@dataclass(frozen=True)
class Retirement:
    """A line of a `## Retired` section of the corrections log."""

    id: str
    reason: str
    superseded_by: str | None
    on: date | None
    file: Path
    line: int


@dataclass(frozen=True)
class Essential:
    """An essential file injected every turn; `name` is its path relative to the workspace."""

    name: str
    text: str


@dataclass(frozen=True)
class MemoryProblem:
    severity: Literal["violation", "warning"]
    file: Path
    line: int | None
    message: str
    unread: bool = False
    """The file was not read at all (a link out of the workspace, no regular file, unreadable)."""

    def __str__(self) -> str:
        where = f"{self.file}:{self.line}" if self.line is not None else str(self.file)
        return f"{where}: {self.severity.upper()}: {self.message}"


@dataclass(frozen=True)
class WorkspaceMemory:
    root: Path
    rules: tuple[Rule, ...]
    log: tuple[LogEntry, ...]
    retirements: tuple[Retirement, ...]
    essentials: tuple[Essential, ...]
    problems: tuple[MemoryProblem, ...] = field(default=(), repr=False)

    def authorised_rules(self) -> tuple[Rule, ...]:
        """The rules the `workspace` condition injects, in file order."""
        return tuple(r for r in self.rules if r.authorised)

    def find(self, rule_id: str) -> tuple[Rule, ...]:
        """Every rule line with this id (a duplicated id yields several)."""
        return tuple(r for r in self.rules if r.id == rule_id)

    def retired_in_rules_file(self) -> frozenset[str]:
        """Ids under the rules file's own `## Retired` (the log's `## Retired` lines are `retirements`)."""
        return frozenset(r.id for r in self.rules if r.section is Section.RETIRED and r.id)

    def retired_ids(self) -> frozenset[str]:
        return self.retired_in_rules_file() | {t.id for t in self.retirements}


def load_memory(root: str | Path) -> WorkspaceMemory:
    """Read one workspace directory. Raises MemoryLoadError only when it is not a directory."""
    root = Path(root)
    if not root.is_dir():
        raise MemoryLoadError(f"{root}: workspace memory directory not found")
    problems: list[MemoryProblem] = []
    rules_text, log_text = _read(root / LC_FILE, problems, root), _read(root / LOG_FILE, problems, root)
    essentials = []
    for name in ESSENTIAL_FILES:
        text = _read(root / name, problems, root)
        if text is not None and text.strip():
            essentials.append(Essential(name=name, text=text))
    return memory_from_texts(root, rules_text, log_text, tuple(essentials), problems)


def memory_from_texts(root: Path, rules_text: str | None, log_text: str | None, essentials: tuple[Essential, ...] = (),
                      problems: list[MemoryProblem] | None = None) -> WorkspaceMemory:
    """The rules file and the corrections log given as texts (None: absent), parsed as `load_memory` parses the
    files: the same reading for a workspace's files and for a revision of them in its git history."""
    problems = [] if problems is None else problems
    lc_path, log_path = root / LC_FILE, root / LOG_FILE
    raw_rules = _parse_corrections(rules_text, lc_path, problems)
    log, retirements = _parse_log(log_text, log_path, problems)
    retired = {r.id for r in raw_rules if r.section is Section.RETIRED and r.id} | {t.id for t in retirements}
    rules = tuple(_settle(r, retired) for r in raw_rules)
    return WorkspaceMemory(root, rules, tuple(log), tuple(retirements), essentials, tuple(problems))


def workspace_dirs(memory_root: str | Path) -> dict[str, Path]:
    """The workspaces under a memory root, laid out `<memory_root>/<workspace>/` (one tree per tenant).
    A directory linked out of the root is refused, not followed."""
    memory_root = Path(memory_root)
    if not memory_root.is_dir():
        raise MemoryLoadError(f"{memory_root}: memory root directory not found")
    dirs = [p for p in sorted(memory_root.iterdir()) if p.is_dir() and not p.name.startswith(".")]
    for path in dirs:
        _inside(path, memory_root.resolve(), "the memory root")
    return {p.name: p for p in dirs}


def workspace_dir(memory_root: Path, workspace: str) -> Path:
    """`<memory_root>/<workspace>`, resolved; `MemoryLoadError` when `workspace` is no name or the
    directory (through a symlink) lies outside the root. It may not exist: the caller says what then."""
    try:
        check_name(workspace, "a workspace")
    except BadNameError as exc:
        raise MemoryLoadError(f"{memory_root}: {exc}") from exc
    return _inside(memory_root / workspace, memory_root.resolve(), "the memory root")


def load_workspace_memory(memory_root: Path | None, workspace: str) -> WorkspaceMemory | None:
    """The workspace's memory under a run's `[memory] root`, None when it has none (no root, no
    directory); `MemoryLoadError` for a workspace that is no name or whose directory resolves outside
    the root (defence in depth behind the `Name` fields of decisions and scenarios)."""
    if memory_root is None:
        return None
    path = workspace_dir(memory_root, workspace)
    return load_memory(path) if path.is_dir() else None


def _inside(path: Path, root: Path, what: str) -> Path:
    """`path` resolved (symlinks followed), refused unless it lies in the resolved `root`."""
    resolved = path.resolve()
    if not resolved.is_relative_to(root):
        raise MemoryLoadError(f"{path}: resolves to {resolved}, outside {what} {root}; refused")
    return resolved


# ── reading ──────────────────────────────────────────────────────────────────


def _read(path: Path, problems: list[MemoryProblem], workspace: Path) -> str | None:
    """File text, or None when absent. Undecodable bytes are replaced and reported; a file that
    resolves outside the workspace directory (a symlink to elsewhere) is reported and not read, and
    so is anything but a regular file: a link, a FIFO or a device is never opened (the tenant writes
    these files: `core.regularfile`)."""
    if not os.path.lexists(path):
        return None
    if not path.resolve().is_relative_to(workspace.resolve()):
        problems.append(MemoryProblem("violation", path, None, "is a link to a file outside the workspace "
                                      "directory; not read (memory is per tenant)", unread=True))
        return None
    try:
        data = read_regular_bytes(path, follow_links=False)
    except NotReadableError as exc:
        problems.append(MemoryProblem("violation", path, None, f"{exc.reason}; not read", unread=True))
        return None
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        problems.append(MemoryProblem("violation", path, None,
                                      f"is not valid UTF-8 (byte {exc.start}); undecodable bytes replaced"))
        return data.decode("utf-8-sig", errors="replace")


def numbered_lines(text: str | None) -> Iterator[tuple[int, str]]:
    """(1-based line number, line without trailing space) of a text; nothing for None."""
    for number, line in enumerate((text or "").splitlines(), start=1):
        yield number, line.rstrip()


def section_of(line: str) -> Section | None | Literal[False]:
    """The section a `## ` heading opens; None for an unknown `##` heading; False if not a heading.

    `# ` (a new document title) also ends the current section: it returns None.
    """
    if line.startswith("# "):
        return None
    match = _HEADING_RE.match(line)
    if not match:
        return False
    title = _TITLE_RE.match(match["title"])
    if title and _TITLE_REST_RE.match(title["rest"]):
        try:
            return Section(title["name"].lower())
        except ValueError:
            return None
    return None


def _parse_corrections(text: str | None, path: Path, problems: list[MemoryProblem]) -> list[Rule]:
    rules: list[Rule] = []
    section: Section | None = None
    block: list[tuple[int, str]] = []

    def flush() -> None:
        if block and section is not None:
            rules.append(_rule_from_block(block, section, path, problems))
        block.clear()

    for number, line in numbered_lines(text):
        heading = section_of(line)
        if heading is not False:
            flush()
            section = heading
            continue
        rule = _RULE_RE.match(line)
        if rule:
            flush()
            block.append((number, rule["body"]))
        elif block and _CONTINUATION_RE.match(line):
            block.append((number, line.strip()))
        else:
            flush()
    flush()
    return rules


def _comments(body: str) -> Iterator[tuple[int, int]]:
    """The spans of `<!-- … -->` comments, by plain search in linear time (a lazy regex re-read
    the rest of the text from every unclosed `<!--`: quadratic on a line of them)."""
    start = body.find("<!--")
    while start >= 0:
        end = body.find("-->", start + 4)
        if end < 0:
            return
        yield start, end + 3
        start = body.find("<!--", end + 3)


def _rule_from_block(block: list[tuple[int, str]], section: Section, path: Path, problems: list[MemoryProblem]) -> Rule:
    """A rule from its line and continuation lines; the first comment naming `lc:` is its id."""
    rule_id: str | None = None
    evidence: str | None = None
    texts = [body for _, body in block]
    found = next(((i, start, end) for i, body in enumerate(texts) for start, end in _comments(body)
                  if "lc:" in body[start + 4:end - 3]), None)
    if found is not None:
        index, start, end = found
        comment = texts[index][start:end]
        tokens = comment[4:-3].split()
        slug = next((t.removeprefix("lc:") for t in tokens if t.startswith("lc:")), "")
        if _SLUG_RE.match(slug):
            rule_id = f"lc:{slug}"
        else:
            problems.append(MemoryProblem("violation", path, block[index][0], f"malformed rule id in '{comment}'"))
        evidence = next((t.removeprefix("evidence:") for t in tokens if t.startswith("evidence:")), None)
        body = texts[index]
        texts[index] = (body[:start] + body[end:]).strip()
    return Rule(
        id=rule_id,
        text=" ".join(texts[0].split()),
        section=section,
        evidence=evidence or None,
        legacy=not evidence,
        authorised=False,
        retired=section is Section.RETIRED,
        file=path,
        line=block[0][0],
        detail=tuple(t for t in texts[1:] if t),
    )


def _settle(rule: Rule, retired_ids: set[str]) -> Rule:
    retired = rule.section is Section.RETIRED or (rule.id is not None and rule.id in retired_ids)
    authorised = (rule.id is not None and rule.evidence == AUTHORISED_EVIDENCE and rule.section in BINDING
                  and not retired)
    return replace(rule, retired=retired, authorised=authorised)


def _parse_log(text: str | None, path: Path, problems: list[MemoryProblem]) -> tuple[list[LogEntry], list[Retirement]]:
    entries: list[LogEntry] = []
    retirements: list[Retirement] = []
    current: dict[str, str] | None = None
    current_id, current_line = "", 0
    in_retired = False

    def flush() -> None:
        if current is not None:
            entries.append(_log_entry(current_id, current, path, current_line))

    for number, line in numbered_lines(text):
        heading = section_of(line)
        if heading is not False:
            flush()
            current = None
            title = line.lstrip("#").strip()
            entry = _LOG_ENTRY_RE.match(title)
            in_retired = heading is Section.RETIRED
            if entry:
                if _SLUG_RE.match(entry["slug"]):
                    current, current_id, current_line = {}, f"lc:{entry['slug']}", number
                else:
                    problems.append(MemoryProblem("violation", path, number, f"malformed rule id '{title}'"))
            continue
        if current is not None:
            found = _FIELD_RE.match(line)
            if found:
                current.setdefault(found["name"].strip().lower(), found["value"].strip())
        elif in_retired and line.startswith("- "):
            retirement = _retirement(line, path, number)
            if retirement is None:
                problems.append(MemoryProblem("warning", path, number,
                                              "retired line not in the form '- lc:<id>: <reason>, YYYY-MM-DD'"))
            else:
                retirements.append(retirement)
    flush()
    return entries, retirements


def _log_entry(rule_id: str, fields: dict[str, str], path: Path, line: int) -> LogEntry:
    evidence_field = fields.get("evidence")
    evidence = scope = None
    if evidence_field is not None:
        evidence = evidence_field.split("·")[0].strip() or None
        scope_match = re.search(r"scope:\s*(\S+)", evidence_field)
        scope = scope_match[1] if scope_match else None
    wrong, right = fields.get("wrong"), fields.get("right")
    if wrong is not None and "**Right:**" in wrong:
        wrong, right = (part.strip(" ·") for part in wrong.split("**Right:**", 1))
    return LogEntry(
        id=rule_id,
        rule_current=fields.get("rule (current)"),
        history=fields.get("history"),
        evidence=evidence,
        scope=scope,
        source_quote=fields.get("source quote"),
        wrong=wrong or None,
        right=right or None,
        file=path,
        line=line,
    )


def _retirement(line: str, path: Path, number: int) -> Retirement | None:
    match = _RETIRED_LINE_RE.match(line)
    if not match or not _SLUG_RE.match(match["slug"]):
        return None
    reason = match["reason"]
    superseded = _SUPERSEDED_RE.search(reason)
    on: date | None = None
    dated = _TRAILING_DATE_RE.search(reason)
    if dated:
        try:
            on = date.fromisoformat(dated["date"])
        except ValueError:
            on = None
    return Retirement(
        id=f"lc:{match['slug']}",
        reason=reason,
        superseded_by=f"lc:{superseded['slug']}" if superseded else None,
        on=on,
        file=path,
        line=number,
    )
