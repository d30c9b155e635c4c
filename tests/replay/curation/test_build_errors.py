"""Bad input to `curate build`: one `error:` line naming the file (and line), exit 2, nothing written."""

from __future__ import annotations

import json
import re
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from replay.cli import main
from replay.corpus.claude_code import ClaudeCodeDir
from replay.suite import freeze_suite
from tests.support.curation import KEY, copy_workspace, keys_file, policy_file
from tests.support.runs import seal
from tests.support.suites import build_corpus_suite

GOOD = 'size = 1\nclean_from = ["verified_action"]\n[shares]\nclean = 100\n'
REPO = Path(__file__).resolve().parents[3]


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("corpus")
    copy_workspace(root, "ws-w")
    return root


def suite(tmp_path: Path, corpus: Path, *, frozen: bool = True) -> Path:
    build_corpus_suite(ClaudeCodeDir(corpus), tmp_path / "suite", keys={"ws-w": bytes.fromhex(KEY)})
    if frozen:
        freeze_suite(tmp_path / "suite")
    return tmp_path / "suite"


def edited_suite(tmp_path: Path, corpus: Path) -> Path:
    path = suite(tmp_path, corpus)
    decisions = path / "decisions.jsonl"
    decisions.write_text(decisions.read_text().replace("INV-7", "INV-1"))
    return path


def other_run(tmp_path: Path) -> Path:
    run = tmp_path / "run"
    run.mkdir()
    row = {"arm": "a", "decision_id": "d-elsewhere", "stratum": "known_failure", "cluster": "c", "workspace": "ws-w",
           "model": "m", "memory": "withheld", "parsed": {"outcome": "no_call"}, "score": {},
           "finished_at": "2026-12-04T00:00:00Z"}
    (run / "results.jsonl").write_text(json.dumps(row) + "\n")
    return seal(run)


Case = Callable[[Path, Path], tuple[list[str], str]]
CASES: dict[str, Case] = {
    "shares that do not sum to 100": lambda t, c: (
        ["--policy", str(policy_file(t, "size = 1\n[shares]\nclean = 60\nnegative = 30\n"))],
        r"policy\.toml:4: shares: .*sum to 90, not 100"),
    "an unknown policy key": lambda t, c: (
        ["--policy", str(policy_file(t, "sizes = 3\n" + GOOD))], r"policy\.toml:3: sizes: Extra inputs"),
    "an excluded suite that is not frozen": lambda t, c: (
        ["--exclude-suite", str(suite(t, c, frozen=False))], r"suite: not frozen"),
    "an excluded suite changed since it was frozen": lambda t, c: (
        ["--exclude-suite", str(edited_suite(t, c))], r"decisions\.jsonl.*changed since"),
    "a run of another suite": lambda t, c: (
        ["--runs", str(other_run(t))], r"run: decision d-elsewhere of workspace ws-w is not in the corpus"),
    "a keys file others can read": lambda t, c: (
        ["--keys", str(keys_file(t, ["ws-w"], mode=0o644))], r"keys\.toml.*mode 644"),
    "a corpus that is not one": lambda t, c: ([str(t / "nowhere")], r"nowhere: not a corpus"),
}


@pytest.mark.parametrize("case", CASES)
def test_bad_input_is_one_error_line_and_writes_nothing(case: str, tmp_path: Path, corpus: Path,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    extra, message = CASES[case](tmp_path, corpus)
    defaults = {"--policy": lambda: policy_file(tmp_path, GOOD, "good.toml"),
                "--keys": lambda: keys_file(tmp_path, ["ws-w"])}
    argv = ["curate", "build", str(corpus), *extra, "--out", str(tmp_path / "set"),
            *(x for flag, make in defaults.items() if flag not in extra for x in (flag, str(make())))]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and re.search(message, err), err
    assert not (tmp_path / "set").exists()


def test_an_output_git_would_track_is_refused_and_one_it_ignores_is_not(tmp_path: Path, corpus: Path,
                                                                        capsys: pytest.CaptureFixture[str]) -> None:
    """Training data never enters git: refused where the work tree would track it; a path it ignores (a
    checkout's `runs/`, where `worker-demo loop` writes by default) cannot enter it by `git add`."""
    tree = tmp_path / "tree"
    tree.mkdir()
    subprocess.run(["git", "init", "-q", str(tree)], check=True)
    (tree / ".gitignore").write_text("/runs/\n")
    (tree / "runs").mkdir()

    def build(out: Path) -> int:
        return main(["curate", "build", str(corpus), "--policy", str(policy_file(tmp_path, GOOD)), "--keys",
                     str(keys_file(tmp_path, ["ws-w"])), "--out", str(out)])

    assert build(tree / "curated") == 2
    assert "inside the git work tree" in capsys.readouterr().err and not (tree / "curated").exists()
    assert build(tree / "runs" / "curated") == 0 and (tree / "runs" / "curated" / "train.jsonl").is_file()


def test_a_good_build_through_the_cli_prints_asked_against_got(tmp_path: Path, corpus: Path,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["curate", "build", str(corpus), "--policy", str(policy_file(tmp_path, GOOD)), "--keys",
            str(keys_file(tmp_path, ["ws-w"])), "--out", str(tmp_path / "set")]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "1 examples" in out and "clean" in out and (tmp_path / "set" / "train.jsonl").is_file()
    assert "eval boundary: 0 suites excluded (0 registered in " in out  # the conftest's empty registry
