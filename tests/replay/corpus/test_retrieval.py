"""Memory reads per turn and the index's coverage, from this project's transcripts and from the recorded
Claude Code session files (tests/replay/corpus/data/)."""

from __future__ import annotations

import json
import posixpath
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from core.records import Decision
from replay.cli import main as replay_main
from replay.corpus.retrieval import history_reads, index_links, memory_read
from replay.corpus.transcripts import TranscriptHeader, transcript_lines

DATA = Path(__file__).parent / "data"


@pytest.mark.parametrize(("path", "cwd", "read"), [
    ("memory/notes/a.md", "/srv/groups/ws-a", "memory/notes/a.md"),
    ("/srv/groups/ws-a/memory/notes/a.md", "/srv/groups/ws-a", "memory/notes/a.md"),
    ("/srv/groups/ws-a/memory/notes/a.md", None, "memory/notes/a.md"),  # placed by the workspace's name
    ("memory/./x/../notes/a.md", None, "memory/notes/a.md"),
    ("memory/../../ws-b/memory/secret.md", "/srv/groups/ws-a", ".."),  # climbs out: counted, not followed
    ("/srv/groups/ws-a/memory/../../ws-b/memory/secret.md", "/srv/groups/ws-a", ".."),
    ("/srv/groups/ws-a/../ws-a/memory/b.md", "/srv/groups/ws-a", ".."),  # out and back in: it left the workspace
    ("/srv/groups/x/../ws-a/memory/b.md", "/srv/groups/ws-a", "memory/b.md"),  # never inside until it lands
    ("memory/../rules/learned-corrections.md", None, None),  # inside, but no memory file
    ("/etc/passwd", "/srv/groups/ws-a", None),
    ("/srv/groups/ws-a-old/memory/a.md", "/srv/groups/ws-a", None),  # a sibling sharing the prefix
    ("", None, None),
])
def test_where_a_read_path_lands(path, cwd, read):
    assert memory_read(path, cwd, "ws-a") == read


@given(st.lists(st.sampled_from(["memory", "..", ".", "ws-a", "notes", "a.md", ""]), max_size=8),
       st.booleans(), st.sampled_from([None, "/srv/groups/ws-a"]))
def test_a_read_is_a_clean_path_inside_memory_or_an_escape(parts, absolute, cwd):
    path = ("/srv/groups/ws-a/" if absolute else "") + "/".join(parts)
    read = memory_read(path, cwd, "ws-a")
    assert read is None or read == ".." or (read.startswith("memory/") and posixpath.normpath(read) == read
                                            and ".." not in read.split("/"))


def read_call(block_id: str, path: str) -> dict[str, object]:
    return {"role": "assistant", "content": [{"type": "tool_use", "id": block_id, "name": "Read",
                                              "input": {"file_path": path}}]}


def test_a_decisions_history_names_the_memory_it_read_before_it():
    """A Messages decision as the runtime records it: absolute paths under its cwd. Only reads before the
    decision count, a read out of the workspace or of another file is none, and a repeat counts once."""
    cwd = "/srv/groups/ws-a"
    turn = [{"role": "user", "content": "Is INV-7 paid?"},
            read_call("t1", f"{cwd}/memory/notes/terms.md"),
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "net 30"}]},
            read_call("t2", f"{cwd}/memory/../../ws-b/memory/secret.md"),
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t2", "content": "no"}]},
            read_call("t3", "/etc/hosts"),
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t3", "content": "x"}]},
            read_call("t4", "memory/notes/terms.md"),
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t4", "content": "net 30"}]}]

    def decision(messages: list[dict[str, object]]) -> Decision:
        return Decision.model_validate({
            "id": "d", "stratum": "verified_action", "cluster": "c", "workspace": "ws-a", "session": "s",
            "captured_at": "2026-08-02T10:11:12Z", "api": "messages", "request": {"messages": messages}})

    assert history_reads(decision(turn), cwd) == ("memory/notes/terms.md",)
    assert history_reads(decision(turn[:1]), cwd) == ()
    assert history_reads(decision(turn[3:]), cwd) == ("memory/notes/terms.md",)  # the relative read, at the end
    assert history_reads(decision(turn[3:7]), cwd) == ()  # an escape and a file elsewhere read no memory
    assert history_reads(decision(turn), cwd, {"read_file": "path"}) == ()  # another runtime's read tool


def test_index_links_are_relative_to_the_memory_directory():
    text = ("- [Billing](notes/billing.md#terms) and `memory/notes/tax.md`\n- see vendors.md, "
            "[site](https://example.com/x.md), [up](../rules/x.md), [abs](/etc/x.md)\n")
    assert index_links(text) == {"memory/notes/billing.md", "memory/notes/tax.md", "memory/vendors.md"}


def call(tool: str, argument: str, path: str, number: int) -> dict:
    return {"id": f"c{number}", "type": "function",
            "function": {"name": tool, "arguments": json.dumps({argument: path})}}


