"""Trial policies: the shipped example is valid; mistakes are refused with the file and line."""

from __future__ import annotations

import hashlib
import math
import os
import threading
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from serve.trials.trial_policy import MAX_POLICY_BYTES, TrialError, load_trial_policy

ROOT = Path(__file__).resolve().parents[3]
EXAMPLE = ROOT / "configs" / "trials" / "example.toml"


def test_the_shipped_example_loads_with_its_sha256_and_its_gate_policy() -> None:
    loaded = load_trial_policy(EXAMPLE)
    assert loaded.sha256 == hashlib.sha256(EXAMPLE.read_bytes()).hexdigest()
    assert loaded.gate_policy == (ROOT / "configs" / "gates" / "production-candidate.toml").resolve()
    policy = loaded.policy
    assert [s.percent for s in policy.steps] == [5, 20, 50]
    assert policy.signals.enforced() == ["server_errors", "tool_anomalies", "slow_requests"]
    assert policy.signals.active()[-1] == "shadow_disagreement"
    assert policy.alpha_per_signal() == pytest.approx(0.01 / 3)


def write(tmp_path: Path, text: str) -> Path:
    gate = tmp_path / "gate.toml"
    gate.write_text("name = 'g'\n")
    path = tmp_path / "trial.toml"
    path.write_text(text)
    return path


HEAD = """name = "t"
route = "worker"
candidate = "c1"
alpha = 0.05
interval_s = 10
max_duration_s = 1000
gate_policy = "gate.toml"
"""


def test_steps_must_rise_and_stay_within_half_the_traffic(tmp_path: Path) -> None:
    path = write(tmp_path, HEAD + "[[steps]]\npercent = 20\nmin_duration_s = 1\nmin_requests = 1\n"
                                  "[[steps]]\npercent = 10\nmin_duration_s = 1\nmin_requests = 1\n")
    with pytest.raises(TrialError, match="raise the percent"):
        load_trial_policy(path)
    path = write(tmp_path, HEAD + "[[steps]]\npercent = 60\nmin_duration_s = 1\nmin_requests = 1\n")
    with pytest.raises(TrialError, match=r"trial.toml:9: steps.0.percent"):
        load_trial_policy(path)


def test_a_policy_that_could_never_abort_is_refused(tmp_path: Path) -> None:
    path = write(tmp_path, HEAD + "[[steps]]\npercent = 5\nmin_duration_s = 1\nmin_requests = 1\n"
                                  "[signals.server_errors]\nenforced = false\n[signals.tool_anomalies]\nenforced = false\n")
    with pytest.raises(TrialError, match="at least one signal must be enforced"):
        load_trial_policy(path)


def test_unknown_keys_missing_files_and_a_missing_gate_policy_name_the_file(tmp_path: Path) -> None:
    path = write(tmp_path, HEAD + "[[steps]]\npercent = 5\nmin_duration_s = 1\nmin_requests = 1\nwieght = 3\n")
    with pytest.raises(TrialError, match=r"trial.toml:12: steps.0.wieght"):
        load_trial_policy(path)
    with pytest.raises(TrialError, match="cannot read trial policy"):
        load_trial_policy(tmp_path / "absent.toml")
    path = write(tmp_path, HEAD.replace("gate.toml", "nope.toml") + "[[steps]]\npercent = 5\nmin_duration_s = 1\n"
                                                                   "min_requests = 1\n")
    with pytest.raises(TrialError, match="cannot read the gate policy named in"):
        load_trial_policy(path)


STEP = "[[steps]]\npercent = 5\nmin_duration_s = 1\nmin_requests = 1\n"
GATE_TOML = "name = 'g'\nversion = '1'\n[[conditions]]\nid = 'c'\nkind = 'canary_no_regression'\n"


def gated(tmp_path: Path, text: str) -> Path:
    path = write(tmp_path, text)
    (tmp_path / "gate.toml").write_text(GATE_TOML)
    return path


@pytest.mark.parametrize(("change", "message"), [
    ("alpha = 0.05", "alpha = inf"),
    ("interval_s = 10", "interval_s = nan"),
    ("max_duration_s = 1000", "max_duration_s = inf"),
])
def test_infinite_or_nan_numbers_are_refused(tmp_path: Path, change: str, message: str) -> None:
    with pytest.raises(TrialError, match="finite number"):
        load_trial_policy(gated(tmp_path, HEAD.replace(change, message) + STEP))


@pytest.mark.parametrize(("text", "message"), [
    (HEAD.replace("interval_s = 10", "interval_s = 1e9").replace("max_duration_s = 1000", "max_duration_s = 5")
     + STEP.replace("min_duration_s = 1", "min_duration_s = 0"), "expire before its first look"),
    (HEAD + STEP + "[signals.server_errors]\nmargin = 1e9\n", "less than or equal to 1"),
    (HEAD.replace("alpha = 0.05", "alpha = 1e-300") + STEP, "alpha: Input should be greater than or equal to"),
    (HEAD + STEP + "[signals.shadow_disagreement]\nenforced = true\nmax_rate = 0.99\n", "max_rate ≤ 0.5"),
    (HEAD.replace("max_duration_s = 1000", "max_duration_s = 1e12") + STEP, "less than or equal to"),
])
def test_policies_that_would_defeat_the_safeguards_are_refused(tmp_path: Path, text: str, message: str) -> None:
    with pytest.raises(TrialError, match=message):
        load_trial_policy(gated(tmp_path, text))


