"""Pre-registered promotion gates: TOML policies evaluated on a run's results (DESIGN §4; 001 §6).

A policy (`configs/gates/*.toml`) is a list of conditions, each with an `id`, a `kind` from
the fixed registry below, its parameters and a description. Every threshold, stratum and
repeat level is a policy value; an unknown kind, parameter or stratum is rejected when the
policy is loaded, so a typo cannot silently loosen a gate.

Each condition evaluates to `pass`, `fail` or `not_run`, with the numbers it judged. The gate
passes only if every condition passes: `not_run` blocks, because a gate that was not run
proved nothing. Evidence the replay run does not produce (a confirmation run, critical-failure
checks, a canary export, ...) is given by path under a named key; a missing key makes its
condition `not_run` with the reason. The JSON formats of that evidence are `core.evidence`'s
models and are documented beside each condition in the shipped policies.

This package re-exports the public API.

- `context.py`: what a condition sees and returns, and the evidence readers
- `conditions.py`: the registry of condition kinds
- `derivation.py`: what binds another run or live evidence to the judged weights (built from, trained until)
- `inputs.py`: what a condition reads and whether it is there now
- `policy.py`: loading a policy, planning it, evaluating it
- `verdict_files.py`: verdict files: the verdict as an in-toto Statement over the digests of what it judged; verify
"""

from replay.analysis.gates.conditions import (
    CONDITION_KINDS,
    AnyCondition,
    CanaryNoRegression,
    Condition,
    ConfirmationRun,
    FreshChronological,
    IsolatedLiveReplay,
    IsolatedReplayCompletion,
    NoNewCriticalFailures,
    NonInferiority,
    NoUnsupportedCompletionIncrease,
    OverheadLimit,
    PairedGain,
    QuantisationSurvives,
    RepeatReduction,
    RollbackReady,
    ShadowImproves,
    TargetedCi,
)
from replay.analysis.gates.context import GateContext, GateError, GateOutcome, Status
from replay.analysis.gates.inputs import Read
from replay.analysis.gates.policy import (
    STATUS_LABEL,
    ConditionResult,
    DisputedRule,
    GatePlan,
    GatePolicy,
    Verdict,
    evaluate,
    evaluate_gate,
    format_plan,
    format_verdict,
    load_policy,
    plan_gate,
)
from replay.analysis.gates.verdict_files import format_checks, read_verdict, verdict_filename, verify, write_verdict

__all__ = [
    "CONDITION_KINDS",
    "STATUS_LABEL",
    "AnyCondition",
    "CanaryNoRegression",
    "Condition",
    "ConditionResult",
    "ConfirmationRun",
    "DisputedRule",
    "FreshChronological",
    "GateContext",
    "GateError",
    "GateOutcome",
    "GatePlan",
    "GatePolicy",
    "IsolatedLiveReplay",
    "IsolatedReplayCompletion",
    "NoNewCriticalFailures",
    "NoUnsupportedCompletionIncrease",
    "NonInferiority",
    "OverheadLimit",
    "PairedGain",
    "QuantisationSurvives",
    "Read",
    "RepeatReduction",
    "RollbackReady",
    "ShadowImproves",
    "Status",
    "TargetedCi",
    "Verdict",
    "evaluate",
    "evaluate_gate",
    "format_checks",
    "format_plan",
    "format_verdict",
    "load_policy",
    "plan_gate",
    "read_verdict",
    "verdict_filename",
    "verify",
    "write_verdict",
]
