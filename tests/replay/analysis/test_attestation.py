"""The verdict as an attestation (custody item 5): `gate` writes an in-toto Statement whose predicate is the verdict
and every input it judged by digest; `worker-replay verify` recomputes each digest and exits 0 only when all match,
naming whichever input changed or is gone. Bad input is one `error:` line."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from core.attestation import STATEMENT_TYPE, VERDICT_PREDICATE
from replay.analysis.gates import read_verdict, write_verdict
from replay.cli import main
from replay.run.directory import load_results
from tests.replay.analysis.test_gates import CANDIDATE, strong_records, write_run, write_suite
from tests.support.e13 import BASE
from tests.support.runs import bind, write_sealed

ROOT = Path(__file__).resolve().parents[3]
INPUTS = ("policy", "results", "suite", "evidence:confirmation")


def judged(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> Path:
    """A confirmation-run gate judged through the CLI on a run of a suite on disk; returns the verdict file."""
    tmp_path.mkdir(exist_ok=True)
    policy = tmp_path / "policy.toml"
    policy.write_text('name = "confirm"\nversion = "1"\n\n[[conditions]]\nid = "confirmation-run"\ndescription = "d"\n'
                      'kind = "confirmation_run"\nevidence = "confirmation"\nmin_points = 5.0\n')
    records = strong_records()
    suite = write_suite(tmp_path / "suite", records, "2026-10-01T00:00:00Z")
    run = bind(write_run(tmp_path / "run", records), suite)
    confirmation = bind(write_run(tmp_path / "confirmation", strong_records(gain=9)), suite)
    assert main(["gate", str(run), "--policy", str(policy), "--baseline", BASE, "--candidate", CANDIDATE,
                 "--evidence", f"confirmation={confirmation}", "--ledger", str(tmp_path / "l.sqlite")]) == 0
    capsys.readouterr()
    return run / f"gate-confirm-{CANDIDATE}.json"


def verify(capsys: pytest.CaptureFixture[str], path: Path) -> tuple[int, str]:
    code = main(["verify", str(path)])
    return code, capsys.readouterr().out


def uri(verdict: Path, name: str) -> Path:
    [item] = [i for i in json.loads(verdict.read_text())["predicate"]["inputs"] if i["name"] == name]
    return Path(item["uri"])


def test_the_verdict_is_an_in_toto_statement_over_what_it_judged(tmp_path: Path,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    verdict = judged(tmp_path, capsys)
    statement = json.loads(verdict.read_text())
    assert statement["_type"] == STATEMENT_TYPE and statement["predicateType"] == VERDICT_PREDICATE
    assert [s["name"] for s in statement["subject"]] == [CANDIDATE]
    assert [i["name"] for i in statement["predicate"]["inputs"]] == list(INPUTS)
    assert uri(verdict, "results") == (tmp_path / "run" / "results.jsonl").resolve()
    assert uri(verdict, "evidence:confirmation") == (tmp_path / "confirmation" / "results.jsonl").resolve()
    assert uri(verdict, "suite") == (tmp_path / "suite" / "decisions.jsonl").resolve()
    assert read_verdict(verdict).passed
    code, out = verify(capsys, verdict)
    assert code == 0 and out.splitlines()[-1] == f"every digest matches ({len(INPUTS) + 1})"


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(name=st.sampled_from(INPUTS), edit=st.sampled_from(["append", "remove"]))
def test_any_one_input_changed_or_gone_is_named_and_the_subject_with_it(tmp_path_factory: pytest.TempPathFactory,
                                                capsys: pytest.CaptureFixture[str], name: str, edit: str) -> None:
    """The subject is named by the digest of what was judged (the policy aside), so it breaks with any of it."""
    verdict = judged(tmp_path_factory.mktemp("verify"), capsys)
    path = uri(verdict, name)
    if edit == "append":
        with path.open("a") as out:
            out.write("\n")
    else:
        path.unlink()
    code, out = verify(capsys, verdict)
    label = "CHANGED" if edit == "append" else "GONE"
    broken = [line.split()[1] for line in out.splitlines()[1:-1] if not line.strip().startswith("ok")]
    assert code == 1 and broken == [name] + ([] if name == "policy" else ["subject"]), out
    assert f"{label:<8}{name}  {path}" in out


def test_a_copied_run_directory_verifies_only_where_it_was_judged(tmp_path: Path,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    """The statement names absolute paths: a verdict moved away from its inputs says what it no longer sees."""
    verdict = judged(tmp_path / "a", capsys)
    shutil.move(tmp_path / "a" / "run", tmp_path / "moved")
    code, out = verify(capsys, tmp_path / "moved" / verdict.name)
    assert code == 1 and "GONE    results" in out


@pytest.mark.parametrize("content", [b"{not json", b"[]", b'{"policy": "x"}',
                                     json.dumps({"_type": STATEMENT_TYPE, "subject": [{"name": "c", "digest": {
                                         "sha256": "0"}}], "predicateType": "other", "predicate": {}}).encode()])
def test_what_is_not_a_verdict_is_one_error_line(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                 content: bytes) -> None:
    path = tmp_path / "gate-x.json"
    path.write_bytes(content)
    assert main(["verify", str(path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: ") and str(path) in err[0]
    assert main(["verify", str(tmp_path / "absent.json")]) == 2
    assert "absent.json" in capsys.readouterr().err


def test_the_statement_lists_every_rule_the_judged_arms_carried(tmp_path: Path,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    """Issue 66: the verdict names what a later dispute would reach, not only what was disputed when it was
    reached."""
    verdict = judged(tmp_path, capsys)
    run = verdict.parent
    records = [r.model_copy(update={"injected_rule_ids": ["lc:b", "lc:a"] if r.arm == CANDIDATE else
                                    ["lc:a"]}) for r in load_results(run)]
    write_sealed(run, records)
    write_verdict(run, read_verdict(verdict))
    assert json.loads(verdict.read_text())["predicate"]["rule_ids"] == ["lc:a", "lc:b"]
