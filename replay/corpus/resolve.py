"""Resolving a `descriptor` capture from the transcript corpus (DESIGN §9), off the serving host.

A descriptor claims "the model saw a request with these hashes". `resolve` finds the session in a
`TranscriptSource`, takes the calls it recorded with as many messages as the captured turn, and
recomputes every message hash and the request hash with the very functions the gateway hashed with
(core/canonical.py; `core.capture_store`'s raw ones for rows written before the canonical form). What it
checks, in order (the first failure refuses, with its reason):

1. the session is in the corpus (`session missing`), readable (`transcript unreadable`) and written
   in the API the decision was captured on (`api mismatch`);
2. it recorded a call of the captured turn's length (`turn missing`: a session cut short), or, when
   none can be rebuilt and some recorded calls cannot, why those cannot (`record incomplete`: a request
   log that names a message the file no longer holds, a base that is missing or loops);
3. every message hash of one such call equals the captured one (`hash mismatch`: the record changed;
   the detail names the first message that differs, of the call that agrees longest);
4. the request hash equals the captured one (`hash mismatch`): the system prompt, tools and the other
   body fields the record keeps. A record that does not keep them (a transcript without its params, a
   Claude Code session without its request log) cannot match: with `verify="messages"` such a decision
   is still accepted on its message hashes, and counted as not request-verified;
5. the offered tool names and the tool choice equal the descriptor's (`offer mismatch`); a choice the
   gateway forced (`forced`) is what the model saw, so the runtime's own (none) agrees with it, and the
   resolved request carries the forced choice, as the engine got it;
6. an answer follows the call (`turn missing`), and its chosen call — read as the gateway reads that
   API's answer (core/wire.py) — has the captured tool and key set (`answer mismatch`).

The corpus is only read. `load_keys` reads the workspace keys redaction needs (replay/privacy/redact.py).
"""

from __future__ import annotations

import copy
import os
import re
from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import Field

from core.canonical import message_digest, request_digest
from core.capture_store import CANONICAL, CapturedDecision, message_hash, request_sha256
from core.names import NAME_RULE, Name, excerpt, is_name
from core.records import REQUESTS, Strict
from core.scoring import chosen_call
from core.tomlfile import ConfigError, parse_toml, read_private, toml_problem
from core.toolcalls import parse_response, request_schemas
from core.wire import WIRES, DecisionApi
from replay.corpus.transcripts import TranscriptError, TranscriptSource
from replay.errors import ReplayError

Verify = Literal["request", "messages"]
KEYS_ENV = "WORKER_REPLAY_PSEUDONYM_KEYS"


class RefusalReason(StrEnum):
    """Why a capture was not resolved (the build report counts refusals by it; a value is its text)."""

    SESSION_MISSING = "session missing"
    TRANSCRIPT_UNREADABLE = "transcript unreadable"
    TURN_MISSING = "turn missing"
    HASH_MISMATCH = "hash mismatch"
    OFFER_MISMATCH = "offer mismatch"
    ANSWER_MISMATCH = "answer mismatch"
    API_MISMATCH = "api mismatch"
    RECORD_INCOMPLETE = "record incomplete"
    NO_KEY = "no pseudonym key for the workspace"


@dataclass(frozen=True)
class CaptureRefusal:
    reason: RefusalReason
    detail: str


@dataclass(frozen=True)
class Resolved:
    """What a capture resolved to: the request the model saw, and the chosen call's arguments."""

    request: dict[str, Any]  # the API's conversation fields (chat: messages, tools, tool_choice)
    arguments: dict[str, Any] | None
    request_verified: bool
    api: DecisionApi = "chat"
    thread: str | None = None  # the loop of the session the call was made in (`main`, a subagent's), if recorded
    parent_call: str | None = None  # a subagent's call: the parent's call that started it, if recorded
    conversation_only: bool = False  # rebuilt from the conversation alone (no request log)
    paths: frozenset[str] = frozenset()  # the paths the runtime wrote for the session, where its record says


