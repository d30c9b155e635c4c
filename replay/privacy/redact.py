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

The recognizers (replay/privacy/recognizers.py) follow Presidio's model — a candidate finder, a validator
from a well-kept library, context rules: `phonenumbers` for phone numbers, `python-stdnum` for
IBAN and card check digits, `detect-secrets`' plugins for keys, tokens, private keys and
`password: …` values, `ipaddress` for IP addresses, a pattern for e-mail, and person names only
where a cue announces one (`Dear …`, `Mr. …`, `Name: …`, a `key: value` line whose key names a person).
In a JSON object, the string under a key that names a secret (`password`, `api_key`, `client_secret`,
…, the keyword plugin's list) is a SECRET whole, and the names in a value under a key that names a
person (`customer`, `assignee`, `to`, `first_name`; `name` in an object that describes a person) are
PERSONs. Names without a cue and street addresses are not detected: that needs an NER model, which this
project does not ship.

Beside what the recognizers find by shape, `TenantNames` (replay/privacy/tenants.py) finds by value what
the platform knows names a tenant: the registered workspace names (WORKSPACE) and the paths the runtime
wrote (PATH). Overlaps go to the earlier type in `KINDS`.
"""

from __future__ import annotations

import bisect
import hashlib
import hmac
import json
import re
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from detect_secrets.plugins.keyword import DENYLIST

from core.jsonfile import parse_problem
from replay.privacy import recognizers
from replay.privacy.recognizers import (
    PHONE_REGIONS,
    Span,
    card_number,
    keyword_value,
    person_key,
    person_record,
    weak_person_key,
)
from replay.privacy.tenants import NO_NAMES, TenantNames, environment_paths

TYPES = ("EMAIL", "SECRET", "IBAN", "CARD", "IP", "PHONE", "PERSON")
"""What the recognizers find by shape."""
TENANT_TYPES = ("PATH", "WORKSPACE")
"""What the platform knows names a tenant (replay/privacy/tenants.py)."""
KINDS = ("PATH", "EMAIL", "SECRET", "IBAN", "CARD", "IP", "PHONE", "WORKSPACE", "PERSON")
"""Every pseudonym type, in the order overlaps are settled: a path whole before the name in it, an e-mail
address whole before a workspace name in its domain."""
PSEUDONYM = re.compile(r"<(?:" + "|".join(KINDS) + r")_[0-9a-f]{8}>")
_SECRET_KEY = re.compile(r"(?i)(?:" + "|".join(DENYLIST) + r")")


@dataclass(frozen=True)
class RedactionFinding:
    kind: str
    start: int
    end: int
    value: str


def _detectors(regions: tuple[str, ...], names: TenantNames,
               person: bool) -> tuple[tuple[str, Callable[[str], Iterator[Span]]], ...]:
    people: Callable[[str], Iterator[Span]] = recognizers.persons
    if person:
        def people(text: str) -> Iterator[Span]:
            yield from recognizers.names_in_value(text)
            yield from recognizers.persons(text)
    return (("PATH", names.runtime_paths), ("EMAIL", recognizers.emails), ("SECRET", recognizers.secrets),
            ("IBAN", recognizers.ibans), ("CARD", recognizers.cards), ("IP", recognizers.ips),
            ("PHONE", lambda text: recognizers.phones(text, regions)), ("WORKSPACE", names.workspace_names),
            ("PERSON", people))


def find(text: str, regions: tuple[str, ...] = PHONE_REGIONS, names: TenantNames = NO_NAMES,
         person: bool = False) -> list[RedactionFinding]:
    """Every detected value in `text`, in order, without overlaps (earlier types win);
    pseudonyms already in the text are never findings. `regions`: whose national phone numbers;
    `names`: the tenant's registered names and runtime paths; `person`: the text is a value under a key
    that names a person (its names are found without a cue in the text). A workspace name's value is its
    registered spelling."""
    taken = [m.span() for m in PSEUDONYM.finditer(text)]  # disjoint, in order
    found: list[RedactionFinding] = []
    for kind, detect in _detectors(regions, names, person):
        for start, end in detect(text):
            at = bisect.bisect_left(taken, (start, end))
            if (at == 0 or taken[at - 1][1] <= start) and (at == len(taken) or end <= taken[at][0]):
                taken.insert(at, (start, end))
                value = names.spelled(text[start:end]) if kind == "WORKSPACE" else text[start:end]
                found.append(RedactionFinding(kind, start, end, value))
    return sorted(found, key=lambda f: f.start)


def request_paths(value: Any) -> set[str]:
    """The working directories the environment blocks in a document name (every string, JSON ones as text):
    a session's path is replaced wherever it stands, in the messages before its block too."""
    if isinstance(value, dict):
        return {p for v in value.values() for p in request_paths(v)}
    if isinstance(value, list):
        return {p for v in value for p in request_paths(v)}
    if isinstance(value, str) and "Primary working directory:" in value:
        return {value[start:end] for start, end in environment_paths(value)}
    return set()


def _person_children(value: dict[str, Any], person: bool) -> Callable[[str], bool]:
    """Which keys of an object announce a person's name: one that names a person, and `name` in an object
    that describes one (its siblings say so, or the key it sits under named a person)."""
    describes = person or person_record(value)
    return lambda key: person_key(key) or (describes and weak_person_key(key))


def _card_number(value: int) -> bool:
    return card_number(str(abs(value)))


def secret_key(key: str) -> bool:
    """A JSON key that names a secret (`password`, `api_key`, `client_secret`: detect-secrets'
    keyword list): the string under it is a SECRET whole, unless it is a word or a template."""
    return _SECRET_KEY.search(key) is not None


def _keyed_secret(value: str) -> bool:
    return not PSEUDONYM.fullmatch(value) and keyword_value(value) is not None


@dataclass
class Pseudonymizer:
    """Redacts values with one workspace's key; `counts` tallies the replacements per type."""

    key: bytes
    counts: Counter[str] = field(default_factory=Counter)
    regions: tuple[str, ...] = PHONE_REGIONS
    names: TenantNames = NO_NAMES

    def pseudonym(self, kind: str, value: str) -> str:
        digest = hmac.new(self.key, f"{kind}:{value}".encode(), hashlib.sha256).hexdigest()
        return f"<{kind}_{digest[:8]}>"

    def text(self, text: str, person: bool = False) -> str:
        findings = find(text, self.regions, self.names, person)
        if not findings:
            return text
        parts, at = [], 0
        for f in findings:
            parts += [text[at:f.start], self.pseudonym(f.kind, f.value)]
            self.counts[f.kind] += 1
            at = f.end
        return "".join([*parts, text[at:]])

    def value(self, value: Any, person: bool = False) -> Any:
        """`value` with every detected value replaced; keys, lengths and types of containers kept. `person`:
        the value sits under a key that names a person."""
        if isinstance(value, dict):
            names_person = _person_children(value, person)
            return {k: self._keyed(v) if secret_key(k) and isinstance(v, str) and _keyed_secret(v)
                    else self.value(v, names_person(k)) for k, v in value.items()}
        if isinstance(value, list):
            return [self.value(v, person) for v in value]
        if isinstance(value, str):
            return self._string(value, person)
        if isinstance(value, int) and not isinstance(value, bool) and _card_number(value):
            self.counts["CARD"] += 1
            return self.pseudonym("CARD", str(value))
        return value

    def _keyed(self, value: str) -> str:
        self.counts["SECRET"] += 1
        return self.pseudonym("SECRET", value)

    def _string(self, text: str, person: bool) -> str:
        stripped = text.strip()
        if stripped[:1] in ("{", "[") and stripped[-1:] in ("}", "]"):
            decoded, _ = parse_problem(text)  # too deep or unreadable: searched as text
            if isinstance(decoded, (dict, list)):
                redacted = self.value(decoded, person)
                return text if redacted == decoded else json.dumps(redacted, ensure_ascii=False)
        return self.text(text, person)


@dataclass(frozen=True)
class Residual:
    """A detectable value left in a document: where (a JSON path) and of what type."""

    path: str
    kind: str


def residuals(value: Any, path: str = "$", regions: tuple[str, ...] = PHONE_REGIONS,
              names: TenantNames = NO_NAMES, person: bool = False) -> list[Residual]:
    """Every detectable value in a JSON document — in values and in keys (a key cannot be
    redacted, so a key that holds one fails the check) — with its JSON path; read with the key context
    redaction reads (a secret's key, a person's key)."""
    if isinstance(value, dict):
        found = []
        names_person = _person_children(value, person)
        for k, v in value.items():
            child = f"{path}.{k}" if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", k) else f"{path}[{json.dumps(k)}]"
            found += [Residual(f"{child} (key)", f.kind) for f in find(k, regions, names)]
            if secret_key(k) and isinstance(v, str) and _keyed_secret(v):
                found.append(Residual(child, "SECRET"))
            else:
                found += residuals(v, child, regions, names, names_person(k))
        return found
    if isinstance(value, list):
        return [r for i, v in enumerate(value) for r in residuals(v, f"{path}[{i}]", regions, names, person)]
    if isinstance(value, str):
        stripped = value.strip()
        if stripped[:1] in ("{", "[") and stripped[-1:] in ("}", "]"):
            decoded, _ = parse_problem(value)  # a JSON string is checked as redaction saw it (keys as context)
            if isinstance(decoded, (dict, list)):
                return [Residual(path, r.kind) for r in residuals(decoded, path, regions, names, person)]
        return [Residual(path, f.kind) for f in find(value, regions, names, person)]
    if isinstance(value, int) and not isinstance(value, bool) and _card_number(value):
        return [Residual(path, "CARD")]
    return []
