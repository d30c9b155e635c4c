"""`worker-replay sandbox` on hostile input: a `--pair` without a colon, a run directory whose
run.json is not JSON or not an object of the right shape — one `error:` line, exit 2."""

from __future__ import annotations

from pathlib import Path

import pytest

from replay.cli import main
from tests.replay.sandbox.test_gate_evidence import results
from tests.support.fault_upstream import FaultUpstream
from tests.support.runs import write_sealed


def run_dir(tmp_path: Path, run_json: bytes | None) -> Path:
    out = tmp_path / "run"
    out.mkdir()
    write_sealed(out, results())
    if run_json is not None:
        (out / "run.json").write_bytes(run_json)
    return out


def one_error_line(capsys: pytest.CaptureFixture[str], *needles: str) -> str:
    err = capsys.readouterr().err.strip().splitlines()
    assert err and err[0].startswith("error: "), err
    assert all(line.startswith("  ") for line in err[1:]), err  # indented detail lines may follow
    assert all(n in err[0] for n in needles), (needles, err)
    return err[0]


@pytest.mark.parametrize("pair", ["base", "base:", ":cand", ""])
@pytest.mark.parametrize("command", [["sandbox", "report"], ["report"]])
def test_a_pair_without_two_arms_is_a_usage_error(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                  pair: str, command: list[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        main([*command, str(run_dir(tmp_path, None)), "--pair", pair])
    err = capsys.readouterr().err
    assert exit_.value.code == 2 and "expected BASELINE:CANDIDATE" in err and "Traceback" not in err


CORRUPT = [b"{not json", b"\xff\xfe{}", b"[]", b'{"pack": []}', b'{"pack": {"path": 7}}',
           b'{"config": {"arms": [{"model": "x"}]}}', b'{"suite": "x"}']


@pytest.mark.parametrize("content", CORRUPT)
@pytest.mark.parametrize("command", [["sandbox", "score"], ["sandbox", "report"], ["report"]])
def test_a_corrupt_run_json_is_one_error_line(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                              content: bytes, command: list[str]) -> None:
    assert main([*command, str(run_dir(tmp_path, content))]) == 2
    one_error_line(capsys, "run.json")


@pytest.mark.parametrize("content", CORRUPT)
def test_sandbox_run_into_a_directory_with_a_corrupt_run_json_is_one_error_line(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], content: bytes) -> None:
    from demo.scenario_pack import write_pack

    pack = write_pack(tmp_path / "pack", seed=0, per_family=1)
    out = run_dir(tmp_path, content)
    with FaultUpstream() as fault:  # serves the arm's model, so the run gets as far as the run directory
        config = tmp_path / "run.toml"
        config.write_text(f'[endpoint]\nbase_url = "{fault.url}/v1"\n'
                          '[[arms]]\nname = "base"\nmodel = "worker-base"\n')
        status = main(["sandbox", "run", "--pack", str(pack), "--config", str(config), "--out", str(out)])
    assert status == 2
    one_error_line(capsys, str(out))