def resolve(captured: CapturedDecision, source: TranscriptSource,
            verify: Verify = "request") -> Resolved | CaptureRefusal:
    """The decision's request from the corpus, proven by hash, or why it cannot be."""
    where = f"{captured.workspace}/{captured.session}"
    try:
        session = source.session(captured.workspace, captured.session)
    except TranscriptError as exc:
        return CaptureRefusal(RefusalReason.TRANSCRIPT_UNREADABLE, str(exc))
    if session is None:
        return CaptureRefusal(RefusalReason.SESSION_MISSING, f"{where}: no such session in the transcripts")
    if session.api != captured.api:
        return CaptureRefusal(RefusalReason.API_MISMATCH,
                              f"{where}: the decision was captured on the {captured.api} API, the "
                              f"transcript is written in the {session.api} API's shape")
    wire, turn = WIRES[session.api], len(captured.message_hashes)
    try:
        candidates = session.requests(turn)
    except TranscriptError as exc:
        return CaptureRefusal(RefusalReason.TRANSCRIPT_UNREADABLE, str(exc))
    if not candidates and (problems := session.problems()):
        return CaptureRefusal(RefusalReason.RECORD_INCOMPLETE,
                              f"{where}: no call of {turn} message(s) can be rebuilt from the record; "
                              f"{len(problems)} cannot: " + "; ".join(problems[:3]))
    if not candidates:
        return CaptureRefusal(RefusalReason.TURN_MISSING,
                              f"{where}: the decision needs {turn} message(s) and the answer after them; "
                              f"{session.extent()}")
    hashes = _hashes(captured)
    matched = [(r, _first_difference(r.body[wire.turn_field], captured.message_hashes, hashes))
               for r in candidates]
    logged = next((r for r, differs in matched if differs is None), None)
    if logged is None:
        closest, (index, message) = max(((r, d) for r, d in matched if d is not None), key=lambda rd: rd[1][0])
        kind = message.get("role") or message.get("type") if isinstance(message, dict) else type(message).__name__
        nearest = "" if len(candidates) == 1 else f"; the closest of the {len(candidates)} calls logged with " \
            f"{turn} message(s) is {closest.where}"
        return CaptureRefusal(RefusalReason.HASH_MISMATCH, f"{where}: message {index} ({kind}) is not the one captured "
                                             f"({closest.mismatch}){nearest}")
    body = logged.body
    verified = captured.request_sha256 == (request_digest(wire.api, body) if captured.hashing == CANONICAL
                                           else request_sha256({**body, "model": captured.adapter}))
    if not verified and verify == "request":
        what = ("the record keeps no system prompt or tools (conversation only)" if logged.conversation_only
                else "tools, tool_choice or params are not what the model saw")
        return CaptureRefusal(RefusalReason.HASH_MISMATCH, f"{where}: the request hash differs ({what})")
    request_data = {k: body[k] for k in wire.request_fields if k in body}
    offered = sorted({t["function"]["name"] for t in wire.tools(request_data.get("tools"))})
    choice = wire.choice(body.get("tool_choice"))
    forced_here = captured.forced and choice == "auto" and captured.tool_choice != "auto"
    if forced_here:
        request_data = copy.deepcopy(request_data)
        wire.force_tool(request_data)
        choice = wire.choice(request_data.get("tool_choice"))
    if (offered, choice) != (captured.tools_offered, captured.tool_choice):
        return CaptureRefusal(RefusalReason.OFFER_MISMATCH,
                              f"{where}: the transcript offers {offered} with tool_choice {choice!r}, "
                              f"the capture {captured.tools_offered} with {captured.tool_choice!r}")
    if logged.answer is None:
        return CaptureRefusal(RefusalReason.TURN_MISSING,
                              f"{where}: {logged.no_answer or 'no answer follows the request'}")
    request = REQUESTS[wire.api].model_validate(request_data)
    tools = wire.tools(request.tools)
    call = chosen_call(parse_response(logged.answer, offered or None, schemas=request_schemas(tools)))
    tool, keys = (call.tool, call.key_set) if call else (None, [])
    if (tool, sorted(keys)) != (captured.chosen_tool, sorted(captured.chosen_keys)):
        return CaptureRefusal(RefusalReason.ANSWER_MISMATCH,
                              f"{where}: the transcript's answer calls {tool!r} with keys {sorted(keys)}, "
                              f"the capture recorded {captured.chosen_tool!r} with {sorted(captured.chosen_keys)}")
    return Resolved(request.model_dump(exclude_none=True), call.arguments if call else None, verified, wire.api,
                    thread=logged.thread, parent_call=logged.parent_call, conversation_only=logged.conversation_only,
                    paths=logged.paths)


