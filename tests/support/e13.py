"""Result records that reproduce 001's S1 evaluation (rows E5–E9, E13; Table 1).

Arms `base`, `q-only` and `mixed` on the frozen suite's 484 decisions. Numbers from the paper:

* joint correctness, base → Q-only: verified_recovery (73) 31 → 38 (+7/−0); clean (73)
  49 → 45 (+3/−7); verified_action (118) 58 → 58 (+4/−4); all 264: 138 → 141 (+14/−11);
  training_sanity (60) 34 → 38;
* joint correctness, base → mixed: recovery 31 → 36 (+7/−2); clean 49 → 46 (+5/−8);
  verified_action 58 → 57 (+5/−6); all 264: 138 → 139 (+17/−16); training_sanity 34 → 37;
* tool-only correctness unchanged for Q-only: 61, 54, 89 (204 over the 264);
* known_failure (160): exact repeats 32 → 24, 9 fixes / 1 regression; Q-only tool repeats
  122 → 114.

Not in the paper, chosen here so every record is consistent (exact ⊂ shape ⊂ tool repeat,
joint ⊂ tool correct): the discordant split of training_sanity (+5/−1 Q-only, +4/−1 mixed),
its tool-only count (45), shape repeats (40 → 31) and mixed's repeats (equal to Q-only's).
Usage and latency are left at 0: S1 reported no overhead, so the gate cannot judge it.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime

from core.keyset import key_set
from core.records import DecisionScore, ParsedResponse, ParseOutcome, ResultRecord, ToolCall, Usage

BASE, Q_ONLY, MIXED = "base", "q-only", "mixed"
ARMS = (BASE, Q_ONLY, MIXED)
TOOLS = ("search_invoices", "send_email", "create_ticket", "update_record")
TARGET_ARGUMENTS = {"customer_id": "c-1", "filter": {"date": {"from": "2026-08-01"}}}
FAILED_ARGUMENTS = {"invoice_id": "inv-9", "amount": 120}
FINISHED = datetime(2026, 9, 20, 12, 0, tzinfo=UTC)


@dataclass(frozen=True)
class Stratum:
    """Joint-correct counts: the baseline is right on [0, A); an arm's (wins, losses) move that."""

    name: str
    n: int
    baseline_correct: int
    tool_correct: int
    moves: dict[str, tuple[int, int]]


POSITIVE = (
    Stratum("verified_recovery", 73, 31, 61, {Q_ONLY: (7, 0), MIXED: (7, 2)}),
    Stratum("clean_trajectory_action", 73, 49, 54, {Q_ONLY: (3, 7), MIXED: (5, 8)}),
    Stratum("verified_action", 118, 58, 89, {Q_ONLY: (4, 4), MIXED: (5, 6)}),
    Stratum("training_sanity", 60, 34, 45, {Q_ONLY: (5, 1), MIXED: (4, 1)}),
)
KNOWN_FAILURE_N = 160
# Per level: the decisions (indices) on which each arm repeated the failed action.
_CANDIDATE_REPEATS = {
    "exact": set(range(23)) | {32},
    "shape": set(range(23)) | set(range(32, 40)),
    "tool": set(range(23)) | set(range(32, 123)),
}
REPEATS = {
    BASE: {"exact": set(range(32)), "shape": set(range(40)), "tool": set(range(122))},
    Q_ONLY: _CANDIDATE_REPEATS,
    MIXED: _CANDIDATE_REPEATS,
}


def e13_results(
    arms: tuple[str, ...] = (BASE, Q_ONLY), rules: dict[str, list[str]] | None = None
) -> list[ResultRecord]:
    """Every arm × decision record; `rules` maps decision id → injected rule ids (all arms)."""
    records = []
    for arm in arms:
        for stratum in POSITIVE:
            correct = _joint_correct(stratum, arm)
            for i in range(stratum.n):
                decision_id = f"{stratum.name}-{i:03d}"
                joint, tool = i in correct, i < stratum.tool_correct
                records.append(positive_record(arm, stratum.name, decision_id, i, joint, tool, rules=rules))
        for i in range(KNOWN_FAILURE_N):
            levels = {level: i in indices for level, indices in REPEATS[arm].items()}
            records.append(known_failure_record(arm, f"known_failure-{i:03d}", i, levels, rules=rules))
    return records


