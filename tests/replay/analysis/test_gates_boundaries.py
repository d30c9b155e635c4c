"""Gate policies' error messages (each names the file, the condition and the parameter) and the verdict
as text, byte for byte; conditions at their thresholds."""

from __future__ import annotations

import json
import math
from datetime import UTC, datetime
from pathlib import Path

import pytest

from replay.analysis.compare import compare
from replay.analysis.gates import (
    CONDITION_KINDS,
    DisputedRule,
    GateError,
    Status,
    Verdict,
    evaluate,
    format_verdict,
    load_policy,
    read_verdict,
)
from replay.analysis.gates.policy import ConditionResult
from tests.support.e13 import positive_record

KINDS = ", ".join(CONDITION_KINDS)


def policy_error(tmp_path: Path, body: str) -> str:
    path = tmp_path / "policy.toml"
    path.write_text('name = "test"\nversion = "1"\n' + body, encoding="utf-8")
    with pytest.raises(GateError) as info:
        load_policy(path)
    prefix = f"{path}: invalid gate policy:\n  "
    assert str(info.value).startswith(prefix)
    return str(info.value).removeprefix(prefix)


STRATA = "clean_trajectory_action, known_failure, training_sanity, verified_action, verified_recovery"
OWN = "a suite's own strata go in extra_strata"
GAIN = '[[conditions]]\nid = "g"\nkind = "paired_gain"\ndescription = "d"\nmin_points = 5\n'


@pytest.mark.parametrize("body, message", [
    ('[[conditions]]\nid = "x"\nkind = "nope"\ndescription = "d"\n', f"condition 'x': unknown kind 'nope' (known kinds: {KINDS})"),
    ('[[conditions]]\nid = "x"\ndescription = "d"\n', f"condition 'x': missing kind (known kinds: {KINDS})"),
    ('[[conditions]]\nkind = "nope"\n', f"condition '#1': unknown kind 'nope' (known kinds: {KINDS})"),
    (GAIN + '[[conditions]]\nkind = "nope"\n', f"condition '#2': unknown kind 'nope' (known kinds: {KINDS})"),
    (GAIN.replace("min_points = 5", "min_points = 5\nfoo = 1"), "condition 'g' (kind paired_gain): unknown parameter 'foo'"),
    (GAIN.replace("min_points = 5\n", ""), "condition 'g' (kind paired_gain): missing parameter 'min_points'"),
    (GAIN.replace("min_points = 5", 'min_points = "many"'),
     "condition 'g' (kind paired_gain): min_points: Input should be a valid number, unable to parse string as a number"),
    ("colour = 1\n" + GAIN, "unknown policy field 'colour'"),
    ("conditions = []\n", "conditions: List should have at least 1 item after validation, not 0"),
    (GAIN + GAIN, "condition ids must be unique: g"),
    (GAIN.replace('"g"', '"b"') * 2 + GAIN.replace('"g"', '"a"') * 2 + GAIN, "condition ids must be unique: a, b"),
    (GAIN.replace("min_points = 5", "min_points = 5\nx = 1\ny = 2"),
     "condition 'g' (kind paired_gain): unknown parameter 'x'\n  condition 'g' (kind paired_gain): unknown parameter 'y'"),
    ('extra_strata = [true]\n' + GAIN, "extra_strata.0: Input should be a valid string"),
    ('conditions = ["x"]\n', "condition '#1': Input should be a valid dictionary or object to extract fields from"),
    (GAIN.replace("min_points = 5", 'min_points = 5\nscope = "known_failure "'),
     f"condition 'g': unknown stratum 'known_failure ' in scope (known: all_positive, {STRATA}; {OWN})"),
    ('[[conditions]]\nid = "r"\nkind = "repeat_reduction"\ndescription = "d"\nmin_relative_reduction = 0.2\n'
     'stratum = "all_positive"\n', f"condition 'r': unknown stratum 'all_positive' in stratum (known: {STRATA}; {OWN})"),
    ('extra_strata = ["lookup"]\n[[conditions]]\nid = "o"\nkind = "overhead"\ndescription = "d"\n'
     'max_token_overhead = 1\nmax_latency_overhead = 1\ncompensating_scope = "lookups"\n',
     "condition 'o': unknown stratum 'lookups' in compensating_scope (known: all_positive, clean_trajectory_action, "
     f"known_failure, lookup, training_sanity, verified_action, verified_recovery; {OWN})"),
])
def test_policy_errors_name_the_condition_and_parameter(tmp_path: Path, body: str, message: str) -> None:
    assert policy_error(tmp_path, body) == message


def test_a_policy_that_cannot_be_read_or_parsed_names_the_file(tmp_path: Path) -> None:
    absent = tmp_path / "absent.toml"
    with pytest.raises(GateError) as info:
        load_policy(absent)
    assert str(info.value) == f"{absent}: cannot read policy: No such file or directory"
    broken = tmp_path / "broken.toml"
    broken.write_text("[[conditions]\n", encoding="utf-8")
    with pytest.raises(GateError) as info:
        load_policy(broken)
    assert str(info.value).startswith(f"{broken}: invalid TOML: ") and "(at line 1, column 13)" in str(info.value)


