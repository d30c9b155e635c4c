"""The sandbox runner's run directory: one writer at a time, and one result per (arm, scenario)."""

from __future__ import annotations

import argparse
import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings

from replay.cli.sandbox import _evidence, _score
from replay.run.directory import RunError, run_lock
from replay.run.endpoint import Outcome
from replay.run.run_config import RunConfig
from replay.sandbox import runner
from replay.sandbox.pack import load_pack, oracle_end_state
from replay.sandbox.runner import EpisodeItem, load_sandbox_results, run_sandbox
from replay.sandbox.scenario import Scenario
from tests.replay.sandbox.shop import SHOP, scenario
from tests.replay.sandbox.test_gate_evidence import results
from tests.replay.sandbox.test_pack import write
from tests.support.fault_upstream import BASE, FaultUpstream
from tests.support.hostile import hostile_bytes
from tests.support.runs import seal


def config(url: str) -> RunConfig:
    return RunConfig.model_validate({"endpoint": {"base_url": url},
                                     "arms": [{"name": "a", "model": BASE}, {"name": "b", "model": BASE}]})


def test_a_second_sandbox_run_into_the_same_directory_is_refused(tmp_path: Path) -> None:
    pack = load_pack(write(tmp_path / "pack", [scenario()]))
    run_dir = tmp_path / "run"
    with FaultUpstream() as upstream:
        with run_lock(run_dir), pytest.raises(RunError, match="another worker-replay run"):
            run_sandbox(pack, config(f"{upstream.url}/v1"), run_dir)
        assert not (run_dir / "results.jsonl").exists() and not (run_dir / "run.json").exists()
        assert run_sandbox(pack, config(f"{upstream.url}/v1"), run_dir) == (2, 0)  # released: it runs
        assert run_sandbox(pack, config(f"{upstream.url}/v1"), run_dir) == (0, 2)  # and resumes with nothing left


def test_duplicate_results_are_refused_by_score_and_evidence(tmp_path: Path) -> None:
    pack = load_pack(write(tmp_path / "pack", [scenario()]))
    run_dir = tmp_path / "run"
    with FaultUpstream() as upstream:
        run_sandbox(pack, config(f"{upstream.url}/v1"), run_dir)
    results = run_dir / "results.jsonl"
    lines = results.read_text().splitlines()
    results.write_text("\n".join([*lines, lines[0]]) + "\n")  # what two concurrent runs would leave
    with pytest.raises(RunError, match="changed after its run sealed it"):
        load_sandbox_results(run_dir)
    seal(run_dir)  # sealed as it stands: the reader's own duplicate check is what refuses it
    with pytest.raises(RunError, match=r"results.jsonl:3: .*arm 'a'.*first at line 1"):
        load_sandbox_results(run_dir)
    for action in (_score, _evidence):
        with pytest.raises(RunError, match="second result"):
            action(argparse.Namespace(run_dir=run_dir, baseline="a", candidate="b", out=tmp_path / "ev"))
    assert json.loads(lines[0])["arm"] == "a"


def test_text_calls_are_typed_by_the_tools_the_episode_offers(monkeypatch: pytest.MonkeyPatch) -> None:
    """The episode's parser gets the offered schemas, as vLLM has them: `42` for a string
    parameter stays the text "42" (without them it became the integer 42, which the world refused)."""
    text = ("<tool_call>\n<function=message>\n<parameter=to>\n42\n</parameter>\n<parameter=body>\n7\n</parameter>\n"
            "</function>\n</tool_call>")
    answers = iter([text, "Sent."])

    async def send_chat(*_: Any) -> Outcome:
        return Outcome({"choices": [{"message": {"role": "assistant", "content": next(answers)}}]}, None, 1, 0.0)

    monkeypatch.setattr(runner, "send_chat", send_chat)
    scn = Scenario.model_validate(scenario())
    item = EpisodeItem(config("http://127.0.0.1:9/v1").arms[0], scn, scn.messages, ())
    result = asyncio.run(runner.run_episode(None, "", config("http://127.0.0.1:9/v1"), item, SHOP,  # type: ignore[arg-type]
                                            oracle_end_state(SHOP, scn), "engine"))
    assert [(e.tool, e.ok) for e in result.trajectory.ledger] == [("message", True)]
    assert json.loads(result.trajectory.ledger[0].arguments) == {"to": "42", "body": "7"}


LINE = results()[0].model_dump_json().encode()


def test_a_stored_call_whose_arguments_are_not_json_is_refused_when_read(tmp_path: Path) -> None:
    """`sandbox score` re-scores stored trajectories: a tampered ledger is refused with file:line,
    never a JSONDecodeError or RecursionError out of the measures."""
    for arguments in ("{not json", "[" * 5000 + "]" * 5000):
        bad = json.loads(LINE)
        bad["trajectory"]["ledger"][0]["arguments"] = arguments
        (tmp_path / "results.jsonl").write_text(LINE.decode() + "\n" + json.dumps(bad) + "\n")
        seal(tmp_path)
        with pytest.raises(RunError, match=r"results\.jsonl:2: not a sandbox result: field trajectory\.ledger\.0\.arg"):
            load_sandbox_results(tmp_path)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=hostile_bytes([LINE]))
def test_any_bytes_are_results_or_one_error_with_file_and_line(tmp_path: Path, data: bytes) -> None:
    (tmp_path / "results.jsonl").write_bytes(data)
    seal(tmp_path)
    try:
        load_sandbox_results(tmp_path)
    except RunError as exc:
        assert str(exc).startswith(str(tmp_path / "results.jsonl"))