@pytest.fixture
def corpus(tmp_path) -> tuple[Path, Path]:
    """Two workspaces' transcripts in this project's format (chat and Messages), and their memory trees."""
    transcripts, memory = tmp_path / "transcripts", tmp_path / "memory"
    chat = [{"role": "user", "content": "What are ACME's terms?"},
            {"role": "assistant", "content": None, "tool_calls": [call("Read", "file_path", "memory/notes/a.md", 1)]},
            {"role": "tool", "tool_call_id": "c1", "content": "net 30"},
            {"role": "assistant", "content": None, "tool_calls": [
                call("Read", "file_path", "memory/../../ws-b/memory/secret.md", 2),
                call("Read", "file_path", "src/app.py", 3)]},
            {"role": "tool", "tool_call_id": "c2", "content": "denied"},
            {"role": "tool", "tool_call_id": "c3", "content": "print()"},
            {"role": "assistant", "content": "Net 30."}]
    messages = [{"role": "user", "content": "And the tax id?"},
                {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "Read",
                                                   "input": {"file_path": "/srv/groups/ws-a/memory/notes/a.md"}},
                                                  {"type": "tool_use", "id": "t2", "name": "Read",
                                                   "input": {"file_path": "memory/profile.md"}}]},
                {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "x"}]},
                {"role": "assistant", "content": [{"type": "text", "text": "It is on file."}]}]
    for workspace, session, api, lines in (("ws-a", "s-1", "chat", chat), ("ws-a", "s-2", "messages", messages),
                                           ("ws-b", "s-1", "chat", chat[:1])):
        (transcripts / workspace).mkdir(parents=True, exist_ok=True)
        header = TranscriptHeader(workspace=workspace, session=session, api=api)
        (transcripts / workspace / f"{session}.jsonl").write_text(transcript_lines(header, lines))
    notes = memory / "ws-a" / "memory" / "notes"
    notes.mkdir(parents=True)
    for name in ("a.md", "b.md", "c.md"):
        (notes / name).write_text("a note\n")
    (memory / "ws-a" / "memory" / "profile.md").write_text("ACME\n")
    (memory / "ws-a" / "memory" / "index.md").write_text("- [a](notes/a.md)\n- [b](notes/b.md)\n- [gone](gone.md)\n")
    return transcripts, memory


def test_reads_per_turn_and_the_index_coverage(corpus, capsys):
    transcripts, memory = corpus
    assert replay_main(["corpus", "reads", str(transcripts), "--memory-root", str(memory), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    sessions = {(s["workspace"], s["session"]): s for s in report["sessions"]}
    # s-1: 3 answers, one read of notes/a.md, one escape (never a read), one read of a file outside memory/
    assert sessions["ws-a", "s-1"] == {"workspace": "ws-a", "session": "s-1", "cwd": None, "turns": 3, "turns_reading": 1,
                                       "reads": 1, "escaped": 1, "files": ["memory/notes/a.md"]}
    # s-2: the absolute path placed by the workspace's name; an essential read on demand is still a read
    assert sessions["ws-a", "s-2"]["files"] == ["memory/notes/a.md", "memory/profile.md"]
    ws_a = next(w for w in report["workspaces"] if w["workspace"] == "ws-a")
    assert (ws_a["sessions"], ws_a["turns"], ws_a["turns_reading"], ws_a["reads"], ws_a["escaped"]) == (2, 5, 2, 3, 1)
    assert (ws_a["memory_files"], ws_a["listed"]) == (3, 2)
    assert ws_a["unlisted"] == ["memory/notes/c.md"] and ws_a["never_read"] == ["memory/notes/b.md"]
    assert ws_a["dead_links"] == ["memory/gone.md"]
    ws_b = next(w for w in report["workspaces"] if w["workspace"] == "ws-b")
    assert (ws_b["turns"], ws_b["reads"], ws_b["memory_files"]) == (0, 0, None)  # no memory tree: no coverage


def test_another_runtimes_read_tool(corpus, capsys):
    transcripts, _ = corpus
    assert replay_main(["corpus", "reads", str(transcripts), "--read-tool", "read_file=path", "--json"]) == 0
    assert all(s["reads"] == 0 for s in json.loads(capsys.readouterr().out)["sessions"])


def test_the_runtimes_own_session_files(capsys, tmp_path):
    """The recorded Claude Code sessions: every answer is a turn (subagents' too); the 135M model read no
    memory, and an empty tree has nothing unlisted."""
    (tmp_path / "ws-agent" / "memory").mkdir(parents=True)
    assert replay_main(["corpus", "reads", str(DATA / "claude-code-subagents"), "--memory-root", str(tmp_path),
                        "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["refused"] == [] and len(report["workspaces"]) == 1
    workspace = report["workspaces"][0]
    answers = sum(1 for f in (DATA / "claude-code-subagents").rglob("*.jsonl") for line in f.read_text().splitlines()
                  if json.loads(line).get("type") == "assistant")
    assert 0 < workspace["turns"] <= answers  # an answer spread over several lines is one turn
    assert (workspace["reads"], workspace["memory_files"], workspace["unlisted"]) == (0, 0, [])


def test_a_session_that_cannot_be_read_is_refused_and_the_rest_counted(corpus, capsys):
    transcripts, _ = corpus
    (transcripts / "ws-a" / "s-3.jsonl").write_text('{"workspace": "ws-a", "session": "s-3"}\n{"role": \n')
    assert replay_main(["corpus", "reads", str(transcripts)]) == 0
    out = capsys.readouterr().out
    assert "refused: 1 file(s)" in out and "s-3.jsonl:2" in out
    assert [line.split()[:4] for line in out.splitlines()[2:4]] == [["ws-a", "2", "5", "2"], ["ws-b", "1", "0", "0"]]
