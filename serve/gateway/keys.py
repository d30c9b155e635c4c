"""Client keys: who may call the model APIs, and for which workspace.

The keys file (TOML, `[auth] keys_file`) holds one `[[keys]]` table per key:

    [[keys]]
    name = "ws-acme-1"                   # the entry's name in logs and errors (never the key)
    workspace = "ws-acme"                # bound: every request with this key is ws-acme's
    hash = "sha256:9f86d081884c7d65..."  # `worker-serve keys make` prints the key and this line

    [[keys]]
    name = "replay"
    workspaces = "*"                     # a service key: may name any workspace (or a list of them)
    hash = "sha256:..."
    weight = 0.25                        # fair-share limits of this key (default: [fair_share])

The file holds only the SHA-256 of each key, never a key: the file is not a secret to copy
around, and a key is shown once, when it is made. It must still be readable by its owner only
(as the pseudonym keys file): who can write it decides who is which tenant.

Rules, each checked with the entry's line: `name` unique; each hash once; exactly one of
`workspace` (bound) and `workspaces` (service); at most two bound keys per workspace (the old
and the new while a key is rotated), and those two with the same limits, since both count
against the workspace's one share.

Why a dict lookup by hash is enough: a key is 256 random bits, and the lookup is keyed by its
SHA-256, which a caller can compute for any guess. The lookup's timing can only tell how the
digest of a guess relates to stored digests, which says nothing about a key (no preimage); the
found entry is still compared with `hmac.compare_digest`. Keys are never logged, stored or echoed.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import re
import secrets
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, ValidationError, field_validator

from core.names import NAME_RULE, Name, excerpt
from core.records import Strict
from core.tomlfile import ConfigError, line_of, read_private, toml_problem
from serve.errors import ServeError
from serve.gateway.fairshare import ShareLimits

KEY_PREFIX = "wt_"
KEY_MAX_CHARS = 512
"""A presented key longer than this is unknown without being hashed (a made key has 46 characters)."""
KEYS_PER_WORKSPACE = 2
_HASH = re.compile(r"^sha256:[0-9a-f]{64}$")
HASH_RULE = 'hash must be "sha256:" and 64 lowercase hex digits (the line `worker-serve keys make` prints)'
LIMIT_FIELDS = ("weight", "max_in_flight", "requests_per_s", "request_burst", "tokens_per_min")


class KeysFileError(ServeError, ConfigError):
    """A keys file that cannot be used; the message names the file, the entry's line and the rule."""


class KeyEntry(Strict):
    """One `[[keys]]` table."""

    name: Name
    hash: str
    workspace: Name | None = None
    workspaces: list[Name] | Literal["*"] | None = None
    weight: float | None = Field(None, gt=0, allow_inf_nan=False)
    max_in_flight: int | None = Field(None, ge=1)
    requests_per_s: float | None = Field(None, gt=0, allow_inf_nan=False)
    request_burst: int | None = Field(None, ge=1)
    tokens_per_min: int | None = Field(None, ge=1)

    @field_validator("hash")
    @classmethod
    def _a_sha256(cls, value: str) -> str:
        if not _HASH.fullmatch(value):
            raise ValueError(HASH_RULE)
        return value


@dataclass(frozen=True)
class ClientKey:
    """A key's entry as the gateway uses it (the digest, never the key)."""

    name: str
    digest: bytes
    workspace: str | None
    """Bound keys: the workspace; service keys: None."""
    allowed: frozenset[str] | None
    """Service keys: the workspaces they may name (None: any); bound keys: their one workspace."""
    limits: ShareLimits

    @property
    def share(self) -> str:
        """What its fair share is counted against: the workspace of a bound key, else the key itself."""
        return f"ws:{self.workspace}" if self.workspace is not None else f"key:{self.name}"

    def may_name(self, workspace: str) -> bool:
        return self.allowed is None or workspace in self.allowed


@dataclass(frozen=True)
class KeyRing:
    """The keys in force: one file's entries by digest."""

    by_digest: Mapping[bytes, ClientKey]

    def find(self, presented: str) -> ClientKey | None:
        if not presented or len(presented) > KEY_MAX_CHARS:
            return None
        digest = digest_of(presented)
        entry = self.by_digest.get(digest)
        if entry is None or not hmac.compare_digest(entry.digest, digest):
            return None
        return entry

    def __len__(self) -> int:
        return len(self.by_digest)


