"""Prompts the target engine cannot hold, found when a suite is built, not as 400s or cut answers in a run.

The engine does the counting, so the number is the one it refuses by: vLLM's `/tokenize` renders a chat
request with the engine's own chat template and tools, and `/v1/messages/count_tokens` counts a Messages
request after the engine's own conversion; `/v1/models` gives `max_model_len`. A decision whose prompt
leaves fewer than `answer_tokens` of the context is left out with why. The recorded request carries no
memory block: an arm that injects memory adds its tokens, so `answer_tokens` is the room kept for both.
vLLM counts no Responses request; those decisions are kept and counted as unchecked.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import httpx

from core.names import excerpt
from core.records import Decision
from replay.suite import SuiteError

COUNTED = {"chat": ("/tokenize", "count"), "messages": ("/v1/messages/count_tokens", "input_tokens")}
"""Per API: the engine's counting endpoint and the field of its answer that holds the prompt's tokens."""


@dataclass
class EngineContext:
    """The context of one running engine, and what it has counted so far."""

    url: str
    model: str
    max_model_len: int
    answer_tokens: int
    client: httpx.Client
    largest: int = 0
    """The longest prompt counted that fits."""
    unchecked: int = 0
    """Decisions on an API the engine does not count."""

    def __call__(self, decision: Decision) -> str | None:
        """Why the decision is left out (its prompt leaves too little room), or None to keep it."""
        api = decision.wire.api
        if api not in COUNTED:
            self.unchecked += 1
            return None
        path, field = COUNTED[api]
        request = decision.request.model_dump(exclude_none=True)
        body = {"model": self.model, **{k: v for k, v in request.items() if k in ("system", "messages", "tools")}}
        if api == "chat":
            body["add_generation_prompt"] = True
        answer = self._post(path, body)
        if isinstance(answer, str):
            return f"the engine could not count its prompt ({answer})"
        tokens = answer.get(field)
        if not isinstance(tokens, int) or isinstance(tokens, bool):
            raise SuiteError(f"{self.url}{path}: the answer has no token count ({excerpt(str(answer))}); nothing "
                             "written", [])
        limit = self.max_model_len - self.answer_tokens
        if tokens > limit:
            return (f"prompt over {limit} tokens (the engine's context of {self.max_model_len} less "
                    f"{self.answer_tokens} for the answer)")
        self.largest = max(self.largest, tokens)
        return None

    def _post(self, path: str, body: dict[str, Any]) -> dict[str, Any] | str:
        """The engine's JSON answer, or for a 4xx the reason it gave (that decision's prompt is at fault)."""
        try:
            response = self.client.post(f"{self.url}{path}", json=body)
        except httpx.HTTPError as exc:
            raise _unreachable(self.url, exc) from None
        if 400 <= response.status_code < 500:
            return f"HTTP {response.status_code}: {excerpt(response.text)}"
        return _json(response, f"{self.url}{path}")

    def summary(self) -> str:
        line = (f"context: prompts counted by the engine at {self.url} ({self.model}): {self.max_model_len} tokens, "
                f"{self.answer_tokens} kept for the answer; the longest prompt kept is {self.largest} tokens")
        if self.unchecked:
            line += f"; {self.unchecked} Responses decision(s) not checked (vLLM counts chat and Messages prompts only)"
        return line


def engine_context(url: str, answer_tokens: int, timeout_s: float = 60.0) -> EngineContext:
    """The context of the engine at `url` (vLLM's own server, as `curl URL/health` reaches it); a SuiteError
    when it cannot be reached or does not say its context."""
    url = url.rstrip("/").removesuffix("/v1")
    if answer_tokens < 1:
        raise SuiteError(f"--answer-tokens must be at least 1, not {answer_tokens}", [])
    client = httpx.Client(timeout=timeout_s)
    try:
        answer = _json(client.get(f"{url}/v1/models"), f"{url}/v1/models")
    except httpx.HTTPError as exc:
        client.close()
        raise _unreachable(url, exc) from None
    data = answer.get("data")
    data = data if isinstance(data, list) else []
    base = [m for m in data if isinstance(m, dict) and isinstance(m.get("id"), str) and not m.get("parent")]
    windows = [m["max_model_len"] for m in base if isinstance(m.get("max_model_len"), int)]
    if not base or not windows:
        client.close()
        raise SuiteError(f"{url}/v1/models names no model with its max_model_len: is {url} a vLLM engine (not the "
                         "gateway)?", [])
    if min(windows) <= answer_tokens:
        client.close()
        raise SuiteError(f"the engine's context ({min(windows)} tokens) leaves no room beside --answer-tokens "
                         f"{answer_tokens}", [])
    return EngineContext(url, base[0]["id"], min(windows), answer_tokens, client)


def _json(response: httpx.Response, where: str) -> dict[str, Any]:
    if response.status_code != 200:
        raise SuiteError(f"{where}: HTTP {response.status_code} ({excerpt(response.text)}); nothing written", [])
    try:
        answer = response.json()
    except ValueError:
        answer = None
    if not isinstance(answer, dict):
        raise SuiteError(f"{where}: the answer is not a JSON object ({excerpt(response.text)}); nothing written", [])
    return answer


def _unreachable(url: str, exc: httpx.HTTPError) -> SuiteError:
    return SuiteError(f"cannot count prompts on the engine at {url} ({type(exc).__name__}: {excerpt(str(exc))}); "
                      "is it running? nothing written", [])
