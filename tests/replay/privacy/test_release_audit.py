"""`worker-replay privacy audit` on what it cannot read, and its JSON: one `error:` line for a directory it cannot
audit (missing, empty, holding a link or a FIFO, which are never followed or opened), findings by line and
path for JSON lines and by line for text."""

from __future__ import annotations

import json
import os

import pytest

from replay.cli import main


@pytest.mark.parametrize("make", ["missing", "empty", "link", "fifo"])
def test_a_directory_that_cannot_be_audited_is_one_error_line(tmp_path, capsys, make):
    target = tmp_path / "set"
    if make != "missing":
        target.mkdir()
    if make == "link":
        (tmp_path / "elsewhere.jsonl").write_text('{"to": "Jane Roe"}\n')
        (target / "train.jsonl").symlink_to(tmp_path / "elsewhere.jsonl")
    if make == "fifo":
        os.mkfifo(target / "train.jsonl")
    assert main(["privacy", "audit", str(target)]) == 2
    error = capsys.readouterr().err
    assert error.startswith("error: ") and error.count("\n") == 1 and "Jane" not in error


def test_the_json_names_findings_by_file_line_type_and_path(tmp_path, capsys):
    (tmp_path / "set").mkdir()
    (tmp_path / "set" / "train.jsonl").write_text(
        json.dumps({"messages": [{"role": "tool", "content": json.dumps({"assignee": "Li Wei"})}]}) + "\n"
        + json.dumps({"note": "<PERSON_0123abcd> and <EMAIL_0123abcd>"}) + "\n")
    (tmp_path / "set" / "manifest.json").write_text('{\n  "root": "ok",\n  "contact": "mail ops@example.com"\n}\n')
    assert main(["privacy", "audit", str(tmp_path / "set"), "--json"]) == 1
    report = json.loads(capsys.readouterr().out)
    assert report["findings"] == [
        {"file": str(tmp_path / "set" / "manifest.json"), "line": 3, "kind": "EMAIL", "path": None},
        {"file": str(tmp_path / "set" / "train.jsonl"), "line": 1, "kind": "PERSON", "path": "$.messages[0].content"}]
    assert report["pseudonyms"] == {"EMAIL": 1, "PERSON": 1} and report["workspaces_scanned"] is None
    assert report["files"] == {str(tmp_path / "set" / "manifest.json"): 4, str(tmp_path / "set" / "train.jsonl"): 2}