def digest_of(key: str) -> bytes:
    return hashlib.sha256(key.encode("utf-8", "surrogatepass")).digest()


def make_key() -> tuple[str, str]:
    """A new random key (256 bits) and its `hash = "sha256:…"` value."""
    key = KEY_PREFIX + secrets.token_urlsafe(32)
    return key, "sha256:" + digest_of(key).hex()


def _rule(err: Mapping[str, Any]) -> str:
    """A pydantic error of one entry in words (the field and the rule, never a pydantic path)."""
    loc = [str(p) for p in err["loc"]]
    field = loc[0] if loc else "entry"
    kind = err["type"]
    if kind == "missing":
        return f"{field} is missing"
    if kind == "extra_forbidden":
        return f"{excerpt(field)} is not a field of a key entry (fields: name, hash, workspace, workspaces, " \
               f"{', '.join(LIMIT_FIELDS[:-1])} and {LIMIT_FIELDS[-1]})"
    if field in ("name", "workspace", "workspaces") and kind == "string_pattern_mismatch":
        return f"{field} must be a name ({NAME_RULE})" if field != "workspaces" else \
            f'workspaces must be "*" or a list of names ({NAME_RULE})'
    if field == "workspaces":
        return 'workspaces must be "*" or a list of workspace names'
    message = str(err["msg"]).removeprefix("Value error, ")
    return f"{field}: {message}" if field != "hash" else message


def _entry_label(index: int, raw: Any) -> str:
    label = f"key entry {index + 1}"
    if isinstance(raw, dict) and isinstance(raw.get("name"), str):
        label += f" ({excerpt(raw['name'])})"
    return label


def _limits(entry: KeyEntry, defaults: ShareLimits) -> ShareLimits:
    values = {f: getattr(entry, f) for f in LIMIT_FIELDS if getattr(entry, f) is not None}
    return ShareLimits(**{**{f: getattr(defaults, f) for f in LIMIT_FIELDS}, **values})


_TABLE_LINE = re.compile(r"^\s*\[\[\s*keys\s*\]\]\s*(#.*)?$")


class _Lines:
    """Where each `[[keys]]` table and its fields are, found in one pass (a file may hold 10 000 keys)."""

    def __init__(self, text: str) -> None:
        self.text_lines = text.splitlines()
        self.tables = [n for n, line in enumerate(self.text_lines, start=1) if _TABLE_LINE.match(line)]

    def table(self, index: int) -> int | None:
        return self.tables[index] if index < len(self.tables) else None

    def field(self, index: int, name: str) -> int | None:
        start = self.table(index)
        if start is None:
            return None
        end = self.tables[index + 1] if index + 1 < len(self.tables) else len(self.text_lines) + 1
        pattern = re.compile(rf"^\s*{re.escape(name)}\s*=")
        return next((n for n in range(start + 1, end) if pattern.match(self.text_lines[n - 1])), start)


