"""`worker-replay calibrate`: Monte-Carlo rates against closed forms, and the plumbing end to end."""

from __future__ import annotations

import json
from math import comb
from pathlib import Path
from typing import Any

import pytest

from core.tomlfile import ConfigError
from replay.calibration.calibrate import CALIBRATION_JSON, CALIBRATION_TXT, POWER_SVG, calibrate
from replay.calibration.lesson import calibrate_lesson
from replay.calibration.planted_gates import calibrate_gate
from replay.calibration.report import targets
from replay.calibration.results import LessonReport, Rate, RuleRates, UptakeRates
from replay.calibration.simulate import Simulator
from replay.calibration.spec import CalibrationError, CalibrationSpec, load_spec, with_pilot_noise
from replay.cli import main
from replay.stats import power_at, wilson_interval
from replay.suite import Suite
from tests.support.e13 import e13_results, with_replicate

ALPHA = 0.05
REPLICATES = 300
# A gate of one condition that is exactly the sign test: reject at α in the candidate's favour.
SIGN_TEST_POLICY = f"""name = "sign-test"
version = "1"
description = "the paired sign test alone"
[[conditions]]
id = "sign"
kind = "paired_gain"
description = "sign test at α"
min_points = 0.0
max_p = {ALPHA}
"""


def _quiet(what: str, done: int, total: int) -> None:
    pass


def _spec(tmp_path: Path, **fields: Any) -> CalibrationSpec:
    policy = tmp_path / "sign.toml"
    policy.write_text(SIGN_TEST_POLICY, encoding="utf-8")
    base = {"seed": 11, "arms": [{"model": "b", "right": 0.6}, {"model": "same", "right": 0.6},
                                 {"model": "better", "right": 0.8}],
            "gate": {"policy": str(policy), "baseline": "b", "candidates": ["same", "better"]}}
    return CalibrationSpec.model_validate({**base, **fields})


def _brute_force_power(n: int, pb: float, pc: float, alpha: float) -> float:
    """P(the two-sided exact sign test rejects at α with more wins than losses), summed over every
    (wins, losses) of n independent decisions: an independent computation of power.py's figure."""
    win, loss = pc * (1 - pb), pb * (1 - pc)
    tie = 1 - win - loss
    total = 0.0
    for w in range(n + 1):
        for lo in range(n - w + 1):
            if w <= lo:
                continue
            pairs = w + lo
            p = min(1.0, 2 * sum(comb(pairs, k) for k in range(lo + 1)) / 2 ** pairs)
            if p <= alpha:
                total += comb(n, w) * comb(n - w, lo) * win ** w * loss ** lo * tie ** (n - w - lo)
    return total


def _within(hits: int, n: int, expected: float) -> bool:
    low, high = wilson_interval(hits, n, confidence=0.999)
    return low <= expected <= high


def test_gate_rates_match_the_sign_tests_closed_form(demo_suite: Suite, tmp_path: Path) -> None:
    spec = _spec(tmp_path)
    report = calibrate_gate(spec, Simulator(spec, demo_suite), REPLICATES, _quiet)
    positives = sum(d.stratum not in ("training_sanity", "known_failure") for d in demo_suite.decisions)
    for candidate, pc in (("same", 0.6), ("better", 0.8)):
        pb = 0.6
        d = pb * (1 - pc) + pc * (1 - pb)
        closed = power_at(positives, d, pc * (1 - pb) / d, ALPHA)
        assert closed == pytest.approx(_brute_force_power(positives, pb, pc, ALPHA), abs=1e-9)
        rate = next(c for c in report.candidates if c.candidate == candidate).passed["sign"]
        assert _within(rate.hits, rate.n, closed), (candidate, rate, closed)
    null, joint = report.conditions
    assert null.null_candidate == "same" and null.alpha == ALPHA and null.within_alpha
    assert joint.id == "all-judged" and joint.false_pass == null.false_pass and joint.alpha == ALPHA


