"""The session files the runtime's Claude Code writes, read as a transcript source (DESIGN §9).

The platform's agents run in the Claude Agent SDK, whose bundled Claude Code keeps each session as
`<config>/projects/<cwd-slug>/<session-id>.jsonl`, a subagent's run as
`<session-id>/subagents/agent-<id>.jsonl` beside it (with a `.meta.json` naming the parent's call).
The platform runs one container, so one config directory, per workspace; a corpus is therefore
`<root>/<workspace>/projects/...`, and a session is found by its id under its workspace only.

What a file holds (Claude Code 2.1.x; read the files, not this list, when a version changes):

* the conversation: `user` and `assistant` lines (`uuid`, `parentUuid`, `message`; one assistant
  answer may span several lines of one `message.id`, a content block each), `attachment`s, and
  bookkeeping (`queue-operation`, `last-prompt`, `cost-state`, ...), ignored here;
* the request log, content-addressed: `api-request-shape` (`shapeHash` → the `system` blocks and
  `tools` as sent), `api-request-blob` (`hash` → a message kept nowhere else, such as the system
  reminders sent as a mid-conversation `system` message), and one `api-request` per model call
  (`base`: the previous request; `keep`: how many of its messages this one kept; `tail`: the hashes
  of the messages appended; `cacheControl`: where `cache_control` went; `params`: model, max_tokens,
  thinking, ...). A message's hash is the full sha256 of its compact, sorted-key JSON, with a string
  content as one text block: `core.canonical.message_digest`, so the conversation's lines and the blobs
  are found by the hashes the log names.

A call's request is rebuilt from the log: its base's messages up to `keep`, then the tail, with the
shape's system prompt and tools and the params. `cache_control` is not put back: it does not change the
prompt, and the canonical form the descriptors are hashed over leaves it out. The answer is
the assistant message that follows the call in the file (its lines merged by `message.id`); a tool
input the model left unparseable (`{"__unparsedToolInput": {"raw": ...}}`) is read as its raw text, so
the parser calls it malformed. A file without a request log (older versions) gives its calls from the
conversation alone: each assistant answer's `parentUuid` chain of user and assistant messages, without
the system prompt, tools or system reminders (such calls are `conversation_only`; their request hash
cannot match). A compaction needs nothing special: the summary request is not logged (a descriptor of it is
refused as a call the runtime did not log), and the requests after it start a new chain whose tail names the
summary's user line (`isCompactSummary`; tests/replay/corpus/test_compaction.py).

Reading is bounded, as for any corpus: ids are names, a workspace's directory that is a link, and a file or
directory that is a link out of its workspace, is refused; a file is opened only when it is a regular file,
never through a link (a tenant can `mkfifo` in its own config directory: `core.regularfile`); a line
longer than `MAX_LINE_BYTES` refuses its file without being held in memory, and every line must belong to
the session the file is named for. A call whose record cannot be rebuilt
(a tail hash with no message, a base that is missing, comes later or loops) is kept as a problem of its
own; the session's other calls still resolve. Memory is bounded by the largest session, not the corpus.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any, TypedDict

import msgspec

from core.canonical import message_digest
from core.jsonfile import JsonFileError, read_json_lines, read_json_value
from core.names import NAME_RULE, excerpt, is_name
from core.records import MAIN_THREAD
from core.wire import WIRES, DecisionApi, messages_answer
from core.wireshapes import NeutralAnswer
from replay.corpus.transcripts import LoggedRequest, TranscriptError

MAX_LINE_BYTES = 16 << 20
"""The longest session-file line read (16 MiB): a line holds one message, tool result or blob."""
UNPARSED = "__unparsedToolInput"
UNLOGGED = ("the record changed, or the runtime did not log this call: Claude Code logs neither its compaction "
            "summaries nor its side queries")
API: DecisionApi = "messages"
RECENT = 8
"""Sessions a source keeps read (captures of one session come close together in a store)."""
CONVERSATION = ("user", "assistant")


@dataclass
class ApiRequestLine:
    """One `api-request` line and what it rebuilds to (or why it cannot)."""

    line: int
    record: dict[str, Any]
    messages: list[dict[str, Any]] | None = None
    problem: str = ""


@dataclass
class SessionFile:
    """One session file (main loop or a subagent's), parsed: its conversation and its request log."""

    path: Path
    session: str
    agent: str | None = None
    """The subagent's id (`agentId`), None for the main loop."""
    parent_call: str | None = None
    """The parent's `tool_use` id that started this subagent (its `.meta.json`)."""
    lines: int = 0
    conversation: list[tuple[int, dict[str, Any]]] = field(default_factory=list)
    """`user` and `assistant` lines, in file order, with their line numbers."""
    parents: dict[str, Any] = field(default_factory=dict)
    """Every line's `uuid` -> its `parentUuid` (attachments and system lines sit in the chain too)."""
    blobs: dict[str, dict[str, Any]] = field(default_factory=dict)
    shapes: dict[str, dict[str, Any]] = field(default_factory=dict)
    calls: list[ApiRequestLine] = field(default_factory=list)
    paths: set[str] = field(default_factory=set)
    """The working directories the runtime wrote on its session's lines (`cwd`; a subagent's files' too, once read
    with them): what redaction replaces in every call of the session."""

    @property
    def thread(self) -> str:
        """`main`, or the subagent's `agent-<id>` (its file's name)."""
        return f"agent-{self.agent}" if self.agent else MAIN_THREAD

    @cached_property
    def by_number(self) -> dict[int, dict[str, Any]]:
        """The conversation's lines by line number (read once)."""
        return dict(self.conversation)

    @cached_property
    def answers(self) -> dict[str, tuple[int, dict[str, Any]]]:
        """Each assistant answer by `message.id`: its first line and the message with every line's blocks merged
        (read once; callers never change it)."""
        merged: dict[str, tuple[int, dict[str, Any]]] = {}
        for number, line in self.conversation:
            message = line.get("message")
            if line.get("type") != "assistant" or not isinstance(message, dict):
                continue
            key = str(message.get("id") or line.get("uuid") or number)
            blocks = _blocks(message.get("content"))
            if key in merged:
                merged[key][1]["content"].extend(blocks)
            else:
                merged[key] = (number, {"role": "assistant", "content": list(blocks)})
        return merged

    def tool_uses(self) -> Iterator[dict[str, Any]]:
        """Every `tool_use` block of the file's answers (an answer spread over several lines counts once)."""
        for _, answer in self.answers.values():
            yield from (b for b in answer["content"] if isinstance(b, dict) and b.get("type") == "tool_use")

    def tool_results(self) -> Iterator[dict[str, Any]]:
        """Every `tool_result` block of the file's user lines."""
        for _, line in self.conversation:
            message = line.get("message")
            content = message.get("content") if isinstance(message, dict) else None
            if line.get("type") == "user" and isinstance(content, list):
                yield from (b for b in content if isinstance(b, dict) and b.get("type") == "tool_result")

    def by_hash(self) -> dict[str, dict[str, Any]]:
        """Every message the request log can name: blobs, user lines and (merged) assistant answers."""
        index = dict(self.blobs)
        for _, line in self.conversation:
            message = line.get("message")
            if line.get("type") == "user" and isinstance(message, dict):
                sent = {"role": "user", "content": message.get("content")}
                index.setdefault(message_digest(API, sent), sent)
        for _, message in self.answers.values():
            index.setdefault(message_digest(API, message), message)
        return index


def _blocks(content: Any) -> list[Any]:
    """A message's content as blocks: a string is one text block (as Claude Code's log keeps it)."""
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    return list(content) if isinstance(content, list) else []


class _Block(TypedDict, total=False):
    """What a count reads of a content block: a `text`, `tool_use` or `tool_result` block's fields."""

    type: str
    text: str
    id: str
    name: str
    input: Any
    tool_use_id: str
    content: Any
    is_error: Any


class _Message(TypedDict, total=False):
    id: str
    content: list[_Block] | str


class _ConversationLine(TypedDict, total=False):
    """What a count reads of a line (`conversation_only`); a line whose fields have other types is read whole."""

    type: str
    sessionId: str
    agentId: str
    uuid: str
    timestamp: str
    message: _Message


_CONVERSATION_FIELDS = msgspec.json.Decoder(_ConversationLine)


def read_session_file(path: Path, session: str, max_line_bytes: int = MAX_LINE_BYTES,
                      conversation_only: bool = False) -> SessionFile:
    """One session file; a line that cannot be read or belongs to another session refuses the file
    (`TranscriptError`, naming `file:line`). With `conversation_only` (a count: `corpus audit`) only the
    conversation is kept, and of each line only the fields a count reads are parsed (the request log is most of
    a file's bytes); the same lines are refused, for the same reasons."""
    parsed = SessionFile(path, session)
    fields = _CONVERSATION_FIELDS if conversation_only else None
    try:
        for number, value, problem in read_json_lines(path, max_line_bytes, follow_links=False, fields=fields):
            if not isinstance(value, dict):
                raise TranscriptError(f"{path}:{number}: {problem or 'a session-file line must be a JSON object'}")
            parsed.lines += 1
            _take(parsed, number, value, conversation_only)
    except JsonFileError as exc:
        raise TranscriptError(str(exc)) from exc
    return parsed


def _take(parsed: SessionFile, number: int, record: dict[str, Any], conversation_only: bool = False) -> None:
    owner = record.get("sessionId")
    if owner is not None and owner != parsed.session:
        raise TranscriptError(f"{parsed.path}:{number}: a line of session {excerpt(owner)} in the file of session "
                              f"{parsed.session}; refused")
    agent = record.get("agentId")
    if isinstance(agent, str) and parsed.agent is None:
        parsed.agent = agent
    kind = record.get("type")
    if kind in CONVERSATION:
        parsed.conversation.append((number, record))
    if conversation_only:
        return
    if isinstance(record.get("cwd"), str):
        parsed.paths.add(record["cwd"])
    if isinstance(record.get("uuid"), str):
        parsed.parents[record["uuid"]] = record.get("parentUuid")
    if kind == "api-request-blob" and isinstance(record.get("hash"), str) and isinstance(record.get("message"), dict):
        parsed.blobs[record["hash"]] = record["message"]
    elif kind == "api-request-shape" and isinstance(record.get("shapeHash"), str) \
            and isinstance(record.get("shape"), dict):
        parsed.shapes[record["shapeHash"]] = record["shape"]
    elif kind == "api-request":
        parsed.calls.append(ApiRequestLine(number, record))


def rebuild(parsed: SessionFile) -> None:
    """Each call's messages from the request log (in file order: a base is an earlier call)."""
    index = parsed.by_hash()
    built: dict[str, list[dict[str, Any]]] = {}
    for call in parsed.calls:
        record, where = call.record, f"{parsed.path}:{call.line}"
        base, keep, tail = record.get("base"), record.get("keep", 0), record.get("tail")
        if not isinstance(tail, list) or not isinstance(keep, int) or keep < 0:
            call.problem = f"{where}: an api-request without a readable tail and keep"
        elif base is not None and base not in built:
            call.problem = (f"{where}: its base {excerpt(base)} is not an earlier request of this file "
                            "(missing, later, or a loop)")
        elif base is None and keep:
            call.problem = f"{where}: keeps {keep} message(s) of no base"
        elif base is not None and keep > len(built[base]):
            call.problem = f"{where}: keeps {keep} message(s) of a base that sent {len(built[base])}"
        elif (missing := next((h for h in tail if not isinstance(h, str) or h not in index), None)) is not None:
            call.problem = (f"{where}: its tail names message {excerpt(missing)}, which the file does not hold "
                            "(edited or cut after the fact)")
        else:
            call.messages = [*(built[base][:keep] if base is not None else []), *(index[h] for h in tail)]
        if call.messages is not None and isinstance(record.get("id"), str):
            built[record["id"]] = call.messages


def answer_after(parsed: SessionFile, line: int,
                 answers: dict[str, tuple[int, dict[str, Any]]]) -> tuple[int, dict[str, Any]] | None:
    """The assistant message recorded after `line`, before the next call, with its first line number; None
    when the call has none."""
    later = [c.line for c in parsed.calls if c.line > line]
    stop = min(later) if later else parsed.lines + 1
    return min((entry for entry in answers.values() if line < entry[0] < stop), key=lambda e: e[0], default=None)


def recorded_model(parsed: SessionFile, number: int) -> str | None:
    """The model an answer's record names (`message.model` of its first line): who made the answer."""
    line = parsed.by_number.get(number) or {}
    message = line.get("message")
    return _text(message.get("model")) if isinstance(message, dict) else None


def neutral_answer(message: Mapping[str, Any]) -> NeutralAnswer:
    """The neutral answer of an assistant message; an input Claude Code could not parse is its raw text."""
    content = [{**b, "input": b["input"][UNPARSED].get("raw", "")}
               if isinstance(b, dict) and b.get("type") == "tool_use" and isinstance(b.get("input"), dict)
               and isinstance(b["input"].get(UNPARSED), dict) else b for b in _blocks(message.get("content"))]
    return messages_answer(content)


def logged_calls(parsed: SessionFile) -> list[LoggedRequest]:
    """Every call of the file with its rebuilt request (calls that cannot be rebuilt are left out)."""
    answers = parsed.answers
    if not parsed.calls:
        return conversation_calls(parsed, answers)
    rebuild(parsed)
    requests = []
    for call in parsed.calls:
        if call.messages is None:
            continue
        record = call.record
        params = record.get("params")
        body: dict[str, Any] = {k: v for k, v in params.items() if k not in ("model", "betas")} \
            if isinstance(params, dict) else {}
        shape = parsed.shapes.get(str(record.get("shapeHash")), {})
        for key in ("system", "tools"):
            if shape.get(key) is not None:
                body[key] = shape[key]
        body["messages"] = call.messages
        found = answer_after(parsed, call.line, answers)
        requests.append(LoggedRequest(body, neutral_answer(found[1]) if found is not None else None,
                                      f"{parsed.path}:{call.line}", no_answer="no answer is recorded after the call",
                                      thread=parsed.thread, parent_call=parsed.parent_call,
                                      captured_at=_text(record.get("timestamp")),
                                      mismatch=UNLOGGED,
                                      model=recorded_model(parsed, found[0]) if found is not None else None,
                                      paths=frozenset(parsed.paths)))
    return requests


def conversation_calls(parsed: SessionFile,
                       answers: dict[str, tuple[int, dict[str, Any]]]) -> list[LoggedRequest]:
    """Calls rebuilt from the conversation alone: each answer's `parentUuid` chain of user and assistant
    messages (a file without a request log). Attachments and system reminders are not in it."""
    lines = {str(line.get("uuid")): line for _, line in parsed.conversation if line.get("uuid") is not None}
    numbered = parsed.by_number
    requests = []
    for number, answer in answers.values():
        first = numbered[number]
        chain, seen, parent = [], set(), first.get("parentUuid")
        while isinstance(parent, str) and parent in parsed.parents and parent not in seen:
            seen.add(parent)
            if parent in lines:
                chain.append(lines[parent])
            parent = parsed.parents[parent]
        if isinstance(parent, str) and parent in seen:
            continue  # a parentUuid cycle: no call can be read from it
        messages: list[dict[str, Any]] = []
        for line in reversed(chain):
            message = line.get("message") if isinstance(line.get("message"), dict) else {}
            if line.get("type") == "assistant":
                key = str(message.get("id") or line.get("uuid"))
                merged = answers.get(key, (0, {"role": "assistant", "content": []}))[1]
                if not messages or messages[-1] is not merged:
                    messages.append(merged)
            else:
                messages.append({"role": "user", "content": message.get("content")})
        requests.append(LoggedRequest({"messages": messages}, neutral_answer(answer), f"{parsed.path}:{number}",
                                      thread=parsed.thread, parent_call=parsed.parent_call, conversation_only=True,
                                      captured_at=_text(first.get("timestamp")),
                                      mismatch="the record changed; it keeps the conversation only, without the "
                                               "system reminders the runtime sent",
                                      model=recorded_model(parsed, number), paths=frozenset(parsed.paths)))
    return requests


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) else None