def parse_keys(data: bytes, path: Path, defaults: ShareLimits) -> KeyRing:
    """The keys of a keys file's bytes; every problem, with its line, in one KeysFileError."""
    raw, problem = toml_problem(data)
    if raw is None:
        raise KeysFileError(f"{path}: {problem}")
    text = data.decode("utf-8")
    lines = _Lines(text)
    problems: list[str] = []

    def fail(line: int | None, what: str) -> None:
        problems.append(f"{path}:{line}: {what}" if line else f"{path}: {what}")

    for key in raw:
        if key != "keys":
            fail(line_of(text, [key]), f"{excerpt(key)} cannot be in a keys file: it holds only [[keys]] tables")
    tables = raw.get("keys", [])
    if not isinstance(tables, list):
        fail(line_of(text, ["keys"]), "keys must be [[keys]] tables, one per key")
        tables = []
    entries: list[tuple[int, KeyEntry]] = []
    for index, table in enumerate(tables):
        try:
            entry = KeyEntry.model_validate(table)
        except ValidationError as exc:
            label = _entry_label(index, table)
            for err in exc.errors()[:5]:
                field = str(err["loc"][0]) if err["loc"] else ""
                fail(lines.field(index, field) if field else lines.table(index), f"{label}: {_rule(err)}")
            continue
        if (entry.workspace is None) == (entry.workspaces is None):
            fail(lines.table(index), f"{_entry_label(index, table)}: give exactly one of workspace (a key of one "
                                     'workspace) and workspaces (a service key: "*" or a list of the workspaces it may '
                                     "name)")
            continue
        entries.append((index, entry))
    problems += _cross_rules(entries, lines, path)
    if problems:
        shown = problems[:20] + ([f"… and {len(problems) - 20} more"] if len(problems) > 20 else [])
        raise KeysFileError(f"{path}: invalid client keys file\n" + "\n".join(shown))
    keys = {}
    for _, entry in entries:
        digest = bytes.fromhex(entry.hash.removeprefix("sha256:"))
        allowed = None if entry.workspaces == "*" else frozenset(entry.workspaces or [entry.workspace or ""])
        keys[digest] = ClientKey(entry.name, digest, entry.workspace, allowed, _limits(entry, defaults))
    return KeyRing(keys)


def _cross_rules(entries: list[tuple[int, KeyEntry]], lines: _Lines, path: Path) -> list[str]:
    """The rules between entries: unique names and hashes, at most two keys a workspace, one share each."""
    problems = []
    names: dict[str, int] = {}
    hashes: dict[str, str] = {}
    by_workspace: dict[str, list[tuple[int, KeyEntry]]] = {}
    for index, entry in entries:
        where = f"{path}:{lines.table(index)}: key entry {index + 1} ({entry.name!r})"
        if entry.name in names:
            problems.append(f"{where}: the name {entry.name!r} is also entry {names[entry.name] + 1}'s; names are "
                            "unique")
        names.setdefault(entry.name, index)
        if entry.hash in hashes:
            problems.append(f"{where}: the same key as {hashes[entry.hash]!r} (each key is listed once)")
        hashes.setdefault(entry.hash, entry.name)
        if entry.workspace is not None:
            by_workspace.setdefault(entry.workspace, []).append((index, entry))
    for workspace, bound in by_workspace.items():
        where = f"{path}:{lines.table(bound[-1][0])}"
        if len(bound) > KEYS_PER_WORKSPACE:
            problems.append(f"{where}: workspace {workspace!r} has {len(bound)} keys "
                            f"({', '.join(e.name for _, e in bound)}); at most {KEYS_PER_WORKSPACE} (the old and "
                            "the new while one is rotated): remove the oldest")
        elif len({tuple(getattr(e, f) for f in LIMIT_FIELDS) for _, e in bound}) > 1:
            problems.append(f"{where}: the keys of workspace {workspace!r} ({', '.join(e.name for _, e in bound)}) "
                            "have different limits; they count against the workspace's one fair share, so give "
                            "them the same")
    return problems


def _signature(path: Path) -> tuple[int, int, int] | None:
    try:
        info = os.stat(path)
    except OSError:
        return None
    return info.st_ino, info.st_size, info.st_mtime_ns


class KeysFile:
    """The keys file and the keys read from it: read at start (a bad file stops the start), then again
    whenever its inode, size or modification time changes. A bad new file keeps the keys in force.

    `changed` and `read` run on the caller's schedule (the gateway checks every `reload_interval_s`,
    reading in a worker thread); the one assignment to `ring` is what requests see, so a request
    uses one whole file's keys, the old or the new, never a mix."""

    def __init__(self, path: Path, defaults: ShareLimits) -> None:
        self.path, self.defaults = path, defaults
        self._seen = _signature(path)
        self.ring = self.read()

    def changed(self) -> bool:
        """Whether the file looks different from the last one tried (remembered now, before it is read:
        a change during the read is seen at the next check)."""
        signature = _signature(self.path)
        if signature == self._seen:
            return False
        self._seen = signature
        return True

    def read(self) -> KeyRing:
        return parse_keys(read_private(self.path, "client keys file"), self.path, self.defaults)
