"""Stop-QA corpora from the recorded Claude Code sessions (tests/replay/corpus/data), with planted endings: a
final answer appended as Claude Code logs a model call (its `api-request`, base and kept messages and the tail
of hashes, then the assistant record), a tool round before it, a tool result's content changed. Every plant
keeps the request log consistent: `rebuilt` proves each call still rebuilds from the hashes it names."""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

from core.canonical import message_digest
from replay.corpus.claude_code import API, answer_after, read_session_file, rebuild

RETRIES = "528ebb91-79b6-4955-8c12-419c74500df9"
"""The session whose three `Agent` calls were all refused (is_error) and that stops on the last refusal."""


def _lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def _write(path: Path, lines: list[dict[str, Any]]) -> None:
    path.write_text("".join(json.dumps(line, separators=(",", ":")) + "\n" for line in lines))


def append_answer(path: Path, session: str, content: list[dict[str, Any]], *,
                  results: list[dict[str, Any]] | None = None, parent: str | None = None,
                  model: str = "worker-base") -> str:
    """Append one model call: its `api-request` (base: the file's last request, all its messages kept; tail: that
    request's answer and the user record after it, by hash), the assistant record holding `content` and, with
    `results`, a user record carrying them; `parent` (default: the last record) is the answer's parentUuid.
    Returns the assistant record's uuid."""
    parsed = read_session_file(path, session)
    rebuild(parsed)
    base = parsed.calls[-1]
    assert base.messages is not None, base.problem
    answered = answer_after(parsed, base.line, parsed.answers)
    assert answered is not None
    after = [line for number, line in parsed.conversation if number > answered[0] and line["type"] == "user"]
    tail = [message_digest(API, answered[1]),
            *(message_digest(API, {"role": "user", "content": u["message"]["content"]}) for u in after)]
    lines = _lines(path)
    leaf = parent or next(line["uuid"] for line in reversed(lines) if line.get("type") in ("user", "assistant"))
    ids = [str(uuid.uuid5(uuid.NAMESPACE_URL, f"{session}/{len(lines)}/{i}")) for i in range(3)]
    request = {**base.record, "id": ids[0], "base": base.record["id"], "keep": len(base.messages), "tail": tail}
    request.pop("requestDigest", None)
    answer = {"parentUuid": leaf, "isSidechain": False, "type": "assistant", "uuid": ids[1], "sessionId": session,
              "timestamp": "2026-12-04T00:05:00.000Z",
              "message": {"id": f"msg-{ids[1]}", "type": "message", "role": "assistant", "model": model,
                          "content": content, "stop_reason": "end_turn" if results is None else "tool_use"}}
    new = [request, answer]
    if results is not None:
        new.append({"parentUuid": ids[1], "isSidechain": False, "type": "user", "uuid": ids[2], "sessionId": session,
                    "timestamp": "2026-12-04T00:05:01.000Z", "message": {"role": "user", "content": results}})
    new.append({"type": "last-prompt", "lastPrompt": "Look up invoice INV-7.", "leafUuid": new[-1]["uuid"],
                "sessionId": session})
    _write(path, lines + new)
    return ids[1]


def replace_result(path: Path, record: str, text: str) -> None:
    """Give the tool result of user record `record` (one after the last request: no request names it) new text."""
    lines = _lines(path)
    line = next(line for line in lines if line.get("uuid") == record)
    [block] = line["message"]["content"]
    block["content"] = [{"type": "text", "text": text}]
    block.pop("is_error", None)
    line["toolUseResult"] = block["content"]
    _write(path, lines)


def rebuilt(path: Path, session: str) -> bool:
    """Whether every call of the file rebuilds from its request log (a plant kept the hashes consistent)."""
    parsed = read_session_file(path, session)
    rebuild(parsed)
    return bool(parsed.calls) and not [c.problem for c in parsed.calls if c.problem]


def text(value: str) -> list[dict[str, Any]]:
    return [{"type": "text", "text": value}]
