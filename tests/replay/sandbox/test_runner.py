"""Reading a sandbox run's results back: any bytes are results or one `RunError` naming file and line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings

from replay.runner import RunError
from replay.sandbox.runner import load_sandbox_results
from tests.replay.sandbox.test_evidence import results
from tests.support.hostile import hostile_bytes

LINE = results()[0].model_dump_json().encode()


def test_a_stored_call_whose_arguments_are_not_json_is_refused_when_read(tmp_path: Path) -> None:
    """`sandbox score` re-scores stored trajectories: a tampered ledger is refused with file:line,
    never a JSONDecodeError or RecursionError out of the measures."""
    for arguments in ("{not json", "[" * 5000 + "]" * 5000):
        bad = json.loads(LINE)
        bad["trajectory"]["ledger"][0]["arguments"] = arguments
        (tmp_path / "results.jsonl").write_text(LINE.decode() + "\n" + json.dumps(bad) + "\n")
        with pytest.raises(RunError, match=r"results\.jsonl:2: not a sandbox result: field trajectory\.ledger\.0\.arg"):
            load_sandbox_results(tmp_path)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=hostile_bytes([LINE]))
def test_any_bytes_are_results_or_one_error_with_file_and_line(tmp_path: Path, data: bytes) -> None:
    (tmp_path / "results.jsonl").write_bytes(data)
    try:
        load_sandbox_results(tmp_path)
    except RunError as exc:
        assert str(exc).startswith(str(tmp_path / "results.jsonl"))
