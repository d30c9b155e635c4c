"""`check_memory`: the memory contract checked mechanically, like the public `check-memory.sh`
(caps, evidence, provenance, approval-by-silence, outside material), on what `load_memory` read."""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from collections.abc import Iterable
from pathlib import Path

from core.regularfile import NotReadableError, read_regular_bytes
from replay.memory.files import (
    AUTHORISED_EVIDENCE,
    BINDING,
    ESSENTIAL_FILES,
    LC_FILE,
    LOG_FILE,
    MemoryLoadError,
    MemoryProblem,
    WorkspaceMemory,
    load_memory,
    numbered_lines,
    section_of,
)

ESSENTIAL_LINE_CAPS = {"memory/profile.md": 80, "memory/index.md": 50, "memory/weekly-summary.md": 80}
RULE_CAP = 60
RULE_TEXT_CAP = 160
LC_BYTES_CAP = 12000
# Provenance fields of the corrections log that do not belong in the rules file.
_SCAFFOLDING_RE = re.compile(r"^\*\*(Source|Promoted|Occurrences)")

# The public check script's approval-by-silence phrases: silence is not approval (skill, evidence contract).
_SILENCE_RE = re.compile(
    r"continued (using|the workflow).*without complaint|accepted without objection"
    r"|approved.*no objections?|no objections?.*approved",
    re.I,
)
# Signs that a rule's text was copied from outside material (004: an observation, never a rule).
_OUTSIDE_PATTERNS = (
    (re.compile(r"https?://", re.I), "contains a URL"),
    (re.compile(r"<\s*/?\s*(tool_call|tool_response|function|system|standing_rules|memory)\b", re.I),
     "contains prompt markup"),
    (re.compile(r"ignore (all |any )?(the )?(previous|prior|above) (instructions|rules)", re.I),
     "tells the reader to ignore instructions"),
    (re.compile(r"\b(vendor|supplier|website|web ?page|tool (result|output)|search results?)\b.{0,40}"
                r"\b(says|said|states|claims)\b", re.I),
     "reports what an outside source said"),
)


def check_memory(root: str | Path) -> list[MemoryProblem]:
    """Mechanical validation of the memory contract, like the public `check-memory.sh`.

    Covers what replay reads (rules, corrections log, essentials); the tree-file frontmatter
    and workspace-root tidiness checks of the script are out of scope here.
    """
    root = Path(root)
    try:
        memory = load_memory(root)
    except MemoryLoadError as exc:
        return [MemoryProblem("violation", root, None, str(exc).removeprefix(f"{root}: "))]
    problems = list(memory.problems)
    problems += _check_essentials(root)
    problems += _check_rules(memory)
    problems += _check_log(memory)
    return sorted(problems, key=lambda p: (str(p.file), p.line or 0))


def has_violations(problems: Iterable[MemoryProblem]) -> bool:
    """Whether any problem is a violation (warnings alone pass the check)."""
    return any(p.severity == "violation" for p in problems)


def _text(path: Path, workspace: Path) -> str | None:
    """Text for a check, None if unreadable, no regular file or a link (`load_memory` already
    reported why)."""
    if not path.resolve().is_relative_to(workspace.resolve()):
        return None
    try:
        return read_regular_bytes(path, follow_links=False).decode("utf-8-sig", errors="replace")
    except NotReadableError:
        return None


def _non_empty_lines(text: str) -> int:
    return sum(1 for line in text.splitlines() if line.strip())


def _check_essentials(root: Path) -> list[MemoryProblem]:
    problems = []
    for name in ESSENTIAL_FILES:
        path = root / name
        if not path.is_file():
            problems.append(MemoryProblem("violation", path, None,
                                          f"{Path(name).name} is missing (it is injected every turn)"))
            continue
        text = _text(path, root)
        if text is None:
            continue
        count, cap = _non_empty_lines(text), ESSENTIAL_LINE_CAPS[name]
        if count > cap:
            problems.append(MemoryProblem("violation", path, None, f"has {count} non-empty lines (cap {cap})"))
        for number, line in numbered_lines(text):
            if _SILENCE_RE.search(line):
                problems.append(MemoryProblem("violation", path, number,
                                              "approval-by-silence language (silence is not approval)"))
    return problems


