"""Stop-QA's deterministic checks (DESIGN §13), pure: a finished run (replay/qa/finished_run.py) in, findings out, each
citing the record ids it rests on. They run before any reviewer and are meant to be read by one, so each is
conservative: it reports only what the record shows plainly.

* `placeholder`: a pattern of the placeholders file (`{{name}}`, `${name}`, `[TODO]`, `<PLACEHOLDER>`, …,
  RE2, so linear in the answer) matches the final answer outside code (fenced blocks and inline code, where
  `${HOME}` is code, not a template left unfilled). One finding per pattern, citing every record it matched in.
* `unacknowledged_tool_error`: a tool whose last recorded result the guard read as a failure (`failed`,
  `blocked`, `failure_in_success_channel`: not `invalid_envelope`, which only says a text result came where
  JSON was expected, as every Claude Code built-in answers), with no later result of that tool that is not a
  failure, while the final answer neither names the tool (its full name, its last `__` segment, words split at
  `_`, `-` and case changes) nor admits its failure: a sentence holding an admission phrase admits the failure
  of the tools whose subject it names (the words of a tool's name and of its calls' short input strings), or,
  naming no tool's subject, of every failing tool. "The build failed" does not acknowledge a failed customer
  search when the build was a call of its own; "that did not work" acknowledges any failure. One finding per
  tool, citing its last failed call, that result and the final answer.
* `count_mismatch`: the record before the final answer that carried tool results carried exactly one, the
  guard read it `ok`, and it is a JSON array or an object with exactly one list-valued field: its items. The
  answer gives a count — a number standing alone (digits, `1,234` grouped, or a word from two to ninety-nine;
  not glued to a sign or word, `#4`, `$3`, `2026-11-04`, nor after a qualifier, `top 3`, `March 3`), up to
  three modifiers (`3 open invoices`, `3 past-due invoices`), then a noun naming those items (the configured
  collection nouns, the words of the tool's name and of the list's key, singular or plural); a modifier may
  also follow as `3 invoices are open`. A modifier that the tool's name, the list's key, the call's input or
  the configured whole-list words (`matching`, `listed`) hold describes every item; any other names a part,
  and the count is then checked against the items that mention it (`"status": "overdue"`, `"disputed":
  true`) as well, or not checked at all when none does (overdue by a due date is not in the record). A
  finding needs a checked count and none equal to the list's length, an integer the object states at its
  top level (`"total": 42` beside a page of 10), or the part it names. "2 invoices are overdue" among 5
  listed with no item marked overdue is no finding; a count in other words is not seen at all.

Recall and false findings on a labelled set of phrasings: tests/support/qa_phrasings.py, BENCHMARKS.md.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from core.guard import GuardKind, tool_text
from core.jsonfile import parse_problem
from core.names import Name, excerpt
from core.patterns import compile_pattern
from core.records import Strict
from replay.qa.finished_run import Run, ThreadCall


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
    """Words that make the number after them no count of the whole list (`top`, `over`, `March`, …), and end a
    count between its number and its noun (`3 more invoices`)."""
    count_whole: tuple[str, ...]
    """Modifiers that leave a count one of the whole list (`matching`, `listed`, …)."""


FAILURES: frozenset[GuardKind] = frozenset({GuardKind.FAILED, GuardKind.BLOCKED, GuardKind.FAILURE_IN_SUCCESS_CHANNEL})
_WORDS = ("zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "eleven", "twelve",
          "thirteen", "fourteen", "fifteen", "sixteen", "seventeen", "eighteen", "nineteen")
_TENS = {"twenty": 20, "thirty": 30, "forty": 40, "fifty": 50, "sixty": 60, "seventy": 70, "eighty": 80, "ninety": 90}
_UNITS = {word: n for n, word in enumerate(_WORDS[:10]) if n}
NUMBER_WORDS = {**{word: n for n, word in enumerate(_WORDS) if word != "one"}, **_TENS}
"""Counts in words; "one" is left out: "one invoice is overdue" is rarely a count of the whole list."""
MAX_DIGITS = 15
MAX_MODIFIERS = 3
SUBJECT_CHARS = 200
"""An input string longer than this (a file's content, a long prompt) is not what the call is about."""
STOP = frozenset({"a", "an", "the", "of", "in", "on", "at", "to", "for", "from", "by", "with", "per", "than", "as",
                  "and", "or", "but", "nor", "is", "are", "was", "were", "be", "been", "being", "has", "have", "had",
                  "do", "does", "did", "that", "which", "who", "whose", "this", "these", "those", "it", "its",
                  "their", "his", "her", "my", "your", "our", "not", "no"})
"""Function words: no modifier of a count, no subject of a call."""
_BE = frozenset({"is", "are", "was", "were"})
_NEGATED_BE = frozenset({"isn't", "aren't", "wasn't", "weren't"})
_NEGATIONS = frozenset({"not", "no", "never"})
_OPENING = "([\"'“‘*"
"""What may stand right before a count besides a space."""
_TOKEN = re.compile(r"\w+(?:[.,'’]\w+)*")
_WORD = re.compile(r"[^\W_]+(?:['’][^\W_]+)*")
_GROUPED = re.compile(r"\d{1,3}(?:,\d{3})+|\d+")
_CASE_CHANGE = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")
_SENTENCE = re.compile(r"[.!?;]+(?=\s|$)|\n")
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
    text = "\n".join(block.text for block in run.answer)
    said = _phrases(text)
    admitted = admitted_tools(text, run.calls, rules.admissions, set(failing))
    return [_finding(run, FindingKind.UNACKNOWLEDGED_TOOL_ERROR,
                     [call.record, *([call.result_record] if call.result_record else []), run.final_record],
                     f"{excerpt(tool, 60)} {call.outcome}: {excerpt(tool_text(call.content), 80)}; no later call of it "
                     "succeeded, and the final answer neither names it nor admits its failure")
            for tool, call in failing.items()
            if tool not in admitted and not any(name in said for name in tool_names(tool))]


def admitted_tools(text: str, calls: Iterable[ThreadCall], admissions: Sequence[str], failing: set[str]) -> set[str]:
    """The tools whose failure the answer admits. A sentence holding an admission concerns the tools whose
    subject it names (`subject_words`), so "the build failed" admits nothing of a failed customer search; a
    sentence naming no tool's subject ("that did not work") admits every failing tool's failure."""
    phrases = [_phrases(admission) for admission in admissions]
    sentences = [said for sentence in _SENTENCE.split(text)
                 if any(phrase in (said := _phrases(sentence)) for phrase in phrases)]
    if not sentences:
        return set()
    excluded = {word for phrase in phrases for word in phrase.split()}
    subjects: dict[str, set[str]] = {}
    for call in calls:
        if call.tool:
            subjects.setdefault(call.tool, set()).update(subject_words(call, excluded))
    admitted: set[str] = set()
    for said in sentences:
        words = {word.removesuffix("'s") for word in said.split()}
        admitted |= {tool for tool, subject in subjects.items() if words & subject} or failing
    return admitted


def subject_words(call: ThreadCall, excluded: set[str]) -> set[str]:
    """What a call is about, as an answer would say it: the words of the tool's name and of its input's short
    strings (a query, a path, a command, a description; not a file's content or a long prompt, which would make
    any sentence about the call), three letters or more, singular and plural, less function words and
    `excluded` (the admissions' own words, else every admission would be about the call)."""
    strings = [call.tool, *(value for value in _strings(call.input) if len(value) <= SUBJECT_CHARS)]
    return {form for text in strings for word in _words(text) for form in _forms(word)} - STOP - excluded


def _phrases(text: str) -> str:
    """The text as lower-case words between single spaces, padded, so a phrase is found as `f" {phrase} "`."""
    return " " + " ".join(_all_words(text)) + " "


def tool_names(tool: str) -> set[str]:
    """How an answer may name a tool: its whole name and its last `__` segment, as words."""
    return {_phrases(tool), _phrases(tool.rsplit("__", 1)[-1])} - {"  "}


# ── count_mismatch ──────────────────────────────────────────────────────────


@dataclass(frozen=True)
class CountClaim:
    """A count the answer gives: "3 open invoices", or "3 invoices are open" (both with the modifier `open`)."""

    count: int
    noun: str
    modifiers: tuple[str, ...]
    """The words that qualify the noun: between the count and it, or after it and `are`/`were`."""
    text: str
    """As the answer says it (the count to the noun)."""


def count_findings(run: Run, rules: CheckRules) -> list[Finding]:
    if len(run.last_results) != 1 or run.last_results[0].outcome != GuardKind.OK:
        return []
    result = run.last_results[0]
    listed = _listed(result.content)
    if listed is None:
        return []
    items, key, stated = listed
    nouns = {form for word in (*rules.count_nouns, *_words(result.tool.rsplit("__", 1)[-1]), *_words(key))
             for form in _forms(word)}
    whole = {*_words(result.tool), *_words(key), *(w for s in _strings(result.input, keys=True) for w in _all_words(s)),
             *(word.lower() for word in rules.count_whole)}
    claims = [(block, claim) for block in run.answer
              for claim in count_claims(without_code(block.text), nouns, rules.count_qualifiers)]
    mentions = [set(_all_words(" ".join(_strings(item, keys=True)))) for item in items] \
        if any(m not in whole for _, claim in claims for m in claim.modifiers) else []
    checked = [(block, claim, agrees) for block, claim in claims
               if (agrees := _agrees(claim, len(items), stated, whole, mentions)) is not None]
    if not checked or any(agrees for *_, agrees in checked):
        return []
    said = ", ".join(excerpt(claim.text, 40) for _, claim, _ in checked[:3])
    where = f"its {excerpt(key, 40)} field lists" if key else "it lists"
    return [_finding(run, FindingKind.COUNT_MISMATCH, [*(block.record for block, _, _ in checked), *_result(result)],
                     f"the final answer counts {said}; the last tool result ({excerpt(result.tool, 60)}) is a list: "
                     f"{where} {len(items)}")]


def _agrees(claim: CountClaim, length: int, stated: set[int], whole: set[str], mentions: list[set[str]]) -> bool | None:
    """Whether a count agrees with the list: it is the list's length or an integer the result states, or, when
    modifiers name a part of the list (`overdue`, not a word of the tool, its key or its input, which describe
    every item), the number of items that mention them all. None when no item does: a part the record does not
    show (overdue by a due date), so no count to check."""
    part = {m for m in claim.modifiers if m not in whole}
    if not part:
        return claim.count == length or claim.count in stated
    mentioning = sum(part <= words for words in mentions)
    return None if not mentioning else claim.count in {length, mentioning, *stated}


def _result(call: ThreadCall) -> list[str]:
    return [call.result_record] if call.result_record else []


def _listed(content: Any) -> tuple[list[Any], str, set[int]] | None:
    """(items, the list's key or "", the integers the object states) of a result that lists items, else None."""
    value, problem = parse_problem(tool_text(content))
    if problem is not None:
        return None
    if isinstance(value, list):
        return value, "", set()
    if not isinstance(value, dict):
        return None
    lists = [(str(k), v) for k, v in value.items() if isinstance(v, list)]
    if len(lists) != 1:
        return None
    stated = {v for v in value.values() if isinstance(v, int) and not isinstance(v, bool)}
    return lists[0][1], lists[0][0], stated


def count_claims(text: str, nouns: set[str], qualifiers: Sequence[str]) -> list[CountClaim]:
    """Each count of `text`: a number standing alone (not after a qualifier, nor glued to a sign or a word: `#4`,
    `$3`, `2026-11-04`), up to `MAX_MODIFIERS` modifiers, then a noun of `nouns` (lower case), joined by spaces
    or a hyphen. A function word, a qualifier or another number in between ends it ("3 of the invoices",
    "3 more invoices"); so does a negation after the noun ("2 invoices are not open")."""
    tokens = list(_TOKEN.finditer(text))
    words = [token.group(0).lower().replace("’", "'") for token in tokens]
    skip = {q.lower() for q in qualifiers}

    def joined(a: int, b: int) -> bool:
        gap = text[tokens[a].end():tokens[b].start()]
        return gap == "-" or (gap.isspace() and "\n" not in gap)

    claims: list[CountClaim] = []
    modifiers: list[str]
    for i, token in enumerate(tokens):
        number = _number(words, i, joined)
        before = text[token.start() - 1] if token.start() else " "
        if number is None or (i and words[i - 1] in skip) or not (before.isspace() or before in _OPENING):
            continue
        count, first = number
        j, modifiers = first, []
        while j < len(tokens) and joined(j - 1, j):
            if words[j] in nouns:
                predicate = _predicate(tokens, words, j, joined)
                if predicate is not None:
                    claims.append(CountClaim(count, words[j], (*modifiers, *predicate),
                                        text[token.start():tokens[j].end()]))
                break
            if words[j] in STOP or words[j] in skip or _count(words[j]) is not None or j - first == MAX_MODIFIERS:
                break
            modifiers.extend(_all_words(tokens[j].group(0)))  # as items are read: `PastDue` is past, due
            j += 1
    return claims


def _number(words: Sequence[str], i: int, joined: Callable[[int, int], bool]) -> tuple[int, int] | None:
    """The count that starts at token `i` and the token after it: digits, a number word, or tens and a unit
    ("twenty-five", "thirty one"); None for none, and for the unit of such a pair."""
    if i and words[i - 1] in _TENS and words[i] in _UNITS and joined(i - 1, i):
        return None
    if i + 1 < len(words) and words[i] in _TENS and words[i + 1] in _UNITS and joined(i, i + 1):
        return _TENS[words[i]] + _UNITS[words[i + 1]], i + 2
    count = _count(words[i])
    return None if count is None else (count, i + 1)


def _predicate(tokens: Sequence[re.Match[str]], words: Sequence[str], noun: int,
               joined: Callable[[int, int], bool]) -> tuple[str, ...] | None:
    """The word after "NOUN are|were|is|was" that qualifies the noun ("3 invoices are open"): () when there is
    none, None after a negation (which items are not open is no count the list shows)."""
    verb = noun + 1
    if verb + 1 >= len(words) or not (joined(noun, verb) and joined(verb, verb + 1)):
        return ()
    if words[verb] in _NEGATED_BE or (words[verb] in _BE and words[verb + 1] in _NEGATIONS):
        return None
    word = words[verb + 1]
    if words[verb] not in _BE or word in STOP or _count(word) is not None:
        return ()
    return tuple(_all_words(tokens[verb + 1].group(0)))


def _count(token: str) -> int | None:
    if _GROUPED.fullmatch(token) and len(token) <= MAX_DIGITS:
        return int(token.replace(",", ""))
    return NUMBER_WORDS.get(token)


def _strings(value: Any, *, keys: bool = False) -> list[str]:
    """The strings a JSON value holds, and with `keys` the keys whose value is truthy (`"overdue": true`)."""
    found, stack = [], [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            found.append(item)
        elif isinstance(item, dict):
            found.extend(str(k) for k, v in item.items() if keys and v)
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return found


def _all_words(text: str) -> list[str]:
    """The words of a text, a name or a key (`list_openInvoices` → list, open, invoices), lower case."""
    return [w.replace("’", "'") for w in _WORD.findall(_CASE_CHANGE.sub(" ", text).lower())]


def _words(name: str) -> list[str]:
    """The words of a name or a text, three letters or more."""
    return [w for w in _all_words(name) if len(w) >= 3]


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
