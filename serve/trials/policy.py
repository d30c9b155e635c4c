"""The trial policy (TOML under `configs/trials/`): written before the trial starts, like a gate
policy, and recorded by its sha256 so the journal says exactly which rules a trial ran under.

```toml
name = "recovery-v2-canary"
route = "worker"
candidate = "recovery-v2"
alpha = 0.01                  # P(any false abort) over the whole trial, split over enforced signals
interval_s = 60               # how often the controller looks
max_duration_s = 86400        # then the trial expires back to control, whatever it has seen
gate_policy = "../gates/production-candidate.toml"   # relative to this file

[[steps]]                     # percent of workspaces on the candidate; an equal control cohort
percent = 5                   # (the next `percent` of the hash space) stays on production
min_duration_s = 3600
min_requests = 200            # per cohort, within the step

[signals.server_errors]       # requests with status >= 500, per request
[signals.tool_anomalies]      # guard anomalies, per observed tool result
[signals.slow_requests]       # requests slower than threshold_s, per request
threshold_s = 20.0
[signals.shadow_disagreement] # shadow answers with another tool or key set, per comparison
max_rate = 0.3
```

Each signal has `enforced` (an enforced signal aborts the trial; the others are recorded) and
`margin`: the candidate may be worse by this fraction (rate ratio ≤ 1 + margin) before it
counts as a regression. `shadow_disagreement` has no control cohort: it tests its rate against
`max_rate`.
"""

from __future__ import annotations

import hashlib
import itertools
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Literal

from pydantic import Field, StringConstraints, model_validator

from core.records import Strict
from core.tomlfile import ConfigError, load_toml
from serve.errors import ServeError

Name = Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")]
SignalName = Literal["server_errors", "tool_anomalies", "slow_requests", "shadow_disagreement"]
SIGNALS: tuple[SignalName, ...] = ("server_errors", "tool_anomalies", "slow_requests", "shadow_disagreement")


class TrialError(ServeError):
    """A trial that cannot be started or changed: a bad policy, a wrong state, a stale gate verdict."""


class Step(Strict):
    percent: float = Field(gt=0, le=50)  # ≤ 50: the control cohort is the next equal slice
    min_duration_s: float = Field(ge=0)
    min_requests: int = Field(ge=0)


class Signal(Strict):
    enforced: bool = True
    margin: float = Field(default=0.0, ge=0)


class SlowSignal(Signal):
    threshold_s: float = Field(gt=0)


class ShadowSignal(Strict):
    enforced: bool = False
    max_rate: float = Field(gt=0, lt=1)


class Signals(Strict):
    server_errors: Signal | None = Signal()
    tool_anomalies: Signal | None = Signal()
    slow_requests: SlowSignal | None = None
    shadow_disagreement: ShadowSignal | None = None

    def active(self) -> list[SignalName]:
        return [n for n in SIGNALS if getattr(self, n) is not None]

    def enforced(self) -> list[SignalName]:
        return [n for n in SIGNALS if (s := getattr(self, n)) is not None and s.enforced]


class TrialPolicy(Strict):
    name: Name
    route: Name
    candidate: Name
    sticky_by: Literal["workspace", "session"] = "workspace"
    alpha: float = Field(gt=0, lt=1)
    interval_s: float = Field(gt=0)
    max_duration_s: float = Field(gt=0)
    gate_policy: Path
    steps: list[Step] = Field(min_length=1)
    signals: Signals = Field(default_factory=Signals)

    @model_validator(mode="after")
    def _coherent(self) -> TrialPolicy:
        percents = [s.percent for s in self.steps]
        if any(b <= a for a, b in itertools.pairwise(percents)):
            raise ValueError(f"steps must raise the percent at every step, got {percents}")
        if not self.signals.enforced():
            raise ValueError("at least one signal must be enforced, or the trial could never abort")
        if sum(s.min_duration_s for s in self.steps) > self.max_duration_s:
            raise ValueError("the steps' minimum durations add up to more than max_duration_s")
        return self

    def alpha_per_signal(self) -> float:
        """Bonferroni: each enforced signal's test runs at α / (enforced signals)."""
        return self.alpha / len(self.signals.enforced())


@dataclass(frozen=True)
class LoadedPolicy:
    policy: TrialPolicy
    path: Path
    sha256: str
    gate_policy: Path  # resolved against the policy file's directory
    gate_policy_sha256: str


def _digest(path: Path, what: str) -> str:
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError as exc:
        raise TrialError(f"{path}: cannot read {what}: {exc.strerror}") from exc


def load_trial_policy(path: Path) -> LoadedPolicy:
    """Read and validate a trial policy; the gate policy it names must exist (its sha256 is recorded too)."""
    sha = _digest(path, "trial policy")
    try:
        policy = load_toml(path, TrialPolicy, "trial policy")
    except ConfigError as exc:
        raise TrialError(str(exc)) from exc
    gate = policy.gate_policy if policy.gate_policy.is_absolute() else path.parent / policy.gate_policy
    return LoadedPolicy(policy, path, sha, gate.resolve(), _digest(gate, f"the gate policy named in {path}"))
