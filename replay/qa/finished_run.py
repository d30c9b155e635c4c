"""A finished run as Stop-QA reads it from the corpus (DESIGN §13): a session's main thread ending in a
final answer, with the tool calls and results before it and the guard's verdict on each result.

The thread is the `parentUuid` chain back from the session file's last conversation record (not the file
order: a rewound session keeps the abandoned branch in the file), so a run resumed for several prompts is
one run, judged on its last answer, and a compaction ends the chain. The final answer is the assistant
message at the leaf (its records merged by `message.id`); a leaf that is a user record (the run stopped on
a tool result: max turns, a crash), an answer holding a tool call, the runtime's own API-error message, or
an answer with no text is no finished run: it is `Unchecked`, with the reason, never guessed at. Subagent
files are not the run's: what a subagent did reaches the run as its tool's result.

Record ids are the session-file lines' `uuid`s; a line without a usable one is cited as `line:N`.
`read_run` is pure (it reads a parsed `SessionFile`); `corpus_runs` reads the corpora, one session at a
time, and lists the sessions it could not read.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from core.guard import GuardKind, GuardRules, classify
from core.names import is_name
from replay.corpus.claude_code import ClaudeCodeDir, SessionFile


@dataclass(frozen=True)
class ThreadCall:
    """One tool call of the thread and its result, as the guard read it (None: no result recorded)."""

    id: str
    tool: str
    record: str
    """The assistant record holding the `tool_use`."""
    result_record: str | None = None
    outcome: GuardKind | None = None
    content: Any = None
    """The `tool_result`'s content, as recorded."""
    input: Any = None
    """The `tool_use`'s input, as recorded: what the call was about, for the checks."""


@dataclass(frozen=True)
class AnswerText:
    """One text block of the final answer and the record holding it."""

    record: str
    text: str


@dataclass(frozen=True)
class Run:
    workspace: str
    session: str
    final_record: str
    """The final answer's last record: with workspace and session, what names the run."""
    answer: tuple[AnswerText, ...]
    calls: tuple[ThreadCall, ...]
    """In thread order."""
    last_results: tuple[ThreadCall, ...]
    """The calls answered by the last record that carried tool results before the final answer."""


@dataclass(frozen=True)
class Unchecked:
    """A session that holds no finished run, and why."""

    workspace: str
    session: str
    reason: str


def record_id(number: int, line: Mapping[str, Any]) -> str:
    uuid = line.get("uuid")
    return str(uuid) if is_name(uuid) else f"line:{number}"


def read_run(workspace: str, session: str, main: SessionFile, rules: GuardRules) -> Run | Unchecked:
    """The run a session's main file ends in, or why it holds none."""
    lines = [(n, line) for n, line in main.conversation if line.get("isSidechain") is not True]
    if not lines:
        return Unchecked(workspace, session, "the session holds no conversation")
    thread = _thread(lines, main.parents)
    if thread is None:
        return Unchecked(workspace, session, "its records' parentUuid chain loops: no thread can be read")
    answer = _final_answer(thread)
    if isinstance(answer, str):
        return Unchecked(workspace, session, answer)
    calls: dict[str, ThreadCall] = {}
    last_results: list[str] = []
    for number, line in thread[: len(thread) - len(answer)]:
        blocks, record = _blocks(line), record_id(number, line)
        if line.get("type") == "assistant":
            for block in (b for b in blocks if b.get("type") == "tool_use"):
                call_id = str(block.get("id"))
                calls[call_id] = ThreadCall(call_id, str(block.get("name") or ""), record, input=block.get("input"))
            continue
        results = [b for b in blocks if b.get("type") == "tool_result"]
        if results:
            last_results = []
        for block in results:
            call_id = str(block.get("tool_use_id"))
            call = calls.get(call_id) or ThreadCall(call_id, "", record)
            outcome = classify(block.get("content"), rules, call.tool, is_error=block.get("is_error") is True)
            calls[call_id] = ThreadCall(call.id, call.tool, call.record, record, outcome, block.get("content"),
                                        call.input)
            last_results.append(call_id)
    texts = tuple(AnswerText(record_id(number, line), block["text"]) for number, line in answer
                  for block in _blocks(line) if block.get("type") == "text" and isinstance(block.get("text"), str))
    return Run(workspace, session, record_id(*answer[-1]), texts, tuple(calls.values()),
               tuple(calls[c] for c in last_results))


def _thread(lines: Sequence[tuple[int, dict[str, Any]]],
            parents: Mapping[str, Any]) -> list[tuple[int, dict[str, Any]]] | None:
    """The conversation records on the `parentUuid` chain from the last one back (through attachments and
    system records), in thread order; None when the chain loops."""
    by_uuid = {line["uuid"]: (number, line) for number, line in lines if isinstance(line.get("uuid"), str)}
    leaf = lines[-1]
    chain, seen = [leaf], {leaf[1].get("uuid")}
    parent = leaf[1].get("parentUuid")
    while isinstance(parent, str) and parent in parents:
        if parent in seen:
            return None
        seen.add(parent)
        if parent in by_uuid:
            chain.append(by_uuid[parent])
        parent = parents[parent]
    return chain[::-1]


def _final_answer(thread: Sequence[tuple[int, dict[str, Any]]]) -> list[tuple[int, dict[str, Any]]] | str:
    """The records of the final answer (one `message.id` at the end of the thread), or why there is none."""
    number, leaf = thread[-1]
    if leaf.get("type") != "assistant":
        what = "a tool result" if any(b.get("type") == "tool_result" for b in _blocks(leaf)) else "a user prompt"
        return f"no final answer: the thread ends in {what} (record {record_id(number, leaf)})"
    if leaf.get("isApiErrorMessage") is True:
        return f"no final answer: the thread ends in the runtime's API-error message (record {record_id(number, leaf)})"
    message_id, start = _message_id(leaf), len(thread) - 1
    while message_id is not None and start > 0 and _message_id(thread[start - 1][1]) == message_id \
            and thread[start - 1][1].get("type") == "assistant":
        start -= 1
    answer = list(thread[start:])
    blocks = [b for _, line in answer for b in _blocks(line)]
    if any(b.get("type") == "tool_use" for b in blocks):
        return f"no final answer: the thread ends in a tool call (record {record_id(number, leaf)})"
    if not any(b.get("type") == "text" and isinstance(b.get("text"), str) and b["text"].strip() for b in blocks):
        return f"no final answer: the last answer holds no text (record {record_id(number, leaf)})"
    return answer


def _message_id(line: Mapping[str, Any]) -> str | None:
    message = line.get("message")
    value = message.get("id") if isinstance(message, dict) else None
    return value if isinstance(value, str) else None


def _blocks(line: Mapping[str, Any]) -> list[dict[str, Any]]:
    """A record's content blocks (a string content is one text block); anything else in it is left out."""
    message = line.get("message")
    content = message.get("content") if isinstance(message, dict) else None
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    return [b for b in content if isinstance(b, dict)] if isinstance(content, list) else []


def corpus_runs(corpora: Sequence[ClaudeCodeDir], rules: GuardRules,
                refused: list[str]) -> Iterator[Run | Unchecked]:
    """Every session's run, corpus by corpus (each corpus's sessions sorted); a session whose files cannot be
    read is appended to `refused` with its reason."""
    for corpus in corpora:
        for workspace, session, files in corpus.read_sessions(refused):
            yield read_run(workspace, session, files[0], rules)