def _joint_correct(stratum: Stratum, arm: str) -> set[int]:
    a = stratum.baseline_correct
    if arm == BASE:
        return set(range(a))
    wins, losses = stratum.moves[arm]
    return set(range(a - losses)) | set(range(a, a + wins))


def _call(tool: str, arguments: dict) -> ToolCall:
    return ToolCall(tool=tool, arguments=arguments, key_set=sorted(key_set(arguments)))


def _record(
    arm: str, stratum: str, decision_id: str, i: int, target_tool: str | None, call: ToolCall,
    score: DecisionScore, rules: dict[str, list[str]] | None, tokens: int, latency_s: float,
) -> ResultRecord:
    tool_calls = [{"function": {"name": call.tool, "arguments": call.arguments}}]
    message = {"role": "assistant", "content": "", "tool_calls": tool_calls}
    return ResultRecord(
        arm=arm,
        decision_id=decision_id,
        stratum=stratum,
        cluster=f"cluster-{i % 7}",
        workspace=f"ws-{'abc'[i % 3]}",
        target_tool=target_tool,
        model="worker-base" if arm == BASE else arm,
        memory="withheld",
        raw_output={"message": message},
        parsed=ParsedResponse(outcome=ParseOutcome.OK, calls=[call], source="structured"),
        score=score,
        usage=Usage(prompt_tokens=10 * tokens, completion_tokens=tokens),
        latency_s=latency_s,
        injected_rule_ids=(rules or {}).get(decision_id, []),
        finished_at=FINISHED,
    )


def positive_record(
    arm: str, stratum: str, decision_id: str, i: int, joint: bool, tool: bool, *,
    rules: dict[str, list[str]] | None = None, tokens: int = 0, latency_s: float = 0.0,
) -> ResultRecord:
    """One scored answer to a positive decision; target tool and workspace/cluster follow `i`."""
    target = TOOLS[i % len(TOOLS)]
    if joint:
        call = _call(target, TARGET_ARGUMENTS)
    elif tool:
        call = _call(target, {"customer_id": "c-1"})
    else:
        call = _call(TOOLS[(i + 1) % len(TOOLS)], TARGET_ARGUMENTS)
    score = DecisionScore(joint_correct=joint, tool_correct=tool)
    return _record(arm, stratum, decision_id, i, target, call, score, rules, tokens, latency_s)


def known_failure_record(
    arm: str, decision_id: str, i: int, levels: dict[str, bool], *,
    rules: dict[str, list[str]] | None = None, tokens: int = 0, latency_s: float = 0.0,
) -> ResultRecord:
    """One answer to a failed-action state; `levels` says which repeat levels it hit."""
    failed_tool = "refund_invoice"
    if levels["exact"]:
        call = _call(failed_tool, FAILED_ARGUMENTS)
    elif levels["shape"]:
        call = _call(failed_tool, {"invoice_id": "inv-9", "amount": 80})
    elif levels["tool"]:
        call = _call(failed_tool, {"invoice_id": "inv-9"})
    else:
        call = _call("search_invoices", {"customer_id": "c-1"})
    score = DecisionScore(tool_repeat=levels["tool"], shape_repeat=levels["shape"], exact_repeat=levels["exact"])
    return _record(arm, "known_failure", decision_id, i, None, call, score, rules, tokens, latency_s)


def with_replicate(records: list[ResultRecord], flips: int = 5) -> list[ResultRecord]:
    """`base-aa`, a replicate of `base` whose joint correctness differs on the first `flips` held-out
    positives of each stratum that has them (every other answer the same)."""
    twin: list[ResultRecord] = []
    flipped: dict[str, int] = {}
    for r in (r for r in records if r.arm == BASE):
        score = r.score
        if r.score.joint_correct is not None and flipped.get(r.stratum, 0) < flips:
            flipped[r.stratum] = flipped.get(r.stratum, 0) + 1
            score = score.model_copy(update={"joint_correct": not r.score.joint_correct})
        twin.append(r.model_copy(update={"arm": "base-aa", "replicate_of": BASE, "score": score}))
    return records + twin
