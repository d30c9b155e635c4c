"""Typed redaction with tenant-scoped pseudonyms, and the privacy check (DESIGN §9, 001 S14/S15). Pure.

Detected values become typed pseudonyms, `<EMAIL_3f9a1c2b>`: the type, then the first 8 hex
digits of HMAC-SHA256(workspace key, type + ":" + value). So the same value maps to the same
pseudonym everywhere in one workspace — in the request and in the failed action alike, which
keeps exact-repeat scoring meaningful — while two workspaces (two keys) never share one, and
without the key a pseudonym cannot be tested against a guessed value. The key never enters
the suite.

Only values change, never keys: objects keep their key sets, lists their lengths, and a JSON
string that holds an object or a list (a tool call's `arguments`) is decoded, redacted and
re-encoded, so its key set survives too. A string in which nothing was found stays
byte-identical.

Detectors are plain patterns with checks, not an NLP model: e-mail; phone numbers (9–15
digits, written with a `+`/`00` prefix or with separators); IBAN (ISO 13616 mod-97); card
numbers (13–19 digits, Luhn); API keys and tokens (well-known prefixes: `sk-`, `ghp_`,
`github_pat_`, `AKIA`, `xox…-`, `AIza`, `glpat-`, JWTs; and long high-entropy strings mixing
upper case, lower case and digits); IPv4 and IPv6 addresses (validated by `ipaddress`).
Overlaps go to the earlier type in `TYPES`. Person names have no recognizer here: a reliable
one needs an NLP model (Presidio's default is a downloaded spaCy model), which this project
does not ship.
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import json
import math
import re
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from core.jsonfile import parse_problem

TYPES = ("EMAIL", "SECRET", "IBAN", "CARD", "IP", "PHONE")
PSEUDONYM = re.compile(r"<(?:" + "|".join(TYPES) + r")_[0-9a-f]{8}>")

_EMAIL = re.compile(r"(?<![\w.%+-])[A-Za-z0-9._%+-]+@[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?"
                    r"(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?)*\.[A-Za-z]{2,}(?![\w-])")
_SECRET_PREFIXED = re.compile(
    r"(?<![\w-])(?:sk-(?:proj-|ant-)?[A-Za-z0-9_-]{16,}|sk_(?:live|test)_[A-Za-z0-9]{16,}"
    r"|gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{22,}|(?:AKIA|ASIA)[0-9A-Z]{16}"
    r"|xox[abposr]-[A-Za-z0-9-]{10,}|AIza[0-9A-Za-z_-]{35}|glpat-[A-Za-z0-9_-]{20,}"
    r"|eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,})(?![\w-])")
_SECRET_RANDOM = re.compile(r"(?<![\w+=-])[A-Za-z0-9_+=-]{32,}(?![\w+=-])")
_IBAN = re.compile(r"(?<![A-Za-z0-9])[A-Z]{2}\d{2}(?: ?[A-Z0-9]){11,30}(?![A-Za-z0-9])")
_CARD = re.compile(r"(?<![\d-])\d(?:[ -]?\d){12,}(?![\d-])")
_IPV4 = re.compile(r"(?<![\w.])(?:\d{1,3}\.){3}\d{1,3}(?!\.?\d)")
_IPV6 = re.compile(r"(?<![\w:.])(?:[0-9A-Fa-f]{0,4}:){2,7}[0-9A-Fa-f]{0,4}(?![\w:])")
_PHONE = re.compile(r"(?<![\w+.])(?:\+|00)?\(?\d[\d ().-]{6,22}\d(?![\w])")
_DATE = re.compile(r"\d{4}-\d{2}-\d{2}|\d{1,2}[./]\d{1,2}[./]\d{2,4}")


@dataclass(frozen=True)
class Finding:
    kind: str
    start: int
    end: int
    value: str


def luhn(digits: str) -> bool:
    total = 0
    for i, ch in enumerate(reversed(digits)):
        d = int(ch) * (2 if i % 2 else 1)
        total += d - 9 if d > 9 else d
    return total % 10 == 0


def iban_valid(compact: str) -> bool:
    """ISO 13616: move the first four characters to the end, letters to numbers, mod 97 is 1."""
    if not 15 <= len(compact) <= 34 or not compact[:2].isalpha() or not compact[2:4].isdigit():
        return False
    rearranged = compact[4:] + compact[:4]
    return int("".join(str(int(c, 36)) for c in rearranged)) % 97 == 1


def _entropy(text: str) -> float:
    counts = Counter(text)
    return -sum(n / len(text) * math.log2(n / len(text)) for n in counts.values())


def _emails(text: str) -> Iterator[tuple[int, int]]:
    for m in _EMAIL.finditer(text):
        yield m.span()


def _secrets(text: str) -> Iterator[tuple[int, int]]:
    for m in _SECRET_PREFIXED.finditer(text):
        yield m.span()
    for m in _SECRET_RANDOM.finditer(text):
        token = m.group()
        if (sum(c.isdigit() for c in token) >= 3 and sum(c.isupper() for c in token) >= 2
                and sum(c.islower() for c in token) >= 2 and _entropy(token) >= 3.5):
            yield m.span()


def _ibans(text: str) -> Iterator[tuple[int, int]]:
    for m in _IBAN.finditer(text):
        end = m.end()
        while end - m.start() >= 15:  # a match may run into an upper-case word after the IBAN
            if iban_valid(text[m.start():end].replace(" ", "")):
                yield m.start(), end
                break
            end -= 1
            while end > m.start() and text[end - 1] == " ":
                end -= 1


def _cards(text: str) -> Iterator[tuple[int, int]]:
    """Runs of digit groups; within a run, the longest Luhn-valid span of whole groups from each
    group on (a run may start with a number that is not part of the card: `no. 7 4111 1111 …`).
    A card has at most 19 digits, so at most 19 groups from each one are tried: a run of
    thousands of groups (`1 1 1 …`) costs linear time, not cubic."""
    for m in _CARD.finditer(text):
        groups = [(m.start() + g.start(), m.start() + g.end()) for g in re.finditer(r"\d+", m.group())]
        i = 0
        while i < len(groups):
            for j in range(min(len(groups) - 1, i + 18), i - 1, -1):
                digits = re.sub(r"\D", "", text[groups[i][0]:groups[j][1]])
                if 13 <= len(digits) <= 19 and luhn(digits):
                    yield groups[i][0], groups[j][1]
                    i = j
                    break
            i += 1


def _ips(text: str) -> Iterator[tuple[int, int]]:
    for m in _IPV4.finditer(text):
        if all(int(part) <= 255 for part in m.group().split(".")):
            yield m.span()
    for m in _IPV6.finditer(text):
        candidate = m.group()
        if sum(bool(group) for group in candidate.split(":")) >= 2:
            try:
                ipaddress.IPv6Address(candidate)
            except ValueError:
                continue
            yield m.span()


def _phones(text: str) -> Iterator[tuple[int, int]]:
    for m in _PHONE.finditer(text):
        value = m.group().rstrip(" (.-")
        digits = re.sub(r"\D", "", value)
        prefixed = value.startswith(("+", "00", "("))
        separated = re.search(r"\d[ ().-]+\d", value) is not None
        if 9 <= len(digits) <= 15 and (prefixed or separated) and not _DATE.search(value) \
                and value.count("(") == value.count(")"):
            yield m.start(), m.start() + len(value)


_DETECTORS: tuple[tuple[str, Callable[[str], Iterator[tuple[int, int]]]], ...] = (
    ("EMAIL", _emails), ("SECRET", _secrets), ("IBAN", _ibans), ("CARD", _cards), ("IP", _ips),
    ("PHONE", _phones))


def find(text: str) -> list[Finding]:
    """Every detected value in `text`, in order, without overlaps (earlier types win);
    pseudonyms already in the text are never findings."""
    taken = [m.span() for m in PSEUDONYM.finditer(text)]
    found: list[Finding] = []
    for kind, detect in _DETECTORS:
        for start, end in detect(text):
            if all(end <= s or start >= e for s, e in taken):
                taken.append((start, end))
                found.append(Finding(kind, start, end, text[start:end]))
    return sorted(found, key=lambda f: f.start)


def _card_number(value: int) -> bool:
    digits = str(abs(value))
    return 13 <= len(digits) <= 19 and luhn(digits)


@dataclass
class Pseudonymizer:
    """Redacts values with one workspace's key; `counts` tallies the replacements per type."""

    key: bytes
    counts: Counter[str] = field(default_factory=Counter)

    def pseudonym(self, kind: str, value: str) -> str:
        digest = hmac.new(self.key, f"{kind}:{value}".encode(), hashlib.sha256).hexdigest()
        return f"<{kind}_{digest[:8]}>"

    def text(self, text: str) -> str:
        findings = find(text)
        if not findings:
            return text
        parts, at = [], 0
        for f in findings:
            parts += [text[at:f.start], self.pseudonym(f.kind, f.value)]
            self.counts[f.kind] += 1
            at = f.end
        return "".join([*parts, text[at:]])

    def value(self, value: Any) -> Any:
        """`value` with every detected value replaced; keys, lengths and types of containers kept."""
        if isinstance(value, dict):
            return {k: self.value(v) for k, v in value.items()}
        if isinstance(value, list):
            return [self.value(v) for v in value]
        if isinstance(value, str):
            return self._string(value)
        if isinstance(value, int) and not isinstance(value, bool) and _card_number(value):
            self.counts["CARD"] += 1
            return self.pseudonym("CARD", str(value))
        return value

    def _string(self, text: str) -> str:
        stripped = text.strip()
        if stripped[:1] in ("{", "[") and stripped[-1:] in ("}", "]"):
            decoded, _ = parse_problem(text)  # too deep or unreadable: searched as text
            if isinstance(decoded, (dict, list)):
                redacted = self.value(decoded)
                return text if redacted == decoded else json.dumps(redacted, ensure_ascii=False)
        return self.text(text)


@dataclass(frozen=True)
class Residual:
    """A detectable value left in a document: where (a JSON path) and of what type."""

    path: str
    kind: str


def residuals(value: Any, path: str = "$") -> list[Residual]:
    """Every detectable value in a JSON document — in values and in keys (a key cannot be
    redacted, so a key that holds one fails the check) — with its JSON path."""
    if isinstance(value, dict):
        found = []
        for k, v in value.items():
            child = f"{path}.{k}" if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", k) else f"{path}[{json.dumps(k)}]"
            found += [Residual(f"{child} (key)", f.kind) for f in find(k)]
            found += residuals(v, child)
        return found
    if isinstance(value, list):
        return [r for i, v in enumerate(value) for r in residuals(v, f"{path}[{i}]")]
    if isinstance(value, str):
        return [Residual(path, f.kind) for f in find(value)]
    if isinstance(value, int) and not isinstance(value, bool) and _card_number(value):
        return [Residual(path, "CARD")]
    return []