def test_the_gate_policy_must_be_a_gate_policy(tmp_path: Path) -> None:
    path = write(tmp_path, HEAD + STEP)
    (tmp_path / "gate.toml").write_text("name = 'g'\n")
    with pytest.raises(TrialError, match="is not a gate policy"):
        load_trial_policy(path)
    (tmp_path / "gate.toml").write_text(GATE_TOML)
    assert load_trial_policy(path).gate_policy_sha256 == hashlib.sha256(GATE_TOML.encode()).hexdigest()


def _feed(fifo: Path, contents: list[bytes], stop: threading.Event) -> None:
    """Write each content to one opening of the FIFO (as a policy that changes between two reads)."""
    for data in contents:
        while not stop.is_set():
            try:
                fd = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
            except OSError:  # no reader yet
                time.sleep(0.01)
                continue
            os.set_blocking(fd, True)
            os.write(fd, data)
            os.close(fd)
            time.sleep(0.05)
            break


def test_a_fifo_policy_is_refused_at_once_not_read_twice(tmp_path: Path) -> None:
    """Two reads of one path could hash one policy and run another: a FIFO fed α 0.01 then α 0.5."""
    (tmp_path / "gate.toml").write_text(GATE_TOML)
    fifo = tmp_path / "trial.toml"
    os.mkfifo(fifo)
    stop = threading.Event()
    feeder = threading.Thread(target=_feed, args=(fifo, [(HEAD + STEP).encode(),
                                                         (HEAD.replace("0.05", "0.5") + STEP).encode()], stop))
    feeder.start()
    try:
        with pytest.raises(TrialError, match="not a regular file"):
            load_trial_policy(fifo)
    finally:
        stop.set()
        feeder.join(5)


def test_what_is_hashed_is_what_is_parsed_and_size_is_bounded(tmp_path: Path) -> None:
    path = gated(tmp_path, HEAD + STEP)
    loaded = load_trial_policy(path)
    assert loaded.sha256 == hashlib.sha256(path.read_bytes()).hexdigest() and loaded.policy.alpha == 0.05
    path.write_text(HEAD + STEP + "#" * (MAX_POLICY_BYTES + 1))
    with pytest.raises(TrialError, match="larger than"):
        load_trial_policy(path)


_numbers = st.one_of(st.floats(allow_nan=True, allow_infinity=True), st.integers(-10, 10**12))


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.fixed_dictionaries({"alpha": _numbers, "interval_s": _numbers, "max_duration_s": _numbers,
                              "percent": _numbers, "min_duration_s": _numbers, "margin": _numbers,
                              "threshold_s": _numbers, "max_rate": _numbers}))
def test_any_numbers_give_a_refusal_or_a_policy_whose_safeguards_hold(tmp_path: Path,
                                                                      numbers: dict[str, float]) -> None:
    def toml(value: float) -> str:
        return {"inf": "inf", "-inf": "-inf", "nan": "nan"}.get(str(value), repr(value))

    n = {k: toml(v) for k, v in numbers.items()}
    text = (f'name = "t"\nroute = "worker"\ncandidate = "c1"\nalpha = {n["alpha"]}\ninterval_s = {n["interval_s"]}\n'
            f'max_duration_s = {n["max_duration_s"]}\ngate_policy = "gate.toml"\n'
            f'[[steps]]\npercent = {n["percent"]}\nmin_duration_s = {n["min_duration_s"]}\nmin_requests = 1\n'
            f'[signals.server_errors]\nmargin = {n["margin"]}\n[signals.slow_requests]\nthreshold_s = {n["threshold_s"]}\n'
            f'[signals.shadow_disagreement]\nenforced = true\nmax_rate = {n["max_rate"]}\n')
    try:
        policy = load_trial_policy(gated(tmp_path, text)).policy
    except TrialError:
        return
    values = [policy.alpha, policy.interval_s, policy.max_duration_s, policy.steps[0].percent,
              policy.steps[0].min_duration_s]
    assert all(math.isfinite(v) for v in values)
    assert 1e-6 <= policy.alpha < 1 and policy.interval_s <= policy.max_duration_s <= 366 * 86400
    assert policy.signals.server_errors is not None and policy.signals.server_errors.margin <= 1
    assert policy.signals.shadow_disagreement is not None and policy.signals.shadow_disagreement.max_rate <= 0.5
    assert -math.log(policy.alpha_per_signal()) < 20  # an enforced signal can reach its threshold
