"""The planted-effect endpoint (DESIGN §10): a calibration instrument, always labelled *planted*.

An OpenAI-compatible chat-completions server on loopback whose answers come from a seeded policy
over a suite's known answers, so the effect every arm and rule has is known in advance and a
verdict can be checked against it. It is never a stand-in for the engine anywhere else.

The policy sees only the request, as a model does:

* the decision is found by a hash of the request messages with the injected memory footer
  (`<memory>` / `<standing_rules>`, see `replay.memory.inject`) cut off the system prompt;
* the injected rule ids are read from the `<standing_rules>` block, in the injection's own format;
* the arm is the request's `model` (its planted behaviour) and the rules it carries.

Every draw comes from RNGs seeded by (spec seed, the request's `seed`, model, decision id and,
but for the model's own answer, the injected rule ids), never from call order, so concurrency and
retries do not change an answer, and a simulation that calls `planted_kind` directly gets exactly
the answers the server gives.
Per decision: each planted rule the request carries and that concerns the decision is followed
with its probability (in the spec's order; the first followed wins) and answers what it says;
otherwise the arm answers right, repeats the rejected call, or answers malformed with its
probabilities, and otherwise makes a wrong call. A request that is no decision's may be a sandbox
episode's: `episodes.PlantedEpisodes` answers those (`planted_app`'s `episodes`).
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import re
import threading
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from random import Random
from typing import Any, Literal, Protocol, TypeVar

from aiohttp import web
from pydantic import Field, model_validator

from core.keyset import LIST, ArgumentsError, canonical_json, decode_arguments, split_path
from core.names import Name, excerpt
from core.records import Decision, Strict
from replay.errors import ReplayError
from replay.memory.inject import MEMORY_OPEN, RULES_CLOSE, RULES_OPEN

PLANTED = "planted"
Kind = Literal["right", "repeat", "malformed", "wrong"]
Drawn = TypeVar("Drawn")
MALFORMED_TEXT = '<tool_call>{"name": '
_END = object()
_RULE_LINE_RE = re.compile(r"^- .*<!-- (\S+)(?: evidence:\S+)? -->$")


class PlantedError(ReplayError, ValueError):
    """A planted spec or request the planted endpoint cannot answer."""


class ArmBehaviour(Strict):
    """What one served `model` does on a decision no followed rule decides."""

    model: Name
    right: float = Field(ge=0, le=1)
    """The recorded call (tool + key set; no call where none was recorded)."""
    repeat: float = Field(0.0, ge=0, le=1)
    """The call just rejected (the known failure's action, else the request's last assistant call)."""
    malformed: float = Field(0.0, ge=0, le=1)
    """An unreadable tool call. The rest of the mass is a wrong call (another tool)."""

    @model_validator(mode="after")
    def _mass(self) -> ArmBehaviour:
        check_mass(self.model, {"right": self.right, "repeat": self.repeat, "malformed": self.malformed})
        return self


class RuleBehaviour(Strict):
    """What one rule does when injected and followed, on the decisions it concerns."""

    id: str = Field(pattern=r"^lc:\S+$")
    follow: float = Field(ge=0, le=1)
    does: Literal["right", "repeat", "wrong"]
    strata: list[str] | None = None
    """Only decisions of these strata (None: every decision that carries the rule)."""
    clusters: list[str] | None = None
    """Only decisions of these clusters (None: any)."""

    def concerns(self, decision: Decision) -> bool:
        return ((self.strata is None or decision.stratum in self.strata)
                and (self.clusters is None or decision.cluster in self.clusters))


class PlantedSpec(Strict):
    seed: int = 0
    prompt_sensitivity: float = Field(1.0, ge=0, le=1)
    """How often injecting other rules redraws a model's own answer on a decision (1: every memory
    condition answers independently; 0: a model answers a decision the same whatever rules it
    carries, unless it follows one, as a greedy model whose prompt change does not matter)."""
    arms: list[ArmBehaviour] = Field(min_length=1)
    rules: list[RuleBehaviour] = Field(default_factory=list)

    @model_validator(mode="after")
    def _unique(self) -> PlantedSpec:
        for what, names in (("model", [a.model for a in self.arms]), ("rule", [r.id for r in self.rules])):
            twice = sorted({n for n in names if names.count(n) > 1})
            if twice:
                raise ValueError(f"each {what} is planted once: {', '.join(twice)} twice")
        return self

    def arm(self, model: str) -> ArmBehaviour:
        for arm in self.arms:
            if arm.model == model:
                return arm
        raise PlantedError(f"no planted behaviour for model {excerpt(model)}")


# ── the policy ───────────────────────────────────────────────────────────────


def planted_kind(spec: PlantedSpec, seed: int, model: str, decision: Decision, rule_ids: Sequence[str]) -> Kind:
    """The kind of answer the planted `model` gives on `decision` carrying `rule_ids` (seeded, order-free)."""
    own = f"{spec.seed}|{seed}|{model}|{decision.id}"
    rng = seeded_rng(f"{own}|{','.join(sorted(rule_ids))}")
    carried = set(rule_ids)
    for rule in spec.rules:
        if rule.id in carried and rule.concerns(decision) and rng.random() < rule.follow:
            return rule.does
    arm = spec.arm(model)
    # The model's own answer, the same under every memory condition unless the prompt's change redraws it.
    u = rng.random() if rng.random() < spec.prompt_sensitivity else seeded_rng(own).random()
    own_answers: tuple[tuple[Kind, float], ...] = (("right", arm.right), ("repeat", arm.repeat),
                                                   ("malformed", arm.malformed))
    return categorical(u, own_answers, "wrong")


def categorical(u: float, outcomes: Sequence[tuple[Drawn, float]], rest: Drawn) -> Drawn:
    """The outcome a uniform draw `u` falls on, the outcomes' probabilities laid end to end; `rest` past them."""
    edge = 0.0
    for outcome, probability in outcomes:
        edge += probability
        if u < edge:
            return outcome
    return rest


