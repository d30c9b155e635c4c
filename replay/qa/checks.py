"""Stop-QA's deterministic checks (DESIGN §13), pure: a finished run (replay/qa/run.py) in, findings out, each
citing the record ids it rests on. They run before any reviewer and are meant to be read by one, so each is
conservative: it reports only what the record shows plainly.

* `placeholder`: a pattern of the placeholders file (`{{name}}`, `${name}`, `[TODO]`, `<PLACEHOLDER>`, …,
  RE2, so linear in the answer) matches the final answer outside code (fenced blocks and inline code, where
  `${HOME}` is code, not a template left unfilled). One finding per pattern, citing every record it matched in.
* `unacknowledged_tool_error`: a tool whose last recorded result the guard read as a failure (`failed`,
  `blocked`, `failure_in_success_channel`: not `invalid_envelope`, which only says a text result came where
  JSON was expected, as every Claude Code built-in answers), with no later result of that tool that is not a
  failure, while the final answer neither names the tool (its full name, its last `__` segment, words split at
  `_`, `-` and case changes) nor holds any of the admission phrases. One finding per tool, citing its last
  failed call, that result and the final answer.
* `count_mismatch`: the record before the final answer that carried tool results carried exactly one, the
  guard read it `ok`, and it is a JSON array or an object with exactly one list-valued field: its items. The
  answer gives a count "N noun" — N in digits (`1,234` grouped) or a word from two to twenty, then, after
  spaces only, a noun naming those items (the configured collection nouns, the words of the tool's name and
  of the list's key, singular or plural), not after a qualifier (`top 3 results`, `over 10 items`). A finding
  needs such a count and none equal to the list's length or to an integer the object states at its top level
  (`"total": 42` beside a page of 10). "2 invoices are overdue" among 5 listed is a finding a reviewer
  dismisses; a count in other words is not seen at all.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from core.guard import GuardKind, tool_text
from core.jsonfile import parse_problem
from core.names import Name, excerpt
from core.patterns import compile_pattern
from core.records import Strict
from replay.qa.run import Run, ThreadCall


class FindingKind(StrEnum):
    PLACEHOLDER = "placeholder"
    UNACKNOWLEDGED_TOOL_ERROR = "unacknowledged_tool_error"
    COUNT_MISMATCH = "count_mismatch"


class Finding(Strict):
    workspace: Name
    session: Name
    kind: FindingKind
    records: list[str]
    """The record ids (`uuid`s) the finding rests on."""
    detail: str


@dataclass(frozen=True)
class Placeholder:
    pattern: str
    where: str
    """`file:line` of the pattern, for the finding."""


@dataclass(frozen=True)
class CheckRules:
    """What the checks look for (configs/qa/checks.toml and the placeholders file it names)."""

    placeholders: tuple[Placeholder, ...]
    admissions: tuple[str, ...]
    """Phrases that admit a failure (`could not`, `failed`, …), matched as whole words, any case."""
    count_nouns: tuple[str, ...]
    """Nouns that name any list's items (`item`, `result`, …), singular."""
    count_qualifiers: tuple[str, ...]
    """Words that make the number after them no count of the whole list (`top`, `over`, …)."""


FAILURES: frozenset[GuardKind] = frozenset({GuardKind.FAILED, GuardKind.BLOCKED, GuardKind.FAILURE_IN_SUCCESS_CHANNEL})
_WORDS = ("zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "eleven", "twelve",
          "thirteen", "fourteen", "fifteen", "sixteen", "seventeen", "eighteen", "nineteen", "twenty")
NUMBER_WORDS = {word: n for n, word in enumerate(_WORDS) if word != "one"}
"""Counts in words; "one" is left out: "one invoice is overdue" is rarely a count of the whole list."""
MAX_DIGITS = 15
_TOKEN = re.compile(r"\w+(?:[.,'’]\w+)*")
_WORD = re.compile(r"[^\W_]+(?:['’][^\W_]+)*")
_GROUPED = re.compile(r"\d{1,3}(?:,\d{3})+|\d+")
_CASE_CHANGE = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")
_FENCE = "```"