def _check_rules(memory: WorkspaceMemory) -> list[MemoryProblem]:
    path = memory.root / LC_FILE
    text = _text(path, memory.root) if path.is_file() else None
    if text is None:
        return []
    problems: list[MemoryProblem] = []

    def viol(line: int | None, message: str) -> None:
        problems.append(MemoryProblem("violation", path, line, message))

    headings = [section_of(line) for _, line in numbered_lines(text)]
    for wanted in BINDING:
        if wanted not in headings:
            viol(None, f"missing '## {wanted.value.title()}' section")
    size = len(text.encode())
    if size > LC_BYTES_CAP:
        viol(None, f"is {size} bytes (target ≤ {LC_BYTES_CAP}: compress or consolidate)")
    for number, line in numbered_lines(text):
        if _SCAFFOLDING_RE.match(line):
            viol(number, "provenance block belongs in memory/reference/corrections-log.md")
        if _SILENCE_RE.search(line):
            viol(number, "approval-by-silence language (silence is not approval)")

    binding = [r for r in memory.rules if r.section in BINDING]
    if len(binding) > RULE_CAP:
        viol(None, f"has {len(binding)} rules in force, Rules and Pending together (cap {RULE_CAP}: consolidate)")
    retired_ids = memory.retired_ids()
    for rule in binding:
        if len(rule.text) > RULE_TEXT_CAP:
            viol(rule.line, f"rule text is {len(rule.text)} characters (cap {RULE_TEXT_CAP})")
        if rule.id is None:
            viol(rule.line, "rule is missing an <!-- lc:slug --> id")
        elif rule.id in retired_ids:
            viol(rule.line, f"{rule.id} is retired but still in force")
        if rule.legacy and rule.id is not None:
            problems.append(MemoryProblem("warning", path, rule.line,
                                          f"{rule.id or 'rule'} is legacy (no evidence:); audit, do not auto-upgrade"))
        elif rule.evidence != AUTHORISED_EVIDENCE:
            viol(rule.line, f"{rule.id or 'rule'} has non-explicit evidence '{rule.evidence}'")
        for _, reason in (p for p in _OUTSIDE_PATTERNS if p[0].search(rule.text)):
            problems.append(MemoryProblem("warning", path, rule.line, f"{rule.id or 'rule'} looks like outside "
                                                                      f"material ({reason}): an observation is never "
                                                                      "a rule"))

    by_id: dict[str, list[int]] = defaultdict(list)
    for rule in memory.rules:
        if rule.id is not None:
            by_id[rule.id].append(rule.line)
    for rule_id, lines in by_id.items():
        for later in lines[1:]:
            viol(later, f"duplicate id {rule_id} (first at line {lines[0]})")
    texts = Counter(r.text for r in binding if r.text)
    for rule in binding:
        if texts[rule.text] > 1:
            viol(rule.line, "verbatim duplicate rule text")
    return problems


def _check_log(memory: WorkspaceMemory) -> list[MemoryProblem]:
    path = memory.root / LOG_FILE
    binding = [r for r in memory.rules if r.section in BINDING]
    if not path.is_file():
        if binding:
            return [MemoryProblem("violation", path, None,
                                  "corrections log is missing while learned-corrections has rules")]
        return []
    problems = []
    logged = {e.id for e in memory.log}
    for entry in memory.log:
        if entry.evidence == AUTHORISED_EVIDENCE and not entry.source_quote:
            problems.append(MemoryProblem("violation", path, entry.line,
                                          f"{entry.id} claims user-explicit evidence without a source quote"))
    for rule in binding:
        if rule.authorised and rule.id not in logged:
            problems.append(MemoryProblem("warning", rule.file or path, rule.line,
                                          f"{rule.id} has no provenance record in {LOG_FILE}"))
    return problems
