"""Which version served each result, and an arm served by more than one (issue 14 item 6).

The fault injector (tests/support/fault_upstream.py) plays a route whose resolution changes
under a resumed run: the fault this guards against.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from core.records import Decision, ResultRecord
from replay.analysis.compare import compare, compare_run
from replay.run.decisions import plan
from replay.run.directory import ResultsError
from replay.run.run_config import RunConfig
from replay.suite import Suite, SuiteManifest
from tests.support.e13 import BASE, positive_record
from tests.support.fault_upstream import BASE as SERVED_BASE
from tests.support.fault_upstream import FaultUpstream
from tests.support.runs import send, write_sealed

TOOLS = [{"type": "function", "function": {"name": "list_invoices", "parameters": {"type": "object", "properties": {}}}}]


def suite(tmp_path: Path, n: int) -> Suite:
    decisions = tuple(Decision.model_validate({
        "id": f"d-{i}", "stratum": "verified_action", "cluster": "c", "workspace": "ws-a", "session": f"s-{i}",
        "captured_at": "2026-07-01T10:00:00Z",
        "request": {"messages": [{"role": "user", "content": f"task {i}"}], "tools": TOOLS, "tool_choice": "auto"},
        "target": {"tool": "list_invoices", "arg_keys": []},
    }) for i in range(n))
    return Suite(tmp_path / "suite", SuiteManifest(name="t", version="1", created="2026-08-01T00:00:00Z"),
                 decisions, "0" * 64)


def test_each_result_records_the_version_that_served_it(tmp_path: Path) -> None:
    with FaultUpstream() as fault:
        cfg = RunConfig.model_validate({"endpoint": {"base_url": f"{fault.url}/v1", "timeout_s": 10},
                                        "runner": {"retries": 0, "concurrency": 1},
                                        "arms": [{"name": "cand", "model": SERVED_BASE}]})
        results = tmp_path / "results.jsonl"
        fault.served_by[SERVED_BASE] = "recovery-v1"
        send(plan(suite(tmp_path, 4), cfg, set())[:2], cfg, results)
        fault.served_by[SERVED_BASE] = "recovery-v2"  # the route moved on between two sessions of the run
        send(plan(suite(tmp_path, 4), cfg, {("cand", "d-0"), ("cand", "d-1")}), cfg, results)
    rows = [json.loads(line) for line in results.read_text().splitlines()]
    assert sorted(r["served_by"] for r in rows) == ["recovery-v1", "recovery-v1", "recovery-v2", "recovery-v2"]


def record(arm: str, i: int, served_by: str | None) -> ResultRecord:
    return positive_record(arm, "verified_action", f"d{i}", i, True, True).model_copy(update={"served_by": served_by})


def test_an_arm_served_by_more_than_one_version_is_refused_naming_them() -> None:
    records = [record(BASE, i, None) for i in range(5)]
    records += [record("cand", i, "recovery-v1" if i < 3 else "recovery-v2") for i in range(5)]
    with pytest.raises(ResultsError, match=r"arm 'cand'.*recovery-v1 \(3\).*recovery-v2 \(2\)"):
        compare(records, BASE, "cand")


def test_one_version_per_arm_compares(tmp_path: Path) -> None:
    records = [record(BASE, i, "worker-base") for i in range(5)] + [record("cand", i, "recovery-v1") for i in range(5)]
    assert compare(records, BASE, "cand").decisions == 5
    run = tmp_path / "run"
    run.mkdir()
    write_sealed(run, records)
    assert compare_run(run, BASE, "cand").decisions == 5

