"""`corpus audit` over a corpus a tenant has spoiled where it can: its own config directory. Whatever stands
where a session file is read (a FIFO, a socket, a device, a link to one) and whatever workspace directory
cannot be the workspace's own is refused, named with its reason, and the audit finishes and counts the rest."""

from __future__ import annotations

import json
import shutil
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from replay.corpus.audit import audit, format_audit
from replay.corpus.claude_code import ClaudeCodeDir
from tests.support.hostile import special_files, within

DATA = Path(__file__).parent / "data"
WORKSPACE = "ws-agent"


def test_what_no_session_file_can_be_is_refused_and_the_audit_finishes(tmp_path: Path) -> None:
    corpus = tmp_path / "corpus"
    for workspace in (WORKSPACE, "ws bad;name"):  # a directory whose name is no workspace's
        shutil.copytree(DATA / "claude-code" / WORKSPACE, corpus / workspace)
    shutil.copytree(DATA / "claude-code" / WORKSPACE, tmp_path / "elsewhere")
    (corpus / "ws-out").symlink_to(tmp_path / "elsewhere")  # a workspace directory linked in from outside
    (corpus / "ws-alias").symlink_to(corpus / WORKSPACE)  # ... and one that is another workspace's
    sessions = next((corpus / WORKSPACE / "projects").iterdir())
    made = special_files([sessions / f"{name}.jsonl" for name in ("fifo", "socket", "zero", "null", "device")])
    # a session whose subagent's file is a FIFO: the whole session is refused, as for any unreadable file
    main = next((DATA / "claude-code-subagents" / WORKSPACE / "projects").glob("*/*.jsonl"))
    shutil.copy(main, sessions / main.name)
    made |= special_files([sessions / main.stem / "subagents" / "agent-a1.jsonl"])

    report = within(20, lambda: audit(ClaudeCodeDir(corpus)))

    assert (report.workspaces, report.sessions) == (1, 2)  # the recorded sessions, and nothing else
    refused = {line.split(": ", 1)[0]: line.split(": ", 1)[1] for line in report.refused}
    for path, kind in made.items():
        assert kind in refused.pop(str(path)), report.refused
    assert "not a regular file (a FIFO)" in "\n".join(report.refused)
    assert refused.pop(f"{corpus}/'ws bad;name'").startswith("not a workspace's directory: its name must be a name")
    assert refused.pop(f"{corpus}/ws-alias") == "a link to another directory of the corpus, not the workspace's own; " \
                                                "refused"
    assert refused.pop(f"{corpus}/ws-out") == f"a link out of the corpus {corpus}; refused"
    assert refused == {}
    printed = format_audit(report)
    assert f"refused: {len(report.refused)} path(s)" in printed
    assert all(line in printed for line in report.refused)


def test_counted_on_several_processes_the_report_is_the_one_process_report_byte_for_byte(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Sessions counted in batches on two worker processes, merged in session order: the same JSON and the
    same table as counting them one by one here, refusals in the same places among them."""
    from replay.corpus import audit as module

    corpus = tmp_path / "corpus"
    for index, source in enumerate(["claude-code", "claude-code-subagents", "claude-code"] * 2):
        shutil.copytree(DATA / source / WORKSPACE, corpus / f"ws-{index}", dirs_exist_ok=True)
    shutil.copytree(DATA / "claude-code" / WORKSPACE, corpus / "ws bad;name")  # refused between workspaces
    (corpus / "ws-3-alias").symlink_to(corpus / "ws-3")
    spoiled = next((corpus / "ws-2" / "projects").glob("*/*.jsonl"))
    spoiled.write_text(spoiled.read_text() + "{torn\n")  # refused between sessions
    submitted = []

    class CountingPool(ProcessPoolExecutor):
        def submit(self, *args: Any, **kwargs: Any) -> Any:
            submitted.append(args[1])
            return super().submit(*args, **kwargs)

    monkeypatch.setattr(module, "ProcessPoolExecutor", CountingPool)
    alone = audit(ClaudeCodeDir(corpus), workers=1)
    assert (alone.sessions, alone.subagent_runs, len(alone.refused)) == (9, 4, 3) and not submitted
    for batch in (1, 2, 5):
        shared = audit(ClaudeCodeDir(corpus), workers=2, batch=batch)
        assert shared.model_dump_json() == alone.model_dump_json()
        assert format_audit(shared) == format_audit(alone)
    assert len(submitted) == 10 + 5 + 2  # every batch went to a worker: 10 sessions (one refused) in 1s, 2s, 5s


def test_a_count_reads_a_few_fields_of_each_line_and_counts_what_the_whole_lines_hold(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The audit parses only the fields a count reads; lines whose fields have other types, or that are no JSON a
    field-typed parse takes (bytes that are not UTF-8 where no field is read, NaN), count as when read whole, and
    are refused for the same reasons."""
    from replay.corpus import claude_code

    corpus = tmp_path / "corpus"
    for index, source in enumerate(["claude-code", "claude-code-subagents"]):
        shutil.copytree(DATA / source / WORKSPACE, corpus / f"ws-{index}")
    mains = sorted(corpus.glob("*/projects/*/*.jsonl"))
    odd = [{"type": "user", "message": {"content": [{"type": "tool_result", "tool_use_id": 7, "is_error": True}]}},
           {"type": "assistant", "message": "no blocks", "timestamp": 1},
           {"type": "assistant", "uuid": "u-odd", "message": {"content": [{"type": "tool_use", "id": "c-odd",
                                                                            "name": ["Bash"], "input": {}}]}},
           {"type": 5, "sessionId": None}]
    with mains[0].open("a") as handle:
        handle.write("".join(json.dumps(line) + "\n" for line in odd) + '{"type": "attachment", "x": NaN}\n')
    with mains[1].open("ab") as handle:
        handle.write(b'{"type": "attachment", "junk": "\xff"}\n')  # refused: not UTF-8, where no field is read
    few = audit(ClaudeCodeDir(corpus), workers=1)
    monkeypatch.setattr(claude_code, "_CONVERSATION_FIELDS", None)
    whole = audit(ClaudeCodeDir(corpus), workers=1)
    assert few.model_dump_json() == whole.model_dump_json()
    assert any("not UTF-8 text" in reason for reason in few.refused) and few.sessions == len(mains) - 1