def test_causal_eviction_rate_matches_the_binomial_tail(demo_suite: Suite, demo_dirs: tuple[Path, Path],
                                                         tmp_path: Path) -> None:
    # Own answers stable across memory (sensitivity 0) and never a repeat: the only discordance is the
    # rule, followed with probability f, repeating the rejected call. That turns a right own answer
    # wrong on the 8 ws-support recoveries (losses ~ Binomial(8, f·right)) and, since the lesson gate
    # counts known failures too, an acceptable one unacceptable on each of the 4 known failures
    # (losses ~ Binomial(4, f)). The causal gate evicts iff the losses L ≥ 6 (0/L: p = 2·0.5^L < 0.05).
    right, uptakes = 0.7, (0.5, 0.9)
    spec = _spec(tmp_path, prompt_sensitivity=0.0, memory=str(demo_dirs[1]), gate=None,
                 arms=[{"model": "b", "right": right}],
                 rules=[{"id": "lc:helpdesk-api-flaky", "follow": 0.9, "does": "repeat",
                         "strata": ["verified_recovery", "known_failure"]}],
                 lesson={"model": "b", "workspace": "ws-support", "rule": "lc:helpdesk-api-flaky",
                         "uptakes": list(uptakes)})
    ws = [d for d in demo_suite.decisions if d.workspace == "ws-support"]
    m, k = (sum(d.stratum == s for d in ws) for s in ("verified_recovery", "known_failure"))
    assert (m, k) == (8, 4)
    report = calibrate_lesson(spec, Simulator(spec, demo_suite), 200, _quiet)
    for uptake, rates in zip(uptakes, report.uptakes, strict=True):
        tail = sum(_binomial(m, uptake * right, a) * _binomial(k, uptake, b)
                   for a in range(m + 1) for b in range(k + 1) if a + b >= 6)
        by_rule = {r.rule_id: r for r in rates.rules}
        harmful = by_rule.pop("lc:helpdesk-api-flaky")
        assert _within(harmful.causal.hits, harmful.causal.n, tail), (uptake, harmful.causal, tail)
        # The other rules have no effect: both arms of their ablation carry the swept rule, whose follow
        # draws differ between the two prompts, so their discordance is symmetric and evicts at most at α.
        assert all(r.causal.low <= ALPHA for r in by_rule.values())


def _binomial(n: int, p: float, k: int) -> float:
    return comb(n, k) * p ** k * (1 - p) ** (n - k)


def test_calibrate_end_to_end_through_the_runner(demo_suite: Suite, demo_dirs: tuple[Path, Path],
                                                 tmp_path: Path) -> None:
    spec = _spec(tmp_path, end_to_end=1, memory=str(demo_dirs[1]),
                 rules=[{"id": "lc:helpdesk-api-flaky", "follow": 0.9, "does": "repeat",
                         "strata": ["verified_recovery"]}],
                 lesson={"model": "b", "workspace": "ws-support", "rule": "lc:helpdesk-api-flaky",
                         "uptakes": [0.0, 0.9]})
    cal = calibrate(demo_suite, spec, tmp_path / "out", progress=_quiet, replicates=20)
    (e2e,) = cal.end_to_end
    assert e2e.rows > 0 and e2e.agree_with_simulation == e2e.rows
    assert set(e2e.gate_passed) == {"same", "better"}
    written = json.loads((tmp_path / "out" / CALIBRATION_JSON).read_text())
    assert written["label"] == "planted" and written["gate"]["replicates"] == 20
    assert "Targets (DESIGN §10)" in (tmp_path / "out" / CALIBRATION_TXT).read_text()
    assert (tmp_path / "out" / POWER_SVG).read_text().startswith("<svg")


