"""`corpus audit` over a corpus a tenant has spoiled where it can: its own config directory. Whatever stands
where a session file is read (a FIFO, a socket, a device, a link to one) and whatever workspace directory
cannot be the workspace's own is refused, named with its reason, and the audit finishes and counts the rest."""

from __future__ import annotations

import shutil
from pathlib import Path

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
