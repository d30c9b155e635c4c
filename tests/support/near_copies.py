"""Planted near-copies of suite decisions, for the near-duplicate rule's recall and false-positive rate
(core/near_duplicates.py; `scripts/bench_near_duplicates.py`).

The population is the demo suite's 84 generated decisions (invoicing tasks of one agent, each its own
conversation). A near-copy is a decision's request as another session would hold it, with one small edit of a
known kind, drawn from a seeded generator: `id` (one identifier changed in one place), `reword` (one sentence
of the user's reworded: a word dropped, two words swapped, a word added), `whitespace` (every run of spaces
and newlines changed), and `all` (the three at once). An unrelated decision is any other decision of the suite
whose first user turn differs (another task)."""

from __future__ import annotations

import json
import random
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from core.near_duplicates import NGRAM, THRESHOLD, NearDuplicates, state_text
from demo.demo_data import build_demo

IDENTIFIER = re.compile(r"\b(?:[A-Z]{2,}-[\d-]+|cus_\d+|\d{3,})\b")
FILLERS = ("please", "now", "also", "quickly", "again")
Request = dict[str, Any]


def suite_requests(seed: int = 0) -> list[Request]:
    suite, _ = build_demo(seed)
    return [d.request.model_dump(mode="json", exclude_none=True) for d in suite]


def _edit_strings(value: Any, edit: Callable[[str], str]) -> Any:
    if isinstance(value, str):
        return edit(value)
    if isinstance(value, list):
        return [_edit_strings(v, edit) for v in value]
    if isinstance(value, dict):
        return {k: _edit_strings(v, edit) if k not in ("role", "type", "id", "tool_call_id") else v
                for k, v in value.items()}
    return value


def change_id(request: Request, rng: random.Random) -> Request:
    """One identifier occurrence (an invoice, a customer, a number) changed to another value."""
    text = json.dumps(request)
    found = list(IDENTIFIER.finditer(text))
    if not found:
        return request
    match = rng.choice(found)
    new = re.sub(r"\d", lambda _: str(rng.randrange(10)), match.group())
    return dict(json.loads(text[:match.start()] + new + text[match.end():]))


def reword(request: Request, rng: random.Random) -> Request:
    """The first user turn's text: a word dropped, two neighbours swapped, a filler added."""
    messages = [dict(m) for m in request["messages"]]
    first = next(m for m in messages if m["role"] == "user" and isinstance(m.get("content"), str))
    words = first["content"].split()
    if len(words) > 3:
        words.pop(rng.randrange(len(words)))
        i = rng.randrange(len(words) - 1)
        words[i], words[i + 1] = words[i + 1], words[i]
    words.insert(rng.randrange(len(words) + 1), rng.choice(FILLERS))
    first["content"] = " ".join(words)
    return {**request, "messages": messages}


def respace(request: Request, rng: random.Random) -> Request:
    """Every run of whitespace in the conversation replaced by one of other widths and kinds."""
    return {**request, "messages": _edit_strings(request["messages"],
                                                 lambda s: re.sub(r"\s+", lambda _: rng.choice(["  ", "\n", "\t "]), s))}


EDITS: dict[str, Callable[[Request, random.Random], Request]] = {
    "id": change_id, "reword": reword, "whitespace": respace,
    "all": lambda r, rng: respace(reword(change_id(r, rng), rng), rng)}


@dataclass
class Tally:
    found: int = 0
    planted: int = 0
    misses: list[str] = field(default_factory=list)


@dataclass
class Measure:
    recall: dict[str, Tally]
    flagged: int
    unrelated: int
    false: list[tuple[int, int]]


def measure(seed: int = 0, n: int = NGRAM, threshold: float = THRESHOLD) -> Measure:
    """Each decision planted once per kind of edit and checked against the suite; each decision checked against
    every unrelated one."""
    requests = suite_requests()
    texts = [state_text(r) for r in requests]
    index = NearDuplicates(texts, n, threshold)
    rng = random.Random(seed)
    recall = {kind: Tally() for kind in EDITS}
    for number, request in enumerate(requests):
        for kind, edit in EDITS.items():
            recall[kind].planted += 1
            if number in index.matches(state_text(edit(request, rng))):
                recall[kind].found += 1
            else:
                recall[kind].misses.append(f"{kind}: decision {number}")
    task = [json.dumps(next(m for m in r["messages"] if m["role"] == "user")) for r in requests]
    false, unrelated = [], 0
    for number, text in enumerate(texts):
        hits = set(index.matches(text))
        for other in range(len(texts)):
            if other != number and task[other] != task[number]:
                unrelated += 1
                if other in hits:
                    false.append((number, other))
    return Measure(recall, len(false), unrelated, false)