def check_mass(model: str, probabilities: Mapping[str, float]) -> None:
    """A planted model's outcome probabilities may not exceed 1 together (the rest is the last outcome)."""
    if sum(probabilities.values()) > 1 + 1e-9:
        raise ValueError(f"model {model}: {' + '.join(probabilities)} exceed 1")


def seeded_rng(key: str) -> Random:
    """A generator seeded by the hash of `key`: the same key, the same draws, in any process."""
    return Random(int.from_bytes(hashlib.sha256(key.encode()).digest()[:8], "big"))


def answer_message(kind: Kind, decision: Decision) -> dict[str, Any]:
    """The assistant message of one answer kind on `decision` (OpenAI chat shape)."""
    if kind == "malformed":
        return {"role": "assistant", "content": MALFORMED_TEXT}
    call = _call(kind, decision)
    if call is None:
        return {"role": "assistant", "content": "Nothing to call."}
    tool, arguments = call
    return {"role": "assistant", "content": None, "tool_calls": [{
        "id": "call_planted", "type": "function",
        "function": {"name": tool, "arguments": json.dumps(arguments, sort_keys=True)}}]}


def _call(kind: Kind, decision: Decision) -> tuple[str, dict[str, Any]] | None:
    target, failed = decision.target, decision.failed_action
    if kind == "repeat":
        rejected = _rejected_call(decision)
        if rejected is not None:
            return rejected
        kind = "wrong"
    if kind == "right":
        if target is not None:
            return None if target.tool is None else (target.tool, arguments_of(target.arg_keys))
        # No recorded call (a known failure): any call but the failed tool is not a repeat.
        return _other_tool(decision, {failed.tool} if failed is not None else set())
    avoid = {t for t in (target.tool if target else None, failed.tool if failed else None) if t}
    return _other_tool(decision, avoid)


