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

A policy that would defeat the safeguards is refused: every number finite; `alpha` ≥ 1e-6 (a
smaller one could never reach 1/α'); `margin` ≤ 1 (a tolerated rate ratio above 2 is no
safeguard); an enforced shadow signal's `max_rate` ≤ 0.5; `interval_s` ≤ `max_duration_s` (a
trial is looked at before it can expire); `max_duration_s` ≤ 366 days; and `gate_policy` must be
a gate policy (a name, a version and conditions with ids and kinds). The file and its gate
policy are read once each (regular files of at most 1 MiB), and the sha256 is of the bytes parsed.
"""

from __future__ import annotations

import hashlib
import itertools
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from core.names import Name
from core.records import Strict
from core.tomlfile import ConfigError, parse_toml, read_regular
from serve.errors import ServeError
from serve.trials.sequential import bonferroni

SignalName = Literal["server_errors", "tool_anomalies", "slow_requests", "shadow_disagreement"]
SIGNALS: tuple[SignalName, ...] = ("server_errors", "tool_anomalies", "slow_requests", "shadow_disagreement")
MAX_POLICY_BYTES = 1 << 20
MIN_ALPHA = 1e-6
MAX_MARGIN = 1.0
MAX_ENFORCED_SHADOW_RATE = 0.5
MAX_DURATION_S = 366 * 86400.0


class TrialError(ServeError):
    """A trial that cannot be started or changed: a bad policy, a wrong state, a stale gate verdict."""


class Finite(Strict):
    """A policy table: unknown keys are errors and so is every `inf` or `nan`."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True, allow_inf_nan=False)


class Step(Finite):
    percent: float = Field(gt=0, le=50)  # ≤ 50: the control cohort is the next equal slice
    min_duration_s: float = Field(ge=0)
    min_requests: int = Field(ge=0)


class Signal(Finite):
    enforced: bool = True
    margin: float = Field(default=0.0, ge=0, le=MAX_MARGIN)


class SlowSignal(Signal):
    threshold_s: float = Field(gt=0)


class ShadowSignal(Finite):
    enforced: bool = False
    max_rate: float = Field(gt=0, lt=1)

    @model_validator(mode="after")
    def _can_abort(self) -> ShadowSignal:
        if self.enforced and self.max_rate > MAX_ENFORCED_SHADOW_RATE:
            raise ValueError(f"an enforced shadow_disagreement needs max_rate ≤ {MAX_ENFORCED_SHADOW_RATE:g}")
        return self


class Signals(Finite):
    server_errors: Signal | None = Signal()
    tool_anomalies: Signal | None = Signal()
    slow_requests: SlowSignal | None = None
    shadow_disagreement: ShadowSignal | None = None

    def active(self) -> list[SignalName]:
        return [n for n in SIGNALS if getattr(self, n) is not None]

    def enforced(self) -> list[SignalName]:
        return [n for n in SIGNALS if (s := getattr(self, n)) is not None and s.enforced]

    def without(self, names: list[SignalName]) -> Signals:
        """These signals left out (ones the gateway cannot observe)."""
        return self.model_copy(update=dict.fromkeys(names))


class TrialPolicy(Finite):
    name: Name
    route: Name
    candidate: Name
    sticky_by: Literal["workspace", "session"] = "workspace"
    alpha: float = Field(ge=MIN_ALPHA, lt=1)
    interval_s: float = Field(gt=0)
    max_duration_s: float = Field(gt=0, le=MAX_DURATION_S)
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
        if self.interval_s > self.max_duration_s:
            raise ValueError("interval_s is longer than max_duration_s: the trial would expire before its first look")
        return self

    def alpha_per_signal(self) -> float:
        """Bonferroni: each enforced signal's test runs at α / (enforced signals)."""
        return bonferroni(self.alpha, len(self.signals.enforced()))


class GateCondition(BaseModel):
    model_config = ConfigDict(extra="ignore")
    id: str = Field(min_length=1)
    kind: str = Field(min_length=1)


class GatePolicyShape(BaseModel):
    """What makes a file a gate policy (replay/analysis/gates/policy.py validates the rest when it runs)."""

    model_config = ConfigDict(extra="ignore")
    name: Name
    version: str = Field(min_length=1)
    conditions: list[GateCondition] = Field(min_length=1)


@dataclass(frozen=True)
class LoadedPolicy:
    policy: TrialPolicy
    path: Path
    sha256: str
    gate_policy: Path  # resolved against the policy file's directory
    gate_policy_sha256: str


def _read(path: Path, what: str) -> bytes:
    try:
        return read_regular(path, MAX_POLICY_BYTES)
    except ConfigError as exc:
        raise TrialError(f"cannot read {what}: {exc}") from exc


def _gate_policy(path: Path, what: str) -> str:
    data = _read(path, what)
    try:
        GatePolicyShape.model_validate(tomllib.loads(data.decode("utf-8")))
    except (UnicodeDecodeError, tomllib.TOMLDecodeError, ValidationError) as exc:
        raise TrialError(f"{path}: {what} is not a gate policy (a name, a version and [[conditions]] with id and "
                         f"kind): {str(exc).splitlines()[0]}") from exc
    return hashlib.sha256(data).hexdigest()


def load_trial_policy(path: Path) -> LoadedPolicy:
    """Read and validate a trial policy; the gate policy it names must be one (its sha256 is recorded too).

    Each file is read once (regular files only, bounded), and the sha256 is of the bytes parsed.
    Blocking I/O: call it off the event loop.
    """
    data = _read(path, "trial policy")
    try:
        policy = parse_toml(data, path, TrialPolicy, "trial policy")
    except ConfigError as exc:
        raise TrialError(str(exc)) from exc
    gate = policy.gate_policy if policy.gate_policy.is_absolute() else path.parent / policy.gate_policy
    return LoadedPolicy(policy, path, hashlib.sha256(data).hexdigest(), gate.resolve(),
                        _gate_policy(gate, f"the gate policy named in {path}"))