def check_run(run: Run, rules: CheckRules) -> list[Finding]:
    """Every finding of one run, in the order of the kinds."""
    return [*placeholder_findings(run, rules), *unacknowledged_findings(run, rules), *count_findings(run, rules)]


def _finding(run: Run, kind: FindingKind, records: Iterable[str], detail: str) -> Finding:
    return Finding(workspace=run.workspace, session=run.session, kind=kind, records=list(dict.fromkeys(records)),
                   detail=detail)


# ── placeholder ─────────────────────────────────────────────────────────────


def placeholder_findings(run: Run, rules: CheckRules) -> list[Finding]:
    prose = [(block.record, without_code(block.text)) for block in run.answer]
    findings = []
    for placeholder in rules.placeholders:
        hits = [(record, found.strip()) for record, text in prose
                if (found := first_match(placeholder.pattern, text))]
        if hits:
            findings.append(_finding(run, FindingKind.PLACEHOLDER, (r for r, _ in hits),
                                     f"{excerpt(hits[0][1], 60)} in the final answer (pattern {placeholder.where})"))
    return findings


def first_match(pattern: str, text: str) -> str | None:
    """The first text `pattern` (RE2) matches, None when none; a lone surrogate is matched as U+FFFD."""
    program = compile_pattern(pattern)
    try:
        found = program.search(text)
    except UnicodeEncodeError:
        found = program.search(text.encode("utf-8", "replace").decode("utf-8"))
    return None if found is None else str(found.group(0))


def without_code(text: str) -> str:
    """The text with fenced blocks (```…```, an unclosed one to the end) and inline `code` spans blanked: one
    pass with `str.find`, linear in the text."""
    kept, position = [], 0
    while (start := text.find(_FENCE, position)) >= 0:
        kept.append(_without_inline(text[position:start]))
        end = text.find(_FENCE, start + len(_FENCE))
        position = len(text) if end < 0 else end + len(_FENCE)
        kept.append(" ")
    kept.append(_without_inline(text[position:]))
    return "".join(kept)


def _without_inline(text: str) -> str:
    parts = text.split("`")
    # odd-numbered parts sit between backticks; an unpaired last backtick closes nothing
    closed = len(parts) if len(parts) % 2 else len(parts) - 1
    return " ".join(part for i, part in enumerate(parts) if i % 2 == 0 or i >= closed)


# ── unacknowledged_tool_error ───────────────────────────────────────────────


def unacknowledged_findings(run: Run, rules: CheckRules) -> list[Finding]:
    failing: dict[str, ThreadCall] = {}
    for call in run.calls:
        if not call.tool or call.outcome is None:
            continue
        if call.outcome in FAILURES:
            failing[call.tool] = call
        else:
            failing.pop(call.tool, None)
    if not failing:
        return []
    said = _phrases("\n".join(block.text for block in run.answer))
    if any(_phrases(admission) in said for admission in rules.admissions):
        return []
    return [_finding(run, FindingKind.UNACKNOWLEDGED_TOOL_ERROR,
                     [call.record, *([call.result_record] if call.result_record else []), run.final_record],
                     f"{excerpt(tool, 60)} {call.outcome}: {excerpt(tool_text(call.content), 80)}; no later call of it "
                     "succeeded, and the final answer neither names it nor admits a failure")
            for tool, call in failing.items() if not any(name in said for name in tool_names(tool))]


def _phrases(text: str) -> str:
    """The text as lower-case words between single spaces, padded, so a phrase is found as `f" {phrase} "`."""
    return " " + " ".join(w.replace("’", "'") for w in _WORD.findall(_CASE_CHANGE.sub(" ", text).lower())) + " "