@dataclass
class ClaudeCodeSession:
    """One session: its main file and its subagents' files, with every call they logged."""

    files: list[SessionFile]
    api: DecisionApi = API
    _calls: list[LoggedRequest] | None = None

    def calls(self) -> list[LoggedRequest]:
        if self._calls is None:
            self._calls = [r for f in self.files for r in logged_calls(f)]
        return self._calls

    def requests(self, turn: int) -> list[LoggedRequest]:
        return [r for r in self.calls() if len(r.body[WIRES[API].turn_field]) == turn]

    def problems(self) -> list[str]:
        """The calls whose record cannot be rebuilt, each with its reason."""
        self.calls()
        return [c.problem for f in self.files for c in f.calls if c.problem]

    def extent(self) -> str:
        calls = self.calls()
        sizes = sorted({len(r.body["messages"]) for r in calls})
        return f"its record has {len(calls)} call(s)" + (f" of {sizes[0]}–{sizes[-1]} message(s)" if sizes else "")


class ClaudeCodeDir:
    """Claude Code's session files under `<root>/<workspace>/projects/`, only ever opened for reading."""

    def __init__(self, root: Path, max_line_bytes: int = MAX_LINE_BYTES) -> None:
        if not root.is_dir():
            raise TranscriptError(f"no Claude Code corpus directory at {root}")
        self.root = root
        self.max_line_bytes = max_line_bytes
        self._directories: dict[Path, Path] = {}
        self._under: dict[tuple[Path, Path], bool] = {}
        self._homes: dict[str, Path] = {}
        """Each workspace's directory, once it is known to resolve inside the corpus."""
        self._recent: OrderedDict[tuple[str, str], ClaudeCodeSession] = OrderedDict()

    def holds(self, path: Path) -> bool:
        """Whether `path` (resolved, symlinks followed) is in the corpus: nothing may be written there."""
        return path.resolve().is_relative_to(self.root.resolve())

    def _own_directory(self, workspace: str) -> Path:
        """The workspace's directory, resolved; refused when it is a link (out of the corpus, or to another
        directory in it, whose sessions would be read as this workspace's)."""
        if workspace not in self._homes:
            directory = self.root / workspace
            if not self._within(directory, self._resolved(self.root)):
                raise TranscriptError(f"{directory}: a link out of the corpus {self.root}; refused")
            self._homes[workspace] = directory
        directory = self._homes[workspace]
        if directory.is_symlink():
            raise TranscriptError(f"{directory}: a link to another directory of the corpus, not the workspace's own; "
                                  "refused")
        return self._resolved(directory)

    def _inside(self, workspace: str, path: Path) -> None:
        """Refuse a file that is, or sits in a directory that is, a link out of the workspace's directory (each
        directory resolved once: a corpus has many files per directory)."""
        home = self._own_directory(workspace)
        if path.is_symlink() or not self._within(path.parent, home):
            raise TranscriptError(f"{path}: a link out of workspace {workspace}'s directory {self.root / workspace}; "
                                  "refused")

    def _resolved(self, directory: Path) -> Path:
        if directory not in self._directories:
            self._directories[directory] = directory.resolve()
        return self._directories[directory]

    def _within(self, directory: Path, home: Path) -> bool:
        """Whether `directory`, resolved, is `home` or inside it; answered once per pair, as each is resolved once
        (comparing paths is slow, and a corpus has many sessions per directory)."""
        key = (directory, home)
        if key not in self._under:
            self._under[key] = self._resolved(directory).is_relative_to(home)
        return self._under[key]

    def main_files(self, workspace: str, session: str) -> list[Path]:
        if not (is_name(workspace) and is_name(session)):
            return []
        return sorted((self.root / workspace / "projects").glob(f"*/{session}.jsonl"))

    def session(self, workspace: str, session: str) -> ClaudeCodeSession | None:
        """The session, read once for the several decisions a build resolves from it (the last `RECENT`
        sessions are kept: memory stays a few sessions' worth, never the corpus)."""
        key = (workspace, session)
        if key in self._recent:
            self._recent.move_to_end(key)
            return self._recent[key]
        mains = self.main_files(workspace, session)
        if not mains:
            return None
        read = ClaudeCodeSession([f for main in mains for f in self.read_with_subagents(workspace, session, main)])
        self._recent[key] = read
        while len(self._recent) > RECENT:
            self._recent.popitem(last=False)
        return read

    def read_with_subagents(self, workspace: str, session: str, main: Path,
                            conversation_only: bool = False) -> list[SessionFile]:
        """A main file and every subagent file beside it, each checked to be the workspace's own
        (`conversation_only`: as `read_session_file`)."""
        self._inside(workspace, main)
        files = [read_session_file(main, session, self.max_line_bytes, conversation_only)]
        subagents = main.parent / session / "subagents"
        for path in sorted(subagents.glob("agent-*.jsonl")) if subagents.is_dir() else ():
            self._inside(workspace, path)
            sub = read_session_file(path, session, self.max_line_bytes, conversation_only)
            sub.agent = sub.agent or path.stem.removeprefix("agent-")
            sub.parent_call = _parent_call(path.with_suffix(".meta.json"))
            files.append(sub)
        paths = set().union(*(f.paths for f in files))  # a subagent may run elsewhere; the main loop reads its output
        for f in files:
            f.paths = paths
        return files

    def sessions(self, refused: list[str]) -> Iterator[tuple[str, str, Path]]:
        """Every (workspace, session id, main file) of the corpus, sorted. A workspace directory that is a link or
        whose name is no name, and a session file whose id is no name, is left out and named in `refused`."""
        for workspace_dir in sorted(p for p in self.root.iterdir() if p.is_dir()):
            if not is_name(workspace_dir.name):
                refused.append(f"{self.root}/{excerpt(workspace_dir.name)}: not a workspace's directory: its name "
                               f"must be a name ({NAME_RULE}); refused")
                continue
            try:
                self._own_directory(workspace_dir.name)
            except TranscriptError as exc:
                refused.append(str(exc))
                continue
            for main in sorted((workspace_dir / "projects").glob("*/*.jsonl")):
                if is_name(main.stem):
                    yield workspace_dir.name, main.stem, main
                else:
                    refused.append(f"{main.parent}/{excerpt(main.name)}: not a session file: its id must be a "
                                   f"name ({NAME_RULE}); refused")

    def read_sessions(self, refused: list[str]) -> Iterator[tuple[str, str, list[SessionFile]]]:
        """Every session of the corpus, read one at a time (workspace, id, its files); a session whose files
        cannot be read is left out and its reason appended to `refused`."""
        for workspace, session, main in self.sessions(refused):
            try:
                yield workspace, session, self.read_with_subagents(workspace, session, main)
            except TranscriptError as exc:
                refused.append(str(exc))


def _parent_call(meta: Path) -> str | None:
    if not meta.is_file():
        return None
    try:
        value = read_json_value(meta, follow_links=False)
    except JsonFileError:
        return None
    call = value.get("toolUseId") if isinstance(value, dict) else None
    return call if isinstance(call, str) else None
