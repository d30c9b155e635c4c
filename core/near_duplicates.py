"""The near-duplicate rule (DESIGN §12; issue 60, after Tülu 3's decontamination): curation's eval boundary and the
gate's contamination check (replay/analysis/contamination.py) apply this one.

A suite decision (the test item) is contaminated by a training candidate when more than `threshold` of the
decision's distinct word 8-grams appear in the candidate's. The direction is Tülu 3's — the share is of the
test item's n-grams — but it is judged per candidate, not against the union of the set, so the candidate that
carries the overlap is the one refused. Pure functions, no I/O.

What is compared is the *decision state*: the conversation (user and assistant turns, tool calls with their
arguments, tool results), never the system prompt, the tool definitions or the runtime's `<system-reminder>`
blocks, which every session of an agent shares and would make any two decisions alike. Tokens are runs of
word characters (`\\w+`), case-folded: whitespace, punctuation and JSON quoting do not count. A text shorter
than `n` tokens is one n-gram of all its tokens (only an exact token copy matches it).
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Iterator, Sequence
from typing import Any

NGRAM = 8
THRESHOLD = 0.5
WORD = re.compile(r"\w+")
REMINDER = re.compile(r"<system-reminder>.*?</system-reminder>", re.DOTALL)
INSTRUCTION_ROLES = frozenset({"system", "developer"})
STRUCTURAL = frozenset({"type", "id", "tool_use_id", "tool_call_id", "role", "signature", "cache_control"})
"""Keys whose values name a block's kind or an id the runtime minted: a copy in another session differs there."""


def _strings(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, list):
        for item in value:
            yield from _strings(item)
    elif isinstance(value, dict):
        for key, item in value.items():
            if key == "input" and isinstance(item, dict):
                yield json.dumps(item, sort_keys=True)  # a call's argument names count, as in a JSON string
            elif key not in STRUCTURAL:
                yield from _strings(item)


def state_text(request: dict[str, Any]) -> str:
    """The decision state's text of a request (Anthropic Messages or OpenAI chat, as dumped to JSON)."""
    messages = [m for m in request.get("messages") or [] if isinstance(m, dict)
                and m.get("role") not in INSTRUCTION_ROLES]
    return REMINDER.sub(" ", "\n".join(_strings(messages)))


def ngrams(text: str, n: int = NGRAM) -> frozenset[tuple[str, ...]]:
    tokens = WORD.findall(text.casefold())
    if len(tokens) < n:
        return frozenset({tuple(tokens)}) if tokens else frozenset()
    return frozenset(tuple(tokens[i:i + n]) for i in range(len(tokens) - n + 1))


class NearDuplicates:
    """The n-grams of the excluded decisions, indexed so one candidate is checked against all at once."""

    def __init__(self, texts: Sequence[str], n: int = NGRAM, threshold: float = THRESHOLD) -> None:
        self.n, self.threshold = n, threshold
        self._sizes: list[int] = []
        self._index: dict[tuple[str, ...], list[int]] = {}
        for number, text in enumerate(texts):
            grams = ngrams(text, n)
            self._sizes.append(len(grams))
            for gram in grams:
                self._index.setdefault(gram, []).append(number)

    def matches(self, text: str) -> list[int]:
        """The indexes of the excluded texts that `text` covers more than the threshold of."""
        shared = Counter(i for gram in ngrams(text, self.n) for i in self._index.get(gram, ()))
        return sorted(i for i, count in shared.items() if count > self.threshold * self._sizes[i])
