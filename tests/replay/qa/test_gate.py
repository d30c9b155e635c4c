"""The `reviewer_agreement` gate condition at its boundaries (labelled runs at the minimum, a Clopper–Pearson
upper bound exactly at the threshold), what it does not judge (not_run), and `worker-replay qa gate`'s
refusals; the shipped policy loads as pre-registered."""

from __future__ import annotations

import hashlib
import math
from pathlib import Path

import pytest

from core.evidence import Disposition, ReviewVerdict
from replay.analysis.gates import Status, load_policy
from replay.analysis.gates.conditions import ReviewerAgreement
from replay.cli import main
from replay.qa.agreement import agreement
from replay.qa.errors import QAError
from replay.qa.gate import evaluate_reviewer_gate
from replay.qa.labels import LabelledRun
from replay.qa.verdicts import ReviewerVerdictLine, gather
from replay.stats import clopper_pearson

ROOT = Path(__file__).resolve().parents[3]
SHIPPED = ROOT / "configs" / "gates" / "reviewer-enforce.toml"


def evidence(tmp_path: Path, fails: int, false_passes: int, passes: int = 0, workspace: str = "ws-a") -> Path:
    """A reviewer `qwen` that passed `false_passes` of `fails` runs people failed and every run they passed."""
    runs = [LabelledRun(workspace=workspace, session=f"s{i}", final_record=f"f{i}",
                        disposition=Disposition.FAIL if i < fails else Disposition.PASS) for i in range(fails + passes)]
    lines = [("t", ReviewerVerdictLine(workspace=workspace, session=r.session, reviewer="qwen",
                                       verdict=ReviewVerdict.PASS if i < false_passes or i >= fails
                                       else ReviewVerdict.FAIL)) for i, r in enumerate(runs)]
    path = tmp_path / "agreement.json"
    path.write_text(agreement(runs, gather(runs, lines)).model_dump_json())
    return path


def policy(tmp_path: Path, min_labelled: int, threshold: float, extra: str = "") -> Path:
    path = tmp_path / "policy.toml"
    path.write_text(f'name = "t"\nversion = "1"\n[[conditions]]\nid = "c"\nkind = "reviewer_agreement"\n'
                    f'description = "d"\nmin_labelled = {min_labelled}\nmax_false_pass_upper = {threshold!r}\n{extra}')
    return path


def status(tmp_path: Path, agreement_file: Path, min_labelled: int, threshold: float, extra: str = "") -> Status:
    verdict = evaluate_reviewer_gate(policy(tmp_path, min_labelled, threshold, extra), agreement_file, "qwen")
    return verdict.conditions[0].status


@pytest.mark.parametrize(("threshold", "expected"), [
    (clopper_pearson(2, 100)[1], Status.PASS),  # an upper bound exactly at the threshold passes
    (math.nextafter(clopper_pearson(2, 100)[1], 0), Status.FAIL),
])
def test_the_upper_bound_at_the_threshold(tmp_path: Path, threshold: float, expected: Status) -> None:
    assert status(tmp_path, evidence(tmp_path, 100, 2), 100, threshold) is expected


@pytest.mark.parametrize(("min_labelled", "expected"), [(150, Status.PASS), (151, Status.NOT_RUN)])
def test_labelled_runs_at_the_minimum(tmp_path: Path, min_labelled: int, expected: Status) -> None:
    assert status(tmp_path, evidence(tmp_path, 100, 0, passes=50), min_labelled, 0.05) is expected


def test_no_run_people_failed_measures_nothing_and_fails(tmp_path: Path) -> None:
    verdict = evaluate_reviewer_gate(policy(tmp_path, 1, 0.5), evidence(tmp_path, 0, 0, passes=300), "qwen")
    [condition] = verdict.conditions
    assert condition.status is Status.FAIL and "false passes none: no run people failed" in condition.reason
    assert condition.evidence["false_pass_ci"] == [0.0, 1.0]


def test_a_workspace_is_judged_on_its_own_figures(tmp_path: Path) -> None:
    path = evidence(tmp_path, 100, 0)
    assert status(tmp_path, path, 100, 0.05, 'workspace = "ws-a"\n') is Status.PASS
    assert status(tmp_path, path, 100, 0.05, 'workspace = "ws-b"\n') is Status.NOT_RUN


def test_the_recomputed_interval_is_judged_not_the_files(tmp_path: Path) -> None:
    """A hand-edited bound in the evidence changes nothing: the counts are what is judged."""
    path = evidence(tmp_path, 100, 9)
    bound = str(clopper_pearson(9, 100)[1])
    assert bound in path.read_text()
    path.write_text(path.read_text().replace(bound, "0.01"))
    assert status(tmp_path, path, 100, 0.05) is Status.FAIL


def test_the_verdict_names_the_policy_bytes_and_the_reviewer(tmp_path: Path) -> None:
    verdict = evaluate_reviewer_gate(SHIPPED, evidence(tmp_path, 100, 0, passes=100), "qwen")
    assert verdict.passed and verdict.candidate == "qwen" and verdict.baseline == "people"
    assert verdict.policy_sha256 == hashlib.sha256(SHIPPED.read_bytes()).hexdigest()


def test_the_shipped_policy_is_one_reviewer_agreement_condition() -> None:
    [condition] = load_policy(SHIPPED).conditions
    assert isinstance(condition, ReviewerAgreement)
    assert (condition.min_labelled, condition.max_false_pass_upper, condition.workspace) == (200, 0.05, None)


def test_a_policy_judging_a_replay_run_or_an_unknown_reviewer_is_refused(tmp_path: Path) -> None:
    path = evidence(tmp_path, 10, 0)
    with pytest.raises(QAError, match="paired-gain, .* judge a replay run, not a reviewer"):
        evaluate_reviewer_gate(ROOT / "configs" / "gates" / "serious-candidate.toml", path, "qwen")
    with pytest.raises(QAError, match=r"no verdicts of reviewer 'large' \(it has: qwen\)"):
        evaluate_reviewer_gate(SHIPPED, path, "large")


def test_qa_gate_errors_are_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "agreement.json"
    bad.write_text('{"runs": 1}')
    assert main(["qa", "gate", "--policy", str(SHIPPED), "--agreement", str(bad), "--reviewer", "qwen"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"error: {bad}: field labelled: Field required") and "\n" not in err