def result(id_: str, status: Status, tainted: list[str] | None = None) -> ConditionResult:
    return ConditionResult(id=id_, kind="paired_gain", description=f"{id_} described", status=status,
                           reason=f"{id_} because", tainted_rule_ids=tainted or [])


def verdict(**change: object) -> Verdict:
    fields: dict[str, object] = dict(
        policy="serious", policy_version="3", baseline="base", candidate="cand", passed=False,
        conditions=[result("gain", Status.PASS), result("ci-lower", Status.FAIL, ["lc:x"]),
                    result("run", Status.NOT_RUN)],
        comparisons_made=12, evaluated_at=datetime(2026, 8, 21, tzinfo=UTC))
    return Verdict(**(fields | change))  # type: ignore[arg-type]


def test_a_verdict_as_text() -> None:
    disputed = DisputedRule(rule_id="lc:x", reason="a vendor page", disputed_at=datetime(2026, 8, 20, 9, 30, tzinfo=UTC))
    text = format_verdict(verdict(unused_evidence=["a", "b"], tainted_rule_ids=["lc:x", "lc:y"], disputed=[disputed]))
    assert text == "\n".join([
        "gate serious v3: candidate 'cand' against 'base': REJECTED (1 pass, 1 fail, 1 not run; rests on disputed "
        "rule(s) lc:x, lc:y)",
        "  [   pass] gain      gain described",
        "                      gain because",
        "  [   FAIL] ci-lower  ci-lower described †",
        "                      ci-lower because",
        "  [not run] run       run described",
        "                      run because",
        "evidence given but used by no condition: a, b",
        "† cannot pass: rests on results that carried disputed rule(s) lc:x (disputed 2026-08-20 09:30 UTC: a vendor "
        "page), lc:y; re-run the arms without them, or restore them after review (`worker-replay undispute`)",
        "12 paired tests in the comparison, uncorrected for multiple comparisons.",
    ])


def test_a_passed_verdict_without_notes() -> None:
    text = format_verdict(verdict(passed=True, conditions=[result("gain", Status.PASS)]))
    assert text.splitlines()[0].endswith(": PASSED (1 pass, 0 fail, 0 not run)")
    assert len(text.splitlines()) == 4


def test_a_file_that_is_not_a_verdict(tmp_path: Path) -> None:
    path = tmp_path / "v.json"
    path.write_text(json.dumps({"policy": "x"}))
    with pytest.raises(GateError, match=f"^not a gate verdict: {path}"):
        read_verdict(path)


# ── conditions at their thresholds ──────────────────────────────────────────


def gain_records(wins: int, losses: int, n: int = 20) -> list:
    """n verified_recovery decisions: `wins` only the candidate gets right, `losses` only the baseline."""
    records = []
    for i in range(n):
        base_right, cand_right = (False, True) if i < wins else (True, False) if i < wins + losses else (True, True)
        records.append(positive_record("base", "verified_recovery", f"d{i}", i, base_right, base_right))
        records.append(positive_record("cand", "verified_recovery", f"d{i}", i, cand_right, cand_right))
    return records


def judged(tmp_path: Path, records: list, kind: str, **params: object) -> Status:
    lines = ["[[conditions]]", 'id = "c"', f'kind = "{kind}"', 'description = "d"']
    lines += [f"{name} = {value!r}" if isinstance(value, float) else f"{name} = {json.dumps(value)}"
              for name, value in params.items()]
    path = tmp_path / "policy.toml"
    path.write_text('name = "t"\nversion = "1"\n' + "\n".join(lines) + "\n", encoding="utf-8")
    [only] = evaluate(load_policy(path), compare(records, "base", "cand")).conditions
    return only.status


def test_paired_gain_and_non_inferiority_at_exactly_their_points(tmp_path: Path) -> None:
    """1 win in 20 decisions is exactly +5 points, 1 loss exactly −5."""
    records = gain_records(1, 0)
    assert judged(tmp_path, records, "paired_gain", min_points=5.0) is Status.PASS
    assert judged(tmp_path, records, "paired_gain", min_points=math.nextafter(5.0, 6)) is Status.FAIL
    losing = gain_records(0, 1)
    assert judged(tmp_path, losing, "non_inferiority", scope="all_positive", min_points=-5.0) is Status.PASS
    assert judged(tmp_path, losing, "non_inferiority", scope="all_positive",
                  min_points=math.nextafter(-5.0, 0)) is Status.FAIL


def test_paired_gain_max_p_at_exactly_the_p_value(tmp_path: Path) -> None:
    """7/0 in 20 decisions: +35 points, p = 1/64 exactly; max_p = 1/64 passes (p ≤ α), one ulp below fails."""
    records = gain_records(7, 0)
    assert judged(tmp_path, records, "paired_gain", min_points=35.0, max_p=1 / 64) is Status.PASS
    assert judged(tmp_path, records, "paired_gain", min_points=35.0, max_p=math.nextafter(1 / 64, 0)) is Status.FAIL
