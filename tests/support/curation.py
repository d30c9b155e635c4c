"""Corpora for the curation tests, made from the recorded Claude Code sessions (tests/replay/corpus/data): the
real files copied under other workspaces and session ids, with planted changes of known effect — the model an
answer's record names (its origin), and a retried call's value (so the retry corrects the failed call) with
the request log's hashes recomputed, as Claude Code would have written them."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

from core.canonical import message_digest
from replay.corpus.claude_code import API, read_session_file

DATA = Path(__file__).resolve().parents[1] / "replay" / "corpus" / "data" / "claude-code"
WORKSPACE = "ws-agent"
LOOKUP = "bfcec685-e7a6-47c9-be95-f5826d6c1469"
"""The session whose lookup failed (a timeout), then was called again twice and succeeded."""
KEY = "7e" * 32


def session_path(root: Path, workspace: str, session: str) -> Path:
    return next((root / workspace / "projects").glob(f"*/{session}.jsonl"))


def copy_workspace(root: Path, workspace: str, *, model: str | None = "keep") -> Path:
    """The recorded workspace copied to `root/workspace`; `model` replaces every answer's `message.model` (None
    removes it: a record that names no model)."""
    shutil.copytree(DATA / WORKSPACE, root / workspace)
    if model != "keep":
        for path in (root / workspace).rglob("*.jsonl"):
            lines = [json.loads(line) for line in path.read_text().splitlines()]
            for line in lines:
                message = line.get("message")
                if line.get("type") == "assistant" and isinstance(message, dict):
                    if model is None:
                        message.pop("model", None)
                    else:
                        message["model"] = model
            path.write_text("".join(json.dumps(line, separators=(",", ":")) + "\n" for line in lines))
    return root / workspace


def copy_session_as(root: Path, workspace: str, session: str) -> Path:
    """The lookup session again in `root/workspace` under another session id (the same records, another task)."""
    source = session_path(DATA, WORKSPACE, LOOKUP)
    target = root / workspace / "projects" / source.parent.name / f"{session}.jsonl"
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(source.read_text().replace(LOOKUP, session))
    return target


def plant_retry_value(path: Path, session: str, call: int, arguments: dict[str, Any]) -> None:
    """Give the session's `call`-th tool_use (0-based) other argument values, and rewrite the request log's
    hashes of the answer that holds it, so every call still rebuilds."""
    parsed = read_session_file(path, session)
    uses = [b for _, answer in parsed.answers.values() for b in answer["content"] if b.get("type") == "tool_use"]
    target_id = uses[call]["id"]
    old = next(a for _, a in parsed.answers.values() if any(b.get("id") == target_id for b in a["content"]))
    new = {**old, "content": [{**b, "input": arguments} if b.get("id") == target_id else b for b in old["content"]]}
    old_hash, new_hash = message_digest(API, old), message_digest(API, new)
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    for line in lines:
        for block in (line.get("message") or {}).get("content") or []:
            if isinstance(block, dict) and block.get("id") == target_id:
                block["input"] = arguments
    text = "".join(json.dumps(line, separators=(",", ":")) + "\n" for line in lines)
    assert text.count(old_hash) >= 1 or call == len(uses) - 1  # the last answer is in no later request
    path.write_text(text.replace(old_hash, new_hash))


def keys_file(tmp_path: Path, workspaces: list[str], mode: int = 0o600) -> Path:
    path = tmp_path / "keys.toml"
    path.write_text("[keys]\n" + "".join(f'"{w}" = "{KEY}"\n' for w in workspaces))
    path.chmod(mode)
    return path


def policy_file(tmp_path: Path, text: str, name: str = "policy.toml") -> Path:
    path = tmp_path / name
    path.write_text('name = "test"\nworker_models = ["worker", "worker-*"]\n' + text)
    return path


def plant_final_answer(path: Path, text: str) -> None:
    """Make the session's last answer a text with no call (a `no_tool` decision), its tool result dropped: the
    last answer is in no later request, so the request log still rebuilds every call."""
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    last = max(i for i, line in enumerate(lines) if line.get("type") == "assistant")
    [use] = [b for b in lines[last]["message"]["content"] if b.get("type") == "tool_use"]
    lines[last]["message"]["content"] = [{"type": "text", "text": text}]
    lines = [line for line in lines if not any(isinstance(b, dict) and b.get("tool_use_id") == use["id"]
                                               for b in (line.get("message") or {}).get("content") or [])]
    path.write_text("".join(json.dumps(line, separators=(",", ":")) + "\n" for line in lines))