def _other_tool(decision: Decision, avoid: set[str]) -> tuple[str, dict[str, Any]] | None:
    names = [t.get("function", {}).get("name") for t in decision.request.tools]
    other = next((n for n in names if isinstance(n, str) and n not in avoid), None)
    return None if other is None else (other, {})


def _rejected_call(decision: Decision) -> tuple[str, dict[str, Any]] | None:
    failed = decision.failed_action
    if failed is not None:
        return failed.tool, failed.arguments if failed.arguments is not None else arguments_of(failed.arg_keys or ())
    for message in reversed(decision.turn):
        calls = message.get("tool_calls") if message.get("role") == "assistant" else None
        if calls:
            function = calls[0].get("function", {})
            try:
                arguments = decode_arguments(function.get("arguments") or "{}")
            except ArgumentsError:
                arguments = {}  # the rejected call's name is what a repeat repeats; its unreadable values are lost
            return str(function.get("name")), arguments
    return None


def arguments_of(keys: Sequence[str]) -> dict[str, Any]:
    """An arguments object whose key set is exactly `keys` (the inverse of `core.keyset.key_set`)."""
    root: dict[str, Any] = {}
    for path in sorted(keys, key=lambda k: len(split_path(k))):
        steps = split_path(path)
        node: Any = root
        for i, step in enumerate(steps):
            following = steps[i + 1] if i + 1 < len(steps) else _END
            child: Any = "x" if following is _END else [] if following is LIST else {}
            if step is LIST:  # node is a list: an element of the kind that follows (object or list) holds it
                same = next((e for e in node if type(e) is type(child)), None)
                if same is None:
                    node.append(child)
                    same = child
                node = same
            else:
                if step not in node or (following is not _END and type(node[step]) is not type(child)):
                    node[step] = child
                node = node[step]
    return root


# ── reading a request ────────────────────────────────────────────────────────


def request_key(messages: Sequence[Mapping[str, Any]]) -> str:
    """Hash of the messages with any injected memory footer cut off the system prompt."""
    bare = []
    for message in messages:
        if message.get("role") == "system":
            content = _strip_footer(message.get("content"))
            if not content:
                continue
            message = {**message, "content": content}
        bare.append(message)
    return hashlib.sha256(canonical_json(bare).encode()).hexdigest()


def _strip_footer(content: Any) -> Any:
    if isinstance(content, list):
        return [p for p in content if not (isinstance(p, dict) and _footer_at(str(p.get("text", ""))) == 0)]
    text = str(content or "")
    cut = _footer_at(text)
    return text if cut is None else text[:cut].rstrip()


def _footer_at(text: str) -> int | None:
    found = [i for i in (text.find(MEMORY_OPEN), text.find(RULES_OPEN)) if i >= 0]
    return min(found) if found else None


def injected_rule_ids(messages: Sequence[Mapping[str, Any]]) -> tuple[str, ...]:
    """Rule ids of the `<standing_rules>` block of the system prompt, in the injection's format."""
    system = next((m for m in messages if m.get("role") == "system"), None)
    if system is None:
        return ()
    content = system.get("content")
    text = "\n".join(str(p.get("text", "")) for p in content if isinstance(p, dict)) if isinstance(
        content, list) else str(content or "")
    start, end = text.find(RULES_OPEN), text.find(RULES_CLOSE)
    if start < 0 or end < start:
        return ()
    lines = text[start + len(RULES_OPEN):end].splitlines()
    return tuple(m.group(1) for line in lines if (m := _RULE_LINE_RE.match(line)))


# ── the server ───────────────────────────────────────────────────────────────


class EpisodePolicy(Protocol):
    """Answers the requests of sandbox episodes (`episodes.PlantedEpisodes`)."""

    @property
    def models(self) -> frozenset[str]: ...

    def answer(self, seed: int, model: str, messages: Sequence[Mapping[str, Any]]) -> dict[str, Any] | None:
        """The assistant message, or None when the request is no episode's."""
        ...


