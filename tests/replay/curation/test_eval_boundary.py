"""Curation's eval boundary by default (issue 60 item 4): every frozen suite registered in the suites directory
is excluded without a flag, a near-copy of a suite decision in another session is refused (case 6), and only
`--no-eval-boundary`, printed as a warning and recorded, lets them through."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from replay.cli import main
from replay.corpus.claude_code import ClaudeCodeDir
from replay.curation.build import SUITES_ENV, curate, open_inputs
from replay.curation.dataset import MANIFEST_JSON, PROVENANCE_JSONL
from replay.suite import freeze_suite
from tests.support.curation import (
    KEY,
    LOOKUP,
    copy_session_as,
    copy_workspace,
    keys_file,
    plant_retry_value,
    policy_file,
    session_path,
)
from tests.support.suites import build_corpus_suite

POLICY = 'size = 2\nshortfall = "shrink"\nclean_from = ["verified_action"]\n[shares]\nclean = 100\n'


def register_suite(registry: Path) -> Path:
    """The recorded workspace's decisions as a frozen suite in `registry` (as `suite build --from-corpus` makes
    it)."""
    held_out = registry.parent / "held-out"
    copy_workspace(held_out, "ws-w")
    build_corpus_suite(ClaudeCodeDir(held_out), registry / "deferred-1", keys={"ws-w": bytes.fromhex(KEY)})
    freeze_suite(registry / "deferred-1")
    return registry / "deferred-1"


@pytest.fixture
def near_copy(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """ws-r: the suite's session in another workspace whose retry looked up INV-8 (one id changed), with the
    suite registered in $WORKER_REPLAY_SUITES."""
    register_suite(tmp_path / "registry")
    monkeypatch.setenv(SUITES_ENV, str(tmp_path / "registry"))
    copy_workspace(tmp_path / "corpus", "ws-r")
    plant_retry_value(session_path(tmp_path / "corpus", "ws-r", LOOKUP), LOOKUP, 1, {"id": "INV-8"})
    return tmp_path / "corpus"


def argv(tmp_path: Path, corpus: Path, *extra: str) -> list[str]:
    return ["curate", "build", str(corpus), "--policy", str(policy_file(tmp_path, POLICY)), "--keys",
            str(keys_file(tmp_path, ["ws-r", "ws-x"])), "--out", str(tmp_path / "set"), *extra]


def test_a_registered_suite_and_its_near_copy_are_excluded_without_a_flag(
        tmp_path: Path, near_copy: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # ws-r's first retry starts from a suite decision's state (its request hash); its second is the suite's
    # last decision with INV-8 for INV-7: no exact match, refused as a near-duplicate (case 6)
    assert main(argv(tmp_path, near_copy)) == 2
    err = capsys.readouterr().err
    first, *detail = err.splitlines()  # one error line; the build's counts follow, indented
    assert first.startswith("error: ") and all(line.startswith("  ") for line in detail)
    assert "excluded_suite_near_duplicate 1, excluded_suite_request 1" in err
    assert not (tmp_path / "set").exists()


def test_no_eval_boundary_lets_the_registered_suite_through_and_says_so(
        tmp_path: Path, near_copy: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(argv(tmp_path, near_copy, "--no-eval-boundary")) == 0
    out, err = capsys.readouterr()
    assert err.startswith("warning: --no-eval-boundary: the frozen suites registered") and "NOT excluded" in err
    assert (f"eval boundary: 0 suites excluded (1 registered in {tmp_path / 'registry'}, NOT excluded: "
            "--no-eval-boundary); removed by session 0, request hash 0, near-duplicate 0") in out
    manifest = json.loads((tmp_path / "set" / MANIFEST_JSON).read_text())
    assert manifest["eval_boundary"] == {"suites_dir": str(tmp_path / "registry"),
                                         "registered": [str(tmp_path / "registry" / "deferred-1")],
                                         "enforced": False}
    decisions = {json.loads(line)["decision"] for line in (tmp_path / "set" / PROVENANCE_JSONL).open()}
    assert decisions == {f"{LOOKUP}.main.1", f"{LOOKUP}.main.2"}  # the two the boundary refused


def test_the_policys_suites_dir_is_the_registry_and_must_exist(tmp_path: Path, near_copy: Path,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    policy = policy_file(tmp_path, f'suites_dir = "{tmp_path / "nowhere"}"\n' + POLICY, "registry.toml")
    assert main([*argv(tmp_path, near_copy), "--policy", str(policy)]) == 2
    err = capsys.readouterr().err
    assert err == f"error: {tmp_path / 'nowhere'}: the suites directory (the policy's suites_dir or " \
                  f"${SUITES_ENV}) is not a directory\n"


def test_a_registered_suite_that_is_not_frozen_fails_the_build(tmp_path: Path, near_copy: Path,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    suite = tmp_path / "registry" / "deferred-1" / "suite.toml"
    suite.write_text(suite.read_text().split("[frozen]")[0])
    assert main(argv(tmp_path, near_copy)) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: {suite.parent}: not frozen") and err.count("\n") == 1
    assert not (tmp_path / "set").exists()


@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(session=st.uuids(), workspace=st.sampled_from(["ws-x", "ws-r"]))
def test_an_exact_copy_of_a_registered_suite_decision_never_reaches_the_set(
        session: object, workspace: str, monkeypatch: pytest.MonkeyPatch) -> None:
    with tempfile.TemporaryDirectory() as temp:
        root = Path(temp)
        register_suite(root / "registry")
        monkeypatch.setenv(SUITES_ENV, str(root / "registry"))
        copy_session_as(root / "corpus", workspace, str(session))
        inputs = open_inputs([root / "corpus"], [], keys_file(root, ["ws-x", "ws-r"]), policy_file(root, POLICY),
                             [], [])
        # the copy's second call is the suite's decision; its third repeats the lookup answered `paid` (refused
        # before the boundary reads it)
        with pytest.raises(ValueError, match=r"no example could be drawn .*excluded_suite_request 1, "
                                             r"redundant_repeat 1\)"):
            curate(inputs, root / "set")
        assert not (root / "set").exists()
