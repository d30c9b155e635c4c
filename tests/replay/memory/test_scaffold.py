"""`worker-replay memory init`: an empty memory tree for a corpus recorded without one (issue 63 item 2)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from replay.memory.contract import check_memory
from replay.memory.files import MemoryLoadError, load_memory
from replay.memory.inject import Workspace, footer
from replay.memory.scaffold import init_memory
from tests.support.cli import assert_one_error_line, run_cli
from tests.support.curation import DATA, copy_workspace

FIXTURES = Path(__file__).parent / "fixtures" / "memory"


def test_init_makes_a_checked_empty_tree_for_each_corpus_workspace_and_keeps_the_rest(tmp_path: Path) -> None:
    corpus = tmp_path / "corpus"
    for workspace in ("ws-a", "ws-b"):
        copy_workspace(corpus, workspace)  # the recorded sessions, under two workspaces
    root = tmp_path / "memory"
    shutil.copytree(FIXTURES / "ws-a", root / "ws-a")  # a workspace that has memory already
    before = {p: p.read_bytes() for p in (root / "ws-a").rglob("*") if p.is_file()}
    done = run_cli("replay", "memory", "init", str(root), "ws-extra", "--corpus", str(corpus), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "ws-b: made, empty" in done.stdout and "ws-extra: made, empty" in done.stdout
    assert "ws-a: kept as it is" in done.stdout and "2 made, 1 kept" in done.stdout
    assert {p: p.read_bytes() for p in (root / "ws-a").rglob("*") if p.is_file()} == before
    for made in ("ws-b", "ws-extra"):
        assert check_memory(root / made) == []  # the contract's checks pass it: nothing to fix by hand
        added = footer(Workspace(), load_memory(root / made))
        assert (added.text, added.rule_ids, added.essentials) == ("", (), ())  # `workspace` injects nothing
    assert footer(Workspace(), load_memory(root / "ws-a")).rule_ids  # the kept one still injects its rules
    checked = run_cli("replay", "memory", "check", str(root / "ws-b"), cwd=tmp_path)
    assert checked.returncode == 0 and checked.stdout == "", checked.stdout


def test_init_of_the_recorded_corpus_names_its_one_workspace(tmp_path: Path) -> None:
    done = run_cli("replay", "memory", "init", str(tmp_path / "m"), "--corpus", str(DATA), cwd=tmp_path)
    assert done.returncode == 0 and sorted(p.name for p in (tmp_path / "m").iterdir()) == ["ws-agent"]


@pytest.mark.parametrize("names", [["ws-ok", "../escape"], ["ws-ok", "a b"]])
def test_a_name_that_is_no_workspace_writes_nothing(tmp_path: Path, names: list[str]) -> None:
    done = run_cli("replay", "memory", "init", str(tmp_path / "m"), *names, cwd=tmp_path)
    assert_one_error_line(done, "a workspace must be a name")
    assert not (tmp_path / "m").exists()


def test_a_root_that_is_a_file_or_no_workspace_at_all_is_refused(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("x")
    with pytest.raises(MemoryLoadError, match="not a directory"):
        init_memory(tmp_path / "file", ["ws-a"])
    assert_one_error_line(run_cli("replay", "memory", "init", str(tmp_path / "m"), cwd=tmp_path),
                          "no workspace to make memory for")
