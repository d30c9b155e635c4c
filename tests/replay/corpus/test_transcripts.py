"""The transcript corpus: one read-only JSONL file per session, validated with file:line errors."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from replay.corpus.transcripts import (
    MAX_LINE_BYTES,
    TranscriptDir,
    TranscriptError,
    TranscriptHeader,
    read_transcript,
    transcript_lines,
)
from tests.support.hostile import hostile_bytes, special_files, within

HEADER = {"workspace": "ws-a", "session": "s-1", "tools": [], "tool_choice": "auto"}


def write(root, workspace: str, session: str, lines: list) -> None:
    (root / workspace).mkdir(parents=True, exist_ok=True)
    (root / workspace / f"{session}.jsonl").write_text(
        "".join((line if isinstance(line, str) else json.dumps(line)) + "\n" for line in lines))


def test_a_session_reads_back_verbatim_and_absent_keys_stay_absent(tmp_path):
    messages = [{"role": "user", "content": "Grüße 👋"},
                {"role": "assistant", "content": None, "tool_calls": [
                    {"id": "c1", "type": "function", "function": {"name": "lookup", "arguments": "{\"id\": 1.0}"}}]},
                {"role": "tool", "tool_call_id": "c1", "content": "{}"},
                {"role": "user", "content": [{"type": "text", "text": "und?"}]}]
    header = TranscriptHeader(workspace="ws-a", session="s-1", tools=None, params={"temperature": 0})
    (tmp_path / "ws-a").mkdir()
    (tmp_path / "ws-a" / "s-1.jsonl").write_text(transcript_lines(header, messages), encoding="utf-8")
    transcript = TranscriptDir(tmp_path).session("ws-a", "s-1")
    assert transcript is not None and list(transcript.messages) == messages
    assert "tool_calls" not in transcript.messages[0] and "tool_call_id" not in transcript.messages[1]
    assert transcript.header.tools is None and transcript.header.params == {"temperature": 0}
    # the request body of turn 3: the session's params, no tools key (none offered); `model` is the gateway's
    assert transcript.body(3) == {"temperature": 0, "messages": messages[:3]}
    [logged] = transcript.requests(3)
    assert logged.body == transcript.body(3) and logged.answer == messages[3] is not None or logged.answer is None
    assert logged.answer is None and "not the assistant's answer" in logged.no_answer  # a user message follows
    assert transcript.requests(4) == [] and transcript.extent() == "the transcript has 4"


def test_missing_sessions_and_ids_that_are_no_file_names(tmp_path):
    write(tmp_path, "ws-a", "s-1", [HEADER])
    source = TranscriptDir(tmp_path)
    assert source.session("ws-a", "s-2") is None and source.session("ws-b", "s-1") is None
    for bad in ("../ws-a", "..", "", "a/b"):
        assert source.session(bad, "s-1") is None and source.session("ws-a", bad) is None
    with pytest.raises(TranscriptError, match="no transcript directory"):
        TranscriptDir(tmp_path / "nowhere")


@pytest.mark.parametrize(("lines", "where", "what"), [
    ([HEADER, "{not json"], ":2:", "invalid JSON"),
    ([{**HEADER, "tool_choice": 3}], ":1:", "invalid header: tool_choice"),
    ([{**HEADER, "extra": 1}], ":1:", "invalid header: extra"),
    ([HEADER, {"content": "no role"}], ":2:", "invalid message: role"),
    ([HEADER, {"role": "user"}, {"role": "assistant", "tool_calls": "c1"}], ":3:", "invalid message: tool_calls"),
    ([HEADER, "[1, 2]"], ":2:", "must be a JSON object"),
    ([{**HEADER, "workspace": "../ws-b"}], ":1:", "invalid header: workspace"),
    ([{**HEADER, "session": "s-1/../../x"}], ":1:", "invalid header: session"),


    ([HEADER, "[" * 50_000 + "]" * 50_000], ":2:", "nested deeper than 100 levels"),
    ([HEADER, '{"role": "user", "content": ' + "7" * 5000 + "}"], ":2:", "invalid JSON: Exceeds the limit"),
])
def test_errors_name_the_file_and_line(tmp_path, lines, where, what):
    write(tmp_path, "ws-a", "s-1", lines)
    with pytest.raises(TranscriptError) as error:
        TranscriptDir(tmp_path).session("ws-a", "s-1")
    assert f"s-1.jsonl{where}" in str(error.value) and what in str(error.value)


def test_the_header_must_name_its_own_file(tmp_path):
    write(tmp_path, "ws-a", "s-1", [{**HEADER, "session": "s-9"}])
    with pytest.raises(TranscriptError, match=r"s-1.jsonl:1: the header names .*'s-9'"):
        TranscriptDir(tmp_path).session("ws-a", "s-1")
    (tmp_path / "empty.jsonl").write_text("\n")
    with pytest.raises(TranscriptError, match="empty"):
        read_transcript(tmp_path / "empty.jsonl")


def test_links_out_of_the_corpus_are_refused(tmp_path):
    """A session file or workspace directory that is a symlink to elsewhere is not the corpus."""
    corpus, elsewhere = tmp_path / "corpus", tmp_path / "elsewhere"
    write(elsewhere, "ws-b", "s-1", [{**HEADER, "workspace": "ws-a"}])
    write(corpus, "ws-a", "s-0", [{**HEADER, "session": "s-0"}])
    (corpus / "ws-a" / "s-1.jsonl").symlink_to(elsewhere / "ws-b" / "s-1.jsonl")
    (corpus / "ws-c").symlink_to(elsewhere / "ws-b", target_is_directory=True)
    source = TranscriptDir(corpus)
    assert source.session("ws-a", "s-0") is not None
    with pytest.raises(TranscriptError, match="s-1.jsonl: a link out of the transcript directory"):
        source.session("ws-a", "s-1")
    with pytest.raises(TranscriptError, match="ws-c/s-1.jsonl: a link out of the transcript directory"):
        source.session("ws-c", "s-1")
    (corpus / "ws-a" / "s-2.jsonl").symlink_to(corpus / "ws-a" / "s-0.jsonl")  # inside: still never followed
    with pytest.raises(TranscriptError, match=r"s-2.jsonl: not a regular file \(a symbolic link, not followed\)"):
        source.session("ws-a", "s-2")


def test_what_no_session_file_can_be_is_refused_by_name_and_never_waited_on(tmp_path):
    """Where a session file is read, a tenant's FIFO (an open would wait for a writer for good), socket, device or
    link to one is refused with what it is; so is a workspace directory that is a link or has no name."""
    corpus = tmp_path / "corpus"
    write(corpus, "ws-a", "s-0", [{**HEADER, "session": "s-0"}])
    write(corpus, "ws bad;name", "s-0", [{**HEADER, "session": "s-0"}])
    (corpus / "ws-alias").symlink_to(corpus / "ws-a")
    (corpus / "ws-a" / "s 1.jsonl").write_text("")
    made = special_files([corpus / "ws-a" / f"{name}.jsonl" for name in ("fifo", "socket", "zero", "null", "dev")])
    source, refused = TranscriptDir(corpus), []
    assert list(source.sessions(refused)) == [("ws-a", name) for name in sorted(["s-0", *(p.stem for p in made)])]
    assert [line.split(": ", 1)[0] for line in refused] == [f"{corpus}/'ws bad;name'", f"{corpus}/ws-a/'s 1.jsonl'",
                                                           f"{corpus}/ws-alias"]
    for path, kind in made.items():
        with pytest.raises(TranscriptError, match=kind):
            within(20, lambda path=path: source.session("ws-a", path.stem))


def test_an_overlong_line_refuses_the_session_without_reading_it_whole(tmp_path):
    """A line longer than MAX_LINE_BYTES is refused by its size before any JSON is parsed."""
    big = json.dumps({"role": "user", "content": "x" * MAX_LINE_BYTES})
    write(tmp_path, "ws-a", "s-1", [HEADER, {"role": "user", "content": "hi"}, big])
    with pytest.raises(TranscriptError, match=rf"s-1.jsonl:3: line longer than {MAX_LINE_BYTES} bytes"):
        TranscriptDir(tmp_path).session("ws-a", "s-1")
    fits = json.dumps({"role": "user", "content": "x" * (MAX_LINE_BYTES - 40)})
    write(tmp_path, "ws-a", "s-2", [{**HEADER, "session": "s-2"}, fits])
    transcript = TranscriptDir(tmp_path).session("ws-a", "s-2")
    assert transcript is not None and len(transcript.messages) == 1


@settings(max_examples=200, deadline=None)
@given(workspace=st.text(max_size=12) | st.sampled_from(["..", ".", "../ws-a", "ws-a/..", "/etc"]),
       session=st.text(max_size=12) | st.sampled_from(["..", "../../x", "s-1"]))
def test_no_id_names_a_file_outside_the_corpus(workspace, session):
    root = Path(tempfile.gettempdir())
    path = TranscriptDir(root).path(workspace, session)
    assert path is None or (path.parent.parent == root and path.name == f"{session}.jsonl"
                            and os.path.normpath(path) == str(path))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=hostile_bytes([json.dumps(HEADER).encode(), b'{"role": "user", "content": "hi"}']))
def test_any_bytes_are_a_transcript_or_one_error_naming_the_file(tmp_path, data: bytes) -> None:
    path = tmp_path / "any.jsonl"
    path.write_bytes(data)
    try:
        read_transcript(path)
    except TranscriptError as exc:
        assert str(exc).startswith(str(path))


def test_a_messages_header_names_its_api_and_keeps_its_system_field(tmp_path):
    system = [{"type": "text", "text": "You keep the ledger.", "cache_control": {"type": "ephemeral"}}]
    tools = [{"name": "lookup", "input_schema": {"type": "object"}}]
    messages = [{"role": "user", "content": "Is INV-7 paid?"},
                {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "lookup", "input": {}}]}]
    header = TranscriptHeader(workspace="ws-a", session="s-1", api="messages", system=system, tools=tools,
                              tool_choice={"type": "any"}, params={"max_tokens": 64})
    write(tmp_path, "ws-a", "s-1", [transcript_lines(header, messages)[:-1]])
    transcript = TranscriptDir(tmp_path).session("ws-a", "s-1")
    assert transcript is not None and transcript.header.api == "messages"
    assert transcript.body(1) == {"max_tokens": 64, "messages": messages[:1],
                                                 "system": system, "tools": tools, "tool_choice": {"type": "any"}}
    write(tmp_path, "ws-a", "s-2", [{**HEADER, "session": "s-2", "system": "hi"}])
    with pytest.raises(TranscriptError, match=r"s-2.jsonl:1: invalid header: .*system is a Messages field"):
        TranscriptDir(tmp_path).session("ws-a", "s-2")
    write(tmp_path, "ws-a", "s-3", [{**HEADER, "session": "s-3", "api": "responses"}, {"content": "no role"}])
    with pytest.raises(TranscriptError, match=r"s-3.jsonl:2: invalid message: .*role or a type"):
        TranscriptDir(tmp_path).session("ws-a", "s-3")