def test_cli_refuses_a_bad_spec_with_one_error_line(demo_dirs: tuple[Path, Path], tmp_path: Path,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    spec = tmp_path / "cal.toml"
    spec.write_text('[[arms]]\nmodel = "b"\nright = 2\n', encoding="utf-8")
    assert main(["calibrate", "--suite", str(demo_dirs[0]), "--spec", str(spec), "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) >= 1 and err[0].startswith("error:")


def test_calibrate_refuses_an_out_that_holds_a_calibration(demo_suite: Suite, tmp_path: Path) -> None:
    # Its end-to-end runs would be resumed, not re-sent: answers of another planted spec reported as this one's.
    spec = _spec(tmp_path, end_to_end=1)
    calibrate(demo_suite, spec, tmp_path / "out", progress=_quiet, replicates=2)
    before = (tmp_path / "out" / CALIBRATION_JSON).read_text()
    with pytest.raises(CalibrationError, match="already holds a calibration"):
        calibrate(demo_suite, spec, tmp_path / "out", progress=_quiet, replicates=2)
    assert (tmp_path / "out" / CALIBRATION_JSON).read_text() == before


def test_targets_judge_each_rate_by_its_interval() -> None:
    def rules(harmful: int, genuine: int, neutral: int) -> list[RuleRates]:
        return [RuleRates(rule_id=f"lc:{role}", role=role, causal=Rate.of(hits, 400), leave_one_out=Rate.of(0, 400))
                for role, hits in (("harmful", harmful), ("genuine", genuine), ("neutral", neutral))]

    def judged(harmful: int, genuine: int, neutral: int) -> list[bool | None]:
        lesson = LessonReport(workspace="ws", rule="lc:harmful", alpha=0.05, replicates=400,
                              uptakes=[UptakeRates(uptake=0.9, rules=rules(harmful, genuine, neutral))])
        return [t.met for t in targets(None, lesson)]

    # genuine ≤ 5%, no-effect ≤ α, harmful ≥ 80%: each judged by whether the Wilson interval reaches the bound
    assert judged(harmful=330, genuine=20, neutral=20) == [True, True, True]
    assert judged(harmful=300, genuine=40, neutral=40) == [False, False, False]


@pytest.mark.parametrize("extra", ['[gate]\npolicy = "p.toml"\nbaseline = "b"\ncandidates = ["b"]\ncandidate = "typo"\n',
                                   '[gate]\npolicy = "p.toml"\nbaseline = "b"\ncandidates = ["nobody"]\n',
                                   '[lesson]\nmodel = "b"\nworkspace = "ws"\nrule = "lc:x"\nuptakes = [1.5]\n'])
def test_spec_refuses_typos_and_unplanted_models(tmp_path: Path, extra: str) -> None:
    path = tmp_path / "cal.toml"
    path.write_text(f'[[arms]]\nmodel = "b"\nright = 0.5\n{extra}', encoding="utf-8")
    with pytest.raises(ConfigError, match="cal.toml"):
        load_spec(path)


def test_calibrate_with_noise_sets_each_rate_beside_the_exact_one(demo_suite: Suite, demo_dirs: tuple[Path, Path],
                                                                   tmp_path: Path) -> None:
    """Noise redraws answers at the planted rates. The gate's planted arms draw independently, so their
    power is the closed form's with or without it; the lesson gate's arms share the model's own answer
    (prompt sensitivity 0), so the noise adds discordant pairs to the ablation pair, both ways alike,
    and the harmful rule is evicted less often than on exact answers."""
    spec = _spec(tmp_path, noise=0.5, prompt_sensitivity=0.0, memory=str(demo_dirs[1]), end_to_end=0,
                 rules=[{"id": "lc:helpdesk-api-flaky", "follow": 0.9, "does": "repeat",
                         "strata": ["verified_recovery", "known_failure"]}],
                 lesson={"model": "b", "workspace": "ws-support", "rule": "lc:helpdesk-api-flaky", "uptakes": [0.9]})
    cal = calibrate(demo_suite, spec, tmp_path / "out", progress=_quiet, replicates=REPLICATES)
    assert cal.noise == 0.5 and cal.gate_noiseless is not None and cal.lesson_noiseless is not None
    positives = sum(d.stratum not in ("training_sanity", "known_failure") for d in demo_suite.decisions)
    d = 0.6 * 0.2 + 0.8 * 0.4
    closed = power_at(positives, d, 0.8 * 0.4 / d, ALPHA)
    for report in (cal.gate, cal.gate_noiseless):
        assert report is not None
        rate = next(c for c in report.candidates if c.candidate == "better").passed["sign"]
        assert _within(rate.hits, rate.n, closed), rate
    assert cal.lesson is not None
    noisy, exact = (next(r for r in report.uptakes[0].rules if r.rule_id == "lc:helpdesk-api-flaky").causal
                    for report in (cal.lesson, cal.lesson_noiseless))
    assert noisy.high < exact.low, (noisy, exact)
    text = (tmp_path / "out" / CALIBRATION_TXT).read_text()
    assert "with noise 0.5 (an answer drawn afresh that often) beside exact answers" in text
    assert "Lesson gate with noise 0.5 beside exact answers" in text


def test_the_noise_is_taken_from_an_aa_pilot(tmp_path: Path) -> None:
    """15 of 264 positives changed between base and its replicate: planted for the gate's baseline
    (right 0.6) as the redraw rate at which two replicates disagree that often."""
    spec, taken = with_pilot_noise(_spec(tmp_path), with_replicate(e13_results()))
    eta = 15 / 264
    assert (1 - (1 - spec.noise) ** 2) * 2 * 0.6 * 0.4 == pytest.approx(eta)
    assert "15 of 264 positives changed between base and its replicate base-aa" in taken
    with pytest.raises(CalibrationError, match="no replicate arm"):
        with_pilot_noise(_spec(tmp_path), e13_results())
