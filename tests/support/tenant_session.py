"""A tenant's session derived from a real recorded one (tests/replay/corpus/data/claude-code, written by Claude
Code itself through the gateway): the lookup session copied into a workspace, its working directory moved under
a directory named after the workspace (every `cwd` field and the environment block's `Primary working
directory:`, and the project directory Claude Code names after it), and its successful lookup's tool result given
a person, an e-mail address, a phone number and the invoice's file under the working directory. Only values change; every record stays as Claude Code wrote it,
and the request log's hashes (and the gateway's descriptors of the same calls, `captures.jsonl`) are recomputed
as Claude Code and the gateway would have computed them for these values. Nothing is made by hand."""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path
from typing import Any

from core.canonical import message_digest, request_digest
from core.capture_store import CapturedDecision
from replay.corpus.claude_code import API, logged_calls, read_session_file
from replay.privacy.tenants import project_slug
from tests.support.curation import DATA, LOOKUP, WORKSPACE, session_path

RECORDED_CWD = "/tmp/worker-tier-agent"
RECORDED_RESULT = json.dumps({"id": "INV-7", "status": "paid"})
PERSON, EMAIL, PHONE = "Jane Roe", "jane.roe@example.com", "+49 30 1234 5678"


def result(cwd: str) -> str:
    """The issue's record: a lookup that returns the customer, with her address and number, and the invoice's
    file (a path under the working directory, as a file tool returns one)."""
    return json.dumps({"id": "INV-7", "status": "paid", "customer": f"{PERSON}, {EMAIL}", "phone": PHONE,
                       "pdf": f"{cwd}/invoices/INV-7.pdf"})


def _values(value: Any, cwd: str) -> Any:
    """Every string of a record with the working directory moved and the lookup's result given the customer."""
    if isinstance(value, dict):
        return {k: _values(v, cwd) for k, v in value.items()}
    if isinstance(value, list):
        return [_values(v, cwd) for v in value]
    if isinstance(value, str):
        return result(cwd) if value == RECORDED_RESULT else value.replace(RECORDED_CWD, cwd)
    return value


def _digests(path: Path) -> list[str]:
    """The hash of every message the request log can name, in file order (user lines, blobs, answers)."""
    parsed = read_session_file(path, LOOKUP)
    users = [message_digest(API, {"role": "user", "content": line["message"]["content"]})
             for _, line in parsed.conversation if line.get("type") == "user"]
    return [*users, *(message_digest(API, m) for m in parsed.blobs.values()),
            *(message_digest(API, m) for _, m in parsed.answers.values())]


def tenant_session(root: Path, workspace: str, cwd: str) -> tuple[Path, dict[str, str]]:
    """The lookup session as `workspace`'s, run in `cwd`; returns its file and the message hashes it changed."""
    source = session_path(DATA, WORKSPACE, LOOKUP)
    target = root / workspace / "projects" / project_slug(cwd) / f"{LOOKUP}.jsonl"
    target.parent.mkdir(parents=True)
    lines = [_values(json.loads(line), cwd) for line in source.read_text().splitlines()]
    text = "".join(json.dumps(line, separators=(",", ":"), ensure_ascii=False) + "\n" for line in lines)
    target.write_text(text)
    changed = {old: new for old, new in zip(_digests(source), _digests(target), strict=True) if old != new}
    assert PERSON in text and cwd in text and len(changed) >= 3  # the blob and the two results at least
    for old, new in changed.items():
        text = text.replace(old, new)
    target.write_text(text)
    parsed = read_session_file(target, LOOKUP)
    assert len(logged_calls(parsed)) == 3 and not [c.problem for c in parsed.calls if c.problem]
    return target, changed


def tenant_captures(target: Path, workspace: str, changed: dict[str, str]) -> list[CapturedDecision]:
    """The gateway's descriptors of the recorded session's calls, as it would have captured the derived one: its
    workspace, the changed message hashes, the request hash of the call that now has them."""
    calls = logged_calls(read_session_file(target, LOOKUP))
    rows = []
    for line in (DATA / "captures.jsonl").read_text().splitlines():
        row = CapturedDecision(**json.loads(line))
        if row.session != LOOKUP:
            continue
        hashes = [changed.get(h, h) for h in row.message_hashes]
        call = next(c for c in calls if [message_digest(API, m) for m in c.body["messages"]] == hashes)
        rows.append(CapturedDecision(**{**asdict(row), "workspace": workspace, "message_hashes": hashes,
                                        "request_sha256": request_digest(API, call.body)}))
    return rows
