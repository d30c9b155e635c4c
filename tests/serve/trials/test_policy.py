"""Trial policies: the shipped example is valid; mistakes are refused with the file and line."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from serve.trials.policy import TrialError, load_trial_policy

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
