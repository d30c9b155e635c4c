"""`worker-replay plan` on E13's table as the pilot (tests/support/e13.py), and its policy inputs."""

from __future__ import annotations

from pathlib import Path

import pytest

from replay.analysis.compare import compare
from replay.analysis.gates import GateError, load_policy
from replay.analysis.plan import DEFAULT_ALPHA, Plan, format_plan, plan
from replay.analysis.power import decisions_needed, minimum_detectable_effect, power_at, win_share
from tests.support.e13 import BASE, Q_ONLY, e13_results

ROOT = Path(__file__).resolve().parents[3]
SERIOUS = ROOT / "configs" / "gates" / "serious-candidate.toml"
PILOT = compare(e13_results((BASE, Q_ONLY)), BASE, Q_ONLY)


def policy_with(tmp_path: Path, extra: str) -> Path:
    """The shipped serious-candidate policy with lines added to its paired-gain condition."""
    text = SERIOUS.read_text().replace('min_points = 5.0\nbasis = "point"\n', f'min_points = 5.0\nbasis = "point"\n{extra}\n', 1)
    path = tmp_path / "policy.toml"
    path.write_text(text)
    return path


@pytest.fixture(scope="module")
def e13_plan() -> Plan:
    return plan(PILOT, load_policy(SERIOUS), pilot="s1")


def test_e13_as_pilot_rows_follow_table_1(e13_plan: Plan) -> None:
    rows = {r.scope: r for r in e13_plan.rows}
    assert list(rows) == ["verified_recovery", "clean_trajectory_action", "verified_action", "all_positive"]
    assert [(rows[s].decisions, rows[s].wins, rows[s].losses) for s in rows] == [
        (73, 7, 0), (73, 3, 7), (118, 4, 4), (264, 14, 11)]
    assert [r.gate_scope for r in rows.values()] == [False, False, False, True]
    assert rows["all_positive"].discordance == pytest.approx(25 / 264)


def test_e13_policy_inputs(e13_plan: Plan) -> None:
    """The shipped policy sets no α for paired-gain: the plan says so and uses 0.05; the effect is its +5 points."""
    assert (e13_plan.alpha, e13_plan.effect_points, e13_plan.min_points) == (DEFAULT_ALPHA, 5.0, 5.0) == (0.05, 5.0, 5.0)
    assert "sets no max_p" in e13_plan.alpha_source and "min_points" in e13_plan.effect_source
    assert e13_plan.condition == "paired-gain"


def test_e13_all_positives_cannot_reliably_detect_the_gates_five_points(e13_plan: Plan) -> None:
    """At S1's discordance (25 of 264), the 264 positives detect ≥ 5.48 points with 80% power; +5 needs 320."""
    row = next(r for r in e13_plan.rows if r.scope == "all_positive")
    d = 25 / 264
    assert row.mde_points == minimum_detectable_effect(264, d, 0.05, 0.8)
    assert row.mde_points == pytest.approx(5.476, abs=0.002)
    assert row.decisions_needed == decisions_needed(5.0, d, 0.05, 0.8, 20000).decisions == 320
    assert row.power_now == pytest.approx(power_at(264, d, win_share(5.0, d), 0.05))
    assert row.power_now is not None and row.power_now < 0.8
    # test + threshold at an effect equal to the threshold: about a coin flip, at either size
    assert row.gate_power_now is not None and row.gate_power_now < 0.55
    assert row.gate_power_needed is not None and row.gate_power_needed < 0.6


def test_e13_recovery_stratum_is_too_small_for_any_effect(e13_plan: Plan) -> None:
    """73 decisions at 7/73 discordance give fewer than the 6 pairs the test needs too often."""
    row = next(r for r in e13_plan.rows if r.scope == "verified_recovery")
    assert row.mde_points is None
    assert row.decisions_needed is not None and row.decisions_needed > 73


def test_alpha_comes_from_the_policy_when_it_sets_one(tmp_path: Path) -> None:
    registered = load_policy(policy_with(tmp_path, "max_p = 0.01"))
    strict = plan(PILOT, registered, pilot="s1")
    assert strict.alpha == 0.01 and "max_p" in strict.alpha_source
    assert plan(PILOT, registered, pilot="s1", alpha=0.01).alpha == 0.01
    with pytest.raises(GateError, match="pre-registers α = 0.01"):
        plan(PILOT, registered, pilot="s1", alpha=0.2)
    loose = plan(PILOT, load_policy(SERIOUS), pilot="s1", alpha=0.2)
    assert loose.alpha == 0.2 and "--alpha" in loose.alpha_source
    needed = {p.alpha: next(r for r in p.rows if r.gate_scope).decisions_needed for p in (strict, loose)}
    assert needed[0.01] is not None and needed[0.2] is not None and needed[0.01] > 320 > needed[0.2]


def test_an_effect_beyond_the_discordance_is_explained(e13_plan: Plan) -> None:
    big = plan(PILOT, load_policy(SERIOUS), pilot="s1", effect=12.0)
    row = next(r for r in big.rows if r.scope == "all_positive")
    assert row.decisions_needed is None and "more than this discordance allows" in row.note
    assert row.mde_points == pytest.approx(5.476, abs=0.002)


def test_text_table_and_json(e13_plan: Plan) -> None:
    text = format_plan(e13_plan)
    line = next(ln for ln in text.splitlines() if ln.startswith("all positives *"))
    assert "264" in line and "+14 / −11" in line and "+5.48" in line and "320" in line
    assert "α = 0.05" in text and "Planned for the test alone" in text
    assert Plan.model_validate_json(e13_plan.model_dump_json()) == e13_plan


@pytest.mark.parametrize(("kwargs", "needle"), [
    ({"power": 1.5}, "power must be in (0, 1)"),
    ({"alpha": 0.0}, "α must be in (0, 1)"),
    ({"effect": -1.0}, "must be a gain"),
    ({"max_decisions": 0}, "max decisions"),
])
def test_bad_inputs_are_gate_errors(kwargs: dict, needle: str) -> None:
    with pytest.raises(GateError, match=needle.replace("(", r"\(").replace(")", r"\)")):
        plan(PILOT, load_policy(SERIOUS), pilot="s1", **kwargs)


def test_a_policy_without_a_paired_gain_condition_is_an_error(tmp_path: Path) -> None:
    path = tmp_path / "p.toml"
    path.write_text('name = "p"\nversion = "1"\n[[conditions]]\nid = "c"\nkind = "targeted_ci"\n'
                    'description = "d"\nstratum = "verified_recovery"\n')
    with pytest.raises(GateError, match="no paired_gain condition"):
        plan(PILOT, load_policy(path), pilot="s1")
