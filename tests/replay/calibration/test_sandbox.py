"""`calibrate --pack`: the sandbox conditions' pass rates against closed forms, and the episodes end to end."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from replay.calibration.calibrate import CALIBRATION_JSON, CALIBRATION_TXT, calibrate
from replay.calibration.planted import request_key
from replay.calibration.sandbox import SandboxSimulator, calibrate_pack
from replay.calibration.spec import CalibrationError, CalibrationSpec
from replay.cli import main
from replay.sandbox.pack import Pack
from replay.stats import wilson_interval
from replay.suite import Suite

POLICY = Path(__file__).resolve().parents[3] / "configs" / "gates" / "serious-candidate.toml"


def _quiet(what: str, done: int, total: int) -> None:
    pass


def _spec(**fields: Any) -> CalibrationSpec:
    base = {"seed": 5, "arms": [{"model": "b", "right": 0.5}], "end_to_end": 0,
            "pack_arms": [{"model": "b", "complete": 0.6}, {"model": "same", "complete": 0.6},
                          {"model": "bad", "complete": 0.6, "critical": 0.4}],
            "pack": {"policy": str(POLICY), "baseline": "b", "candidates": ["same", "bad"]}}
    return CalibrationSpec.model_validate({**base, **fields})


def _sum_of_groups(sizes: list[int], p: float) -> dict[int, float]:
    """The distribution of Σ size_g · Bernoulli(p) over independent groups."""
    dist = {0: 1.0}
    for size in sizes:
        step: dict[int, float] = {}
        for total, q in dist.items():
            step[total] = step.get(total, 0.0) + q * (1 - p)
            step[total + size] = step.get(total + size, 0.0) + q * p
        dist = step
    return dist


def test_completion_pass_rate_matches_the_closed_form(demo_pack: Pack, tmp_path: Path) -> None:
    # Both arms complete each request with probability 0.6 and do nothing else, independently per request
    # (scenarios that send the same request are one draw): completion passes iff the candidate completes
    # at least as many, P(X ≥ Y) for X, Y iid sums over the request groups. Nothing is claimed, so
    # unsupported completion always passes.
    spec = _spec()
    report = calibrate_pack(spec, SandboxSimulator(spec, demo_pack), 300, _quiet, tmp_path)
    groups: dict[str, int] = {}
    for s in demo_pack.scenarios:
        groups[request_key(s.messages)] = groups.get(request_key(s.messages), 0) + 1
    dist = _sum_of_groups(list(groups.values()), 0.6)
    closed = sum(px * py for x, px in dist.items() for y, py in dist.items() if x >= y)
    same = next(c for c in report.candidates if c.candidate == "same")
    low, high = wilson_interval(same.passed["isolated-replay-completion"].hits, 300, confidence=0.999)
    assert low <= closed <= high, (same.passed, closed)
    assert same.passed["unsupported-completion"].hits == 300 and same.passed["critical-failures"].hits == 300
    null = {c.id: c for c in report.conditions}
    assert null["isolated-replay-completion"].null_candidate == "same" and null["isolated-replay-completion"].alpha is None
    # The planted truth is exact: a critical act on 40% of episodes, on the scenarios that have one to trip.
    bad = next(c for c in report.candidates if c.candidate == "bad")
    share = report.critical_possible / report.scenarios
    assert bad.effect_points["critical_failure"] == pytest.approx(100 * 0.4 * share)
    assert bad.passed["critical-failures"].hits < 5  # ≈ 10 critical acts a replicate: almost never none new


def test_calibrate_pack_end_to_end_through_the_sandbox_runner(demo_suite: Suite, demo_pack: Pack,
                                                              tmp_path: Path) -> None:
    spec = _spec(end_to_end=1, pack_arms=[{"model": "b", "complete": 0.5, "claim": 0.2, "critical": 0.2},
                                          {"model": "same", "complete": 0.5, "claim": 0.2, "critical": 0.2},
                                          {"model": "bad", "complete": 0.2, "claim": 0.4, "critical": 0.3}])
    cal = calibrate(demo_suite, spec, tmp_path / "out", progress=_quiet, replicates=10, pack=demo_pack)
    (e2e,) = cal.end_to_end
    assert e2e.run_dir == "" and e2e.episodes == 3 * len(demo_pack.scenarios) == e2e.episodes_agree
    assert set(e2e.pack_gate_passed) == {"same", "bad"}
    assert cal.sandbox is not None and cal.gate is None and cal.pack == "demo-sandbox@1"
    written = json.loads((tmp_path / "out" / CALIBRATION_JSON).read_text())
    assert written["label"] == "planted" and written["sandbox"]["replicates"] == 10
    assert "Sandbox conditions of serious-candidate" in (tmp_path / "out" / CALIBRATION_TXT).read_text()


def test_a_pack_without_a_pack_section_is_refused(demo_suite: Suite, demo_pack: Pack, tmp_path: Path) -> None:
    spec = _spec(pack=None)
    with pytest.raises(CalibrationError, match="no \\[pack\\]"):
        calibrate(demo_suite, spec, tmp_path / "out", progress=_quiet, replicates=1, pack=demo_pack)
    with pytest.raises(CalibrationError, match="calibrates nothing"):
        calibrate(demo_suite, spec, tmp_path / "out2", progress=_quiet, replicates=1)


def test_cli_refuses_a_missing_pack_with_one_error_line(demo_dirs: tuple[Path, Path], tmp_path: Path,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    spec = tmp_path / "cal.toml"
    spec.write_text(f'[[arms]]\nmodel = "b"\nright = 0.5\n[[pack_arms]]\nmodel = "b"\ncomplete = 0.5\n'
                    f'[pack]\npolicy = "{POLICY}"\nbaseline = "b"\ncandidates = ["b"]\n', encoding="utf-8")
    code = main(["calibrate", "--suite", str(demo_dirs[0]), "--pack", str(tmp_path / "nowhere"), "--spec", str(spec),
                 "--out", str(tmp_path / "out")])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and err[0].startswith("error:") and "nowhere" in err[0]


@pytest.mark.parametrize("extra", ['[[pack_arms]]\nmodel = "b"\ncomplete = 0.9\nclaim = 0.2\n',
                                   '[pack]\npolicy = "p.toml"\nbaseline = "b"\ncandidates = ["nobody"]\n'])
def test_spec_refuses_impossible_pack_arms_and_unplanted_models(tmp_path: Path, extra: str) -> None:
    from core.tomlfile import ConfigError
    from replay.calibration.spec import load_spec

    path = tmp_path / "cal.toml"
    path.write_text(f'[[arms]]\nmodel = "b"\nright = 0.5\n{extra}', encoding="utf-8")
    with pytest.raises(ConfigError, match="cal.toml"):
        load_spec(path)