def _hashes(captured: CapturedDecision) -> Callable[[Any], str]:
    """The message hash the decision's row was taken with."""
    api = WIRES[captured.api].api if captured.api in WIRES else "chat"
    if captured.hashing == CANONICAL:
        return lambda message: message_digest(api, message)
    return message_hash


def _first_difference(messages: list[Any], expected: list[str],
                      hashes: Callable[[Any], str]) -> tuple[int, Any] | None:
    """The first message whose hash is not the captured one (index and message), None when all agree."""
    for index, (message, want) in enumerate(zip(messages, expected, strict=True)):
        if hashes(message) != want:
            return index, message
    return None


KEY_PATTERN = r"^(?:[0-9a-fA-F]{2}){16,}$"
KEY_RULE = "at least 32 hex digits, an even number (16 bytes or more; `openssl rand -hex 32` makes one)"


class PseudonymKeys(Strict):
    """The workspace keys file (TOML): `[keys]` then `"<workspace>" = "<key>"`, each key at least
    32 hex digits (16 bytes; `openssl rand -hex 32` makes one)."""

    keys: dict[Name, Annotated[str, Field(pattern=KEY_PATTERN)]] = Field(default_factory=dict)


class KeysError(ReplayError):
    """A workspace keys file that cannot be used."""


def load_keys(path: Path | None) -> dict[str, bytes]:
    """Workspace → key bytes, from `path` or the file named by $WORKER_REPLAY_PSEUDONYM_KEYS.

    The file must be readable by its owner only (docs/production.md: mode 600): keys others can
    read are refused, with the `chmod` that fixes it, before they are used."""
    path = path or (Path(os.environ[KEYS_ENV]) if os.environ.get(KEYS_ENV) else None)
    if path is None:
        raise KeysError(f"redacting decisions needs the workspace pseudonym keys: --keys FILE or ${KEYS_ENV}")
    try:
        data = read_private(path, "workspace keys file")
    except ConfigError as exc:
        raise KeysError(str(exc)) from exc
    raw, problem = toml_problem(data)
    if raw is None:
        raise KeysError(f"{path}: {problem}")
    _check_keys(path, data.decode("utf-8"), raw)
    try:
        keys = parse_toml(data, path, PseudonymKeys, "workspace keys file")
    except ConfigError as exc:  # what the checks above say in words; kept as the typed boundary
        raise KeysError(str(exc)) from exc
    return {workspace: bytes.fromhex(key) for workspace, key in keys.keys.items()}


def _check_keys(path: Path, text: str, raw: dict[str, Any]) -> None:
    """Each problem of a keys file in words: which workspace, and which rule its entry breaks."""
    problems = [f"{path}: {excerpt(key)} is not part of a workspace keys file (it holds one [keys] table)"
                for key in raw if key != "keys"]
    table = raw.get("keys", {})
    if not isinstance(table, dict):
        problems.append(f"{path}: `keys` must be a table: [keys] then \"<workspace>\" = \"<key>\" lines")
        table = {}
    for workspace, key in table.items():
        line = _line_of_key(text, workspace)
        where = f"{path}:{line}" if line else str(path)
        if not is_name(workspace):
            problems.append(f"{where}: {excerpt(workspace)} is not a workspace name ({NAME_RULE})")
        elif not isinstance(key, str):
            problems.append(f"{where}: the key of workspace {workspace!r} must be a string of hex digits, "
                            f"not a TOML {type(key).__name__}")
        elif not re.fullmatch(KEY_PATTERN, key):
            got = "holds characters that are not hex digits" if re.search(r"[^0-9a-fA-F]", key) \
                else f"has {len(key)} hex digits"
            problems.append(f"{where}: the key of workspace {workspace!r} must be {KEY_RULE}; it {got}")
    if problems:
        raise KeysError("invalid workspace keys file:\n" + "\n".join(problems))


def _line_of_key(text: str, workspace: str) -> int | None:
    """The line that sets `workspace` (quoted or bare) in a keys file, if it can be found."""
    pattern = re.compile(rf"^\s*(?:\"{re.escape(workspace)}\"|'{re.escape(workspace)}'|{re.escape(workspace)})\s*=")
    return next((n for n, line in enumerate(text.splitlines(), start=1) if pattern.match(line)), None)
