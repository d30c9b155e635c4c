"""`worker-demo loop` end to end on the session's engine: Claude Code's own session files with real failures,
their correction executed in the sandbox (by the planted explorer, labelled so), curated, trained, registered,
replayed on the held-out session and judged, then merged, quantised, replayed again on two quantised engines and
judged by quantisation_survives; every artefact where the screen says, the screen short."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from core.curated import MANIFEST_JSON, PROVENANCE_JSONL, read_curated
from demo.loop import EXPLORER, ROUTE, STAGE, run_loop
from replay.analysis.gates import read_verdict
from replay.run.directory import load_results
from replay.sandbox.runner import load_sandbox_results
from replay.suite import load_suite
from serve.engine.train import MARKER

pytestmark = pytest.mark.engine


def test_the_loop_closes_from_a_recorded_failure_to_a_verdict(engine, tmp_path: Path,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "loop"
    assert run_loop(out, tmp_path / "ledger.sqlite", engine_url=engine.base_url) == 0
    captured = capsys.readouterr()
    screen = [line for line in (captured.out + captured.err).splitlines() if line.strip()]
    assert len(screen) <= 25, "\n".join(screen)

    held = load_suite(out / "held-out-suite")
    assert held.frozen and held.decisions and {d.session for d in held.decisions} == {held.decisions[0].session}
    episodes = load_sandbox_results(out / "sandbox")
    assert episodes and all(e.model == EXPLORER and e.scores.task_completed for e in episodes)
    assert all(e.trajectory.ledger[0].ok and json.loads(e.trajectory.ledger[0].arguments) == {"id": "INV-8"}
               for e in episodes), "the correction ran in the world and the world accepted it"

    manifest, _, rows = read_curated(out / "set")
    provenance = [json.loads(line) for line in (out / "set" / PROVENANCE_JSONL).read_text().splitlines()]
    assert manifest.classes["recovery"].got == len(rows) >= 1
    assert {(p["mix_class"], p["proof"]["kind"], p["origin_model"]) for p in provenance} == {
        ("recovery", "executed", EXPLORER)}
    assert all(p["decision"].split(".")[0] != held.decisions[0].session for p in provenance), "nothing held out"
    assert all(row.messages[-1]["tool_calls"][0]["function"]["arguments"] == '{"id": "INV-8"}' for row in rows)

    [adapter] = (out / "adapters").iterdir()
    assert json.loads((adapter / MARKER).read_text())["data"]["train_sha256"] == manifest.train_sha256
    results = load_results(out / "run")
    assert {r.arm for r in results} == {"base", "cand"} and {r.decision_id for r in results} == {
        d.id for d in held.decisions}
    assert {r.model for r in results} == {"worker", ROUTE}
    verdict = out / "run" / "gate-serious-candidate-cand.json"
    assert read_verdict(verdict).candidate == "cand"
    assert json.loads((out / "set" / MANIFEST_JSON).read_text())["excluded_suites"][0]["path"] == str(
        out / "held-out-suite")

    quantised = load_results(out / f"run-{STAGE}")
    assert {(r.arm, r.model) for r in quantised} == {("base", "worker"), ("cand", "worker")}
    assert {r.decision_id for r in quantised} == {d.id for d in held.decisions}
    [candidate_models] = json.loads((out / f"run-{STAGE}" / "run.json").read_text())["arm_endpoints"].values()
    assert "worker" in candidate_models, "the candidate's quantised build answered on its own engine"
    production = read_verdict(out / "run" / "gate-production-candidate-cand.json")
    statuses = {c.id: c.status.value for c in production.conditions}
    survives = statuses.pop("quantisation-survives")
    positive = any(r.score.joint_correct is not None for r in results)
    assert survives in (("pass", "fail") if positive else ("not_run",)), "judged where the held-out session allows"
    assert set(statuses.values()) == {"not_run"}
    [line] = [line for line in screen if line.startswith("quantisation-survives")]
    assert line.split()[1] == survives.upper() and ("exact repeats" in line or "positive" in line)
    report = (out / "run" / "report.md").read_text()
    assert f"### cand:{STAGE} against cand" in report and f"### base:{STAGE} against base" in report
