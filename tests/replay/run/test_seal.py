"""The seal (custody item 1): a finished run's results are sealed in run.json by the one executor, and every
reader refuses results the seal does not vouch for: changed after the run, a run that never finished, no run.json.
A resume only appends to what was sealed. The runs here go through the real executor; the upstream is the named
fault injector, whose answers are beside the point (what is sealed is whatever was written)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from replay.cli import main
from replay.run.decisions import run
from replay.run.directory import RESULTS, RUN_JSON, ResultsError, RunError, load_results, read_run_json, read_seal
from tests.support.fault_upstream import FaultUpstream
from tests.support.runs import config, suite


def finished_run(tmp_path: Path) -> Path:
    run_dir = tmp_path / "run"
    with FaultUpstream() as upstream:
        assert run(suite(tmp_path), config(f"{upstream.url}/v1"), run_dir) == (2, 0)
    return run_dir


def flip_first_answer(run_dir: Path) -> None:
    """What issue 60 did by hand: one answer of the run made correct after the run."""
    path = run_dir / RESULTS
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    rows[0]["score"]["joint_correct"] = not rows[0]["score"].get("joint_correct")
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))


def test_a_finished_run_has_a_run_id_and_a_seal_of_its_results(tmp_path: Path) -> None:
    run_dir = finished_run(tmp_path)
    manifest = read_run_json(run_dir)
    seal = read_seal(run_dir)
    assert len(manifest["run_id"]) == 32 and seal is not None and seal.state == "sealed"
    data = (run_dir / RESULTS).read_bytes()
    assert (seal.bytes, seal.lines) == (len(data), 2)
    assert len(load_results(run_dir)) == 2


def test_results_changed_after_the_run_are_refused_by_compare_report_and_gate(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run_dir = finished_run(tmp_path)
    flip_first_answer(run_dir)
    capsys.readouterr()  # the run's status line
    policy = Path(__file__).resolve().parents[3] / "configs" / "gates" / "serious-candidate.toml"
    for command in (["compare", str(run_dir), "--baseline", "base", "--candidate", "base"],
                    ["report", str(run_dir)],
                    ["gate", str(run_dir), "--policy", str(policy), "--baseline", "base", "--candidate", "base"]):
        assert main(command) == 2, command
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and err[0].startswith(f"error: {run_dir / RESULTS}: changed after its run sealed it")


def test_a_run_that_did_not_finish_is_refused_until_resumed(tmp_path: Path) -> None:
    run_dir = finished_run(tmp_path)
    manifest = read_run_json(run_dir)
    del manifest["seal"]  # as a run killed before its end leaves run.json
    (run_dir / RUN_JSON).write_text(json.dumps(manifest))
    with pytest.raises(ResultsError, match="its run did not finish"):
        load_results(run_dir)
    with FaultUpstream() as upstream:
        assert run(suite(tmp_path), config(f"{upstream.url}/v1"), run_dir) == (0, 2)
    assert len(load_results(run_dir)) == 2 and read_run_json(run_dir)["run_id"] == manifest["run_id"]


def test_results_without_a_run_json_are_refused(tmp_path: Path) -> None:
    run_dir = finished_run(tmp_path)
    (run_dir / RUN_JSON).unlink()
    with pytest.raises(ResultsError, match="no run.json beside it"):
        load_results(run_dir)


def test_a_resume_of_a_changed_run_is_refused_and_writes_nothing(tmp_path: Path) -> None:
    """Else the resume would seal the change."""
    run_dir = finished_run(tmp_path)
    flip_first_answer(run_dir)
    before = {p.name: p.read_bytes() for p in run_dir.iterdir()}
    with FaultUpstream() as upstream, pytest.raises(RunError, match="changed after its run sealed it"):
        run(suite(tmp_path), config(f"{upstream.url}/v1"), run_dir)
    assert {p.name: p.read_bytes() for p in run_dir.iterdir()} == before


def test_a_run_killed_during_a_resume_reads_as_unfinished_and_the_next_resume_seals_it(tmp_path: Path) -> None:
    run_dir = finished_run(tmp_path)
    seal = read_seal(run_dir)
    assert seal is not None
    manifest = read_run_json(run_dir)
    manifest["seal"]["state"] = "open"  # what a resume writes before its first line
    (run_dir / RUN_JSON).write_text(json.dumps(manifest))
    with (run_dir / RESULTS).open("a") as out:  # and the torn line it leaves when killed
        out.write('{"arm": "base", "decision_id": "d-3"')
    with pytest.raises(ResultsError, match="its run did not finish"):
        load_results(run_dir)
    with FaultUpstream() as upstream:
        run(suite(tmp_path), config(f"{upstream.url}/v1"), run_dir)
    resealed = read_seal(run_dir)
    assert resealed is not None and resealed.state == "sealed" and resealed.bytes == seal.bytes
    assert len(load_results(run_dir)) == 2


@pytest.fixture(scope="module")
def sealed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return finished_run(tmp_path_factory.mktemp("sealed"))


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_any_change_to_sealed_results_is_refused(sealed: Path, data: st.DataObject) -> None:
    """Not only the flipped answer: any byte changed, cut or added."""
    original = (sealed / RESULTS).read_bytes()
    at = data.draw(st.integers(0, len(original) - 1))
    edit = data.draw(st.sampled_from(["change", "cut", "add"]))
    byte = data.draw(st.integers(0, 255).filter(lambda b: b != original[at]))
    changed = {"change": original[:at] + bytes([byte]) + original[at + 1:], "cut": original[:at],
               "add": original + bytes([byte])}[edit]
    (sealed / RESULTS).write_bytes(changed)
    try:
        with pytest.raises(ResultsError, match="changed after its run sealed it"):
            load_results(sealed)
    finally:
        (sealed / RESULTS).write_bytes(original)