def tool_names(tool: str) -> set[str]:
    """How an answer may name a tool: its whole name and its last `__` segment, as words."""
    return {_phrases(tool), _phrases(tool.rsplit("__", 1)[-1])} - {"  "}


# ── count_mismatch ──────────────────────────────────────────────────────────


def count_findings(run: Run, rules: CheckRules) -> list[Finding]:
    if len(run.last_results) != 1 or run.last_results[0].outcome != GuardKind.OK:
        return []
    result = run.last_results[0]
    listed = _listed(result.content)
    if listed is None:
        return []
    length, key, stated = listed
    nouns = {form for word in (*rules.count_nouns, *_words(result.tool.rsplit("__", 1)[-1]), *_words(key))
             for form in _forms(word)}
    claims = [(block, count, noun) for block in run.answer
              for count, noun in count_claims(without_code(block.text), nouns, rules.count_qualifiers)]
    if not claims or any(count == length or count in stated for _, count, _ in claims):
        return []
    said = ", ".join(f"{count} {noun}" for _, count, noun in claims[:3])
    where = f"its {excerpt(key, 40)} field lists" if key else "it lists"
    return [_finding(run, FindingKind.COUNT_MISMATCH, [*(block.record for block, _, _ in claims), *_result(result)],
                     f"the final answer counts {said}; the last tool result ({excerpt(result.tool, 60)}) is a list: "
                     f"{where} {length}")]


def _result(call: ThreadCall) -> list[str]:
    return [call.result_record] if call.result_record else []


def _listed(content: Any) -> tuple[int, str, set[int]] | None:
    """(items, the list's key or "", the integers the object states) of a result that lists items, else None."""
    value, problem = parse_problem(tool_text(content))
    if problem is not None:
        return None
    if isinstance(value, list):
        return len(value), "", set()
    if not isinstance(value, dict):
        return None
    lists = [(str(k), v) for k, v in value.items() if isinstance(v, list)]
    if len(lists) != 1:
        return None
    stated = {v for v in value.values() if isinstance(v, int) and not isinstance(v, bool)}
    return len(lists[0][1]), lists[0][0], stated


def count_claims(text: str, nouns: set[str], qualifiers: Sequence[str]) -> list[tuple[int, str]]:
    """Each "N noun" of `text`: a count, spaces, a noun of `nouns` (lower case), not after a qualifier."""
    tokens = list(_TOKEN.finditer(text))
    skip = {q.lower() for q in qualifiers}
    claims = []
    for i, token in enumerate(tokens[:-1]):
        count = _count(token.group(0))
        following = tokens[i + 1]
        gap = text[token.end():following.start()]
        noun = following.group(0).lower()
        if count is None or noun not in nouns or not gap or not gap.isspace() or "\n" in gap:
            continue
        if i and tokens[i - 1].group(0).lower() in skip:
            continue
        claims.append((count, noun))
    return claims


def _count(token: str) -> int | None:
    if _GROUPED.fullmatch(token) and len(token) <= MAX_DIGITS:
        return int(token.replace(",", ""))
    return NUMBER_WORDS.get(token.lower())


def _words(name: str) -> list[str]:
    """The words of a tool's name or a key (`list_openInvoices` → list, open, invoices), three letters or more."""
    return [w for w in _WORD.findall(_CASE_CHANGE.sub(" ", name).lower()) if len(w) >= 3]


def _forms(word: str) -> set[str]:
    """A noun singular and plural, as English mostly makes them (item/items, entry/entries, match/matches)."""
    word = word.lower()
    forms = {word, f"{word}s", f"{word}es"}
    if word.endswith("y"):
        forms.add(f"{word[:-1]}ies")
    if word.endswith("ies"):
        forms.add(f"{word[:-3]}y")
    if word.endswith("es"):
        forms.add(word[:-2])
    if word.endswith("s"):
        forms.add(word[:-1])
    return forms