@dataclass(frozen=True)
class PlantedEndpoint:
    base_url: str
    """Up to `/v1`, for a run config's `[endpoint]`."""


def _error(status: int, message: str, code: str) -> web.Response:
    kind = "invalid_request_error" if status < 500 else "server_error"
    return web.json_response({"error": {"message": message, "type": kind, "code": code}}, status=status)


def planted_app(spec: PlantedSpec, decisions: Sequence[Decision],
                episodes: EpisodePolicy | None = None) -> web.Application:
    """The aiohttp app: GET /v1/models and POST /v1/chat/completions, answers from the policy (and
    from `episodes` for a request that is no decision's)."""
    served = [a.model for a in spec.arms] + sorted((episodes.models if episodes else frozenset())
                                                   - {a.model for a in spec.arms})
    by_key: dict[str, Decision] = {}
    for d in decisions:
        twin = by_key.setdefault(request_key(d.turn), d)
        if twin is not d:
            raise PlantedError(f"decisions {twin.id} and {d.id} send the same request: the planted endpoint, like a "
                               "model, cannot tell them apart (calibrate with end_to_end = 0)")

    async def models(_: web.Request) -> web.Response:
        return web.json_response({"object": "list", "data": [
            {"id": model, "object": "model", "owned_by": PLANTED} for model in served]})

    async def chat(request: web.Request) -> web.Response:
        try:
            body = await request.json()
        except (json.JSONDecodeError, UnicodeDecodeError):
            return _error(400, "the body is not JSON", "invalid_json")
        if not isinstance(body, dict) or not isinstance(body.get("messages"), list):
            return _error(400, "the body needs a messages list", "invalid_request")
        model = body.get("model")
        if not isinstance(model, str) or model not in served:
            return _error(404, f"model {excerpt(str(model))} is not planted here", "model_not_found")
        messages = [m for m in body["messages"] if isinstance(m, dict)]
        seed = body.get("seed")
        if not isinstance(seed, int):
            seed = 0
        decision = by_key.get(request_key(messages))
        message: dict[str, Any] | None
        if decision is not None and model in {a.model for a in spec.arms}:
            message = answer_message(planted_kind(spec, seed, model, decision, injected_rule_ids(messages)), decision)
        else:
            message = _episode_answer(episodes, seed, model, messages)
        if message is None:
            return _error(400, "the request matches no decision or scenario planted here", "unknown_request")
        return web.json_response({
            "id": f"planted-{model}", "object": "chat.completion", "model": model,
            "system_fingerprint": PLANTED,
            "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0},
        }, headers={"X-Calibration": PLANTED})

    app = web.Application()
    app.router.add_get("/v1/models", models)
    app.router.add_post("/v1/chat/completions", chat)
    return app


def _episode_answer(episodes: EpisodePolicy | None, seed: int, model: str,
                    messages: Sequence[Mapping[str, Any]]) -> dict[str, Any] | None:
    if episodes is None or model not in episodes.models:
        return None
    return episodes.answer(seed, model, messages)


@contextmanager
def serve_planted(spec: PlantedSpec, decisions: Sequence[Decision],
                  episodes: EpisodePolicy | None = None) -> Iterator[PlantedEndpoint]:
    """Serve the planted endpoint on a free loopback port in a background thread, for the block's duration."""
    app = planted_app(spec, decisions, episodes)
    loop = asyncio.new_event_loop()
    runner = web.AppRunner(app, access_log=None)
    loop.run_until_complete(runner.setup())
    site = web.TCPSite(runner, "127.0.0.1", 0)
    loop.run_until_complete(site.start())
    port = runner.addresses[0][1]
    thread = threading.Thread(target=loop.run_forever, name="planted-endpoint", daemon=True)
    thread.start()
    try:
        yield PlantedEndpoint(f"http://127.0.0.1:{port}/v1")
    finally:
        loop.call_soon_threadsafe(loop.stop)
        thread.join()
        loop.run_until_complete(runner.cleanup())
        loop.close()
