"""Planted training rows of known overlap with a suite's decisions, for the gate's contamination check
(replay/analysis/contamination.py; `scripts/bench_contamination.py`).

The population is the demo suite's 84 decisions, read as the gate reads a suite (`lineage.judged_decisions`). A
planted row of overlap `p` holds a contiguous run of `p` of a decision's words (at a seeded offset), and fills
the rest of the decision's length with the words of a decision of another task (another first user turn) in a
seeded shuffle (so the filler copies no decision's word sequence itself), the run put at a seeded place among
them: a training example that copied part of a held-out decision's state. It
carries no session and no request hash, so only the near-duplicate rule can find it. Recall at `p`: the share of
decisions their planted row reaches. False flags: the decisions of other tasks a planted row reaches, of all
the other-task decisions it was checked against."""

from __future__ import annotations

import json
import random
from dataclasses import dataclass

from core.near_duplicates import NGRAM, THRESHOLD, WORD
from demo.demo_data import build_demo
from replay.analysis.contamination import JudgedDecision, SourceRow, contamination
from replay.analysis.training_lineage import judged_decisions

OVERLAPS = (1.0, 0.9, 0.8, 0.7, 0.6, 0.5, 0.4, 0.3)


@dataclass(frozen=True)
class OverlapRow:
    overlap: float
    found: int
    planted: int
    flagged: int
    unrelated: int


def suite_decisions(seed: int = 0) -> tuple[list[JudgedDecision], list[str]]:
    """The demo suite's decisions as the gate reads them, and each one's task (its first user turn)."""
    suite, _ = build_demo(seed)
    tasks = [json.dumps(next(m for m in d.request.model_dump(mode="json")["messages"] if m["role"] == "user"))
             for d in suite]
    return judged_decisions(suite), tasks


def planted(decision: JudgedDecision, filler: JudgedDecision, overlap: float, rng: random.Random) -> str:
    """`overlap` of the decision's words, contiguous, set among the filler's words (shuffled) to the decision's
    length."""
    words, other = WORD.findall(decision.text.casefold()), WORD.findall(filler.text.casefold())
    kept = round(overlap * len(words))
    start = rng.randrange(len(words) - kept + 1)
    rng.shuffle(other)
    padding = [other[i % len(other)] for i in range(len(words) - kept)]
    at = rng.randrange(len(padding) + 1)
    return " ".join([*padding[:at], *words[start:start + kept], *padding[at:]])


def measure(seed: int = 0, n: int = NGRAM, threshold: float = THRESHOLD) -> list[OverlapRow]:
    """Per overlap, each decision planted once (its filler a seeded decision of another task) and the row
    checked against the whole suite."""
    decisions, tasks = suite_decisions()
    rng = random.Random(seed)
    rows = []
    for overlap in OVERLAPS:
        found = flagged = unrelated = 0
        for number, decision in enumerate(decisions):
            others = [i for i in range(len(decisions)) if tasks[i] != tasks[number]]
            text = planted(decision, decisions[rng.choice(others)], overlap, rng)
            reached = {c.decision for c in contamination(decisions, [SourceRow(1, "planted", None, None, text)],
                                                         n, threshold)}
            found += decision.id in reached
            flagged += sum(decisions[i].id in reached for i in others)
            unrelated += len(others)
        rows.append(OverlapRow(overlap, found, len(decisions), flagged, unrelated))
    return rows
