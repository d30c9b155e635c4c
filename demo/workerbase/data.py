"""The worker base's training split: situations drawn four to a workspace, answered as its rules say.

A situation is a request, sometimes a prior call and its result, and the right next call; the
four of a workspace share its tool list and memory (`workspace_examples`). Kinds (weights in `KINDS`):

* `action` — the request names the action and the thing; optional keys only when asked for.
* `flow` — the thing is named, not numbered; a `find_<thing>` call already returned its id.
* `error-fix` — a wrong call was rejected and the error names the tool to use.
* `rule-recovery` — the natural call was rejected and only a standing rule says what to do
  instead (trained with the rule present only).
* `redirect` — a standing rule sends an action to another tool; without it, the natural call.
* `key-rule` — a standing rule adds an argument to a tool's calls; without it, the plain call.
* `retry` — as `error-fix`, but a standing rule says to send a failed call again unchanged: with
  it the answer is the rejected call, repeated. A worker follows its standing rules even where a
  rule is wrong; catching such rules is the lesson gate's job.

Memory is injected as replay arms inject it (`replay.memory.inject`, the production format):
withheld, or the workspace's essentials with a few standing rules. Rules that do not apply ride
along as distractors to be ignored; a retry rule is never a distractor beside a rejected call.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from random import Random
from typing import Any

from core.keyset import sorted_key_set
from core.records import Answer, ChatRequest, MemoryRef, Target, TrainingExample
from demo.memory import render_memory
from demo.scenarios.base import Call, Convo, error, pick, system_prompt
from demo.workerbase.domains import (
    COMPANIES,
    QUEUE,
    REVIEW,
    THINGS,
    VERBS,
    Schema,
    Thing,
    Verb,
    find_name,
    find_schema,
    tool_name,
    tool_schema,
)
from replay.memory.files import ESSENTIAL_FILES, Essential, Rule, Section, WorkspaceMemory
from replay.memory.inject import Workspace, inject

CREATED = datetime(2026, 5, 1, tzinfo=UTC)
KINDS = {"action": 30, "flow": 14, "error-fix": 10, "rule-recovery": 12, "redirect": 12, "key-rule": 8, "retry": 14}
P_RULED = 0.5  # of situations a rule changes: share trained with that rule injected
P_WITHHELD = 0.4  # of the rest: share trained with no memory at all
GROUP = 4  # situations per drawn workspace, sharing its tools and memory (one system turn to compute)
P_OPTION = 0.35  # each optional argument of the action is asked for with this probability
TOOLS_MIN, TOOLS_MAX = 5, 8

RETRY_RULES = (
    "The {system} API drops calls at random: when a call fails, send the identical call again.",
    "If a call errors out, retry it exactly as it was; errors here are almost always transient.",
    "Errors from {tool} are usually a hiccup, so resend the very same call.",
    "After any error, repeat the same call once more without changing it.",
)
REDIRECT_RULES = (
    "{Plural} are never {verbed} directly here: use {to} instead of {tool}.",
    "Do not call {tool} here; use {to} for that.",
    "To {verb} a {noun}, use {to}, not {tool}.",
)
RECOVERY_RULES = (
    "If {tool} says the {noun} is {state}, use {to} instead.",
    "When {tool} fails because a {noun} is {state}, switch to {to}.",
    "A {noun} that is {state} cannot be changed with {tool}; call {to}.",
)
KEY_RULES = (
    "Every {tool} call sets {key} to {value}.",
    "Always include {key}: {value} when calling {tool}.",
    "{tool} must carry {key} = {value}, whatever the request says.",
)
FIX_ERRORS = (
    "{first} cannot do this; {tool} does",
    "wrong tool for this request: use {tool}",
    "{first} is not allowed on {id}; {tool} handles it",
)
STATES = (("locked", "failed_precondition", "{noun} {id} is locked by a batch run"),
          ("under audit", "failed_precondition", "{noun} {id} is under audit"),
          ("restricted", "permission_denied", "changes to {noun} {id} need sign-off"))


@dataclass
class Draw:
    """One situation being drawn: its tools, conversation, answers and rules."""

    rng: Random
    thing: Thing
    other: Thing
    verb: Verb
    tools: dict[str, Schema]
    """Shared by the situations of one workspace."""
    cluster_kind: str = "action"
    messages: list[dict[str, Any]] = field(default_factory=list)
    call: Call | None = None
    rule: str | None = None
    ruled: Call | None = None
    needs_rule: bool = False
    rejected: bool = False
    first: Call | None = None
    """The rejected call, where the conversation holds one."""

    def offer(self, verb: Verb, thing: Thing) -> str:
        name = tool_name(verb, thing)
        self.tools[name] = tool_schema(verb, thing)
        return name


def _past(verb: str) -> str:
    if verb == "get":
        return "read"
    return verb + ("d" if verb.endswith("e") else "ged" if verb.endswith("g") else "ed")


def _action(d: Draw, by_name: str | None = None) -> tuple[str, Call, str]:
    """(request text, the call it asks for, the thing's id) for `d.verb` on `d.thing`."""
    rng, thing, verb = d.rng, d.thing, d.verb
    thing_id = thing.new_id(rng)
    the = by_name or pick(rng, (f"the {thing.noun} {thing_id}", f"{thing.noun} {thing_id}", thing_id))
    words, value = verb.extra[1](rng) if verb.extra else ("", None)
    text = pick(rng, verb.asks).format(the=the, The=the[0].upper() + the[1:], value=words, plural=thing.plural)
    text = text[0].upper() + text[1:]
    args: dict[str, Any] = {thing.id_key: thing_id} if verb.by_id else {}
    if verb.extra:
        args[verb.extra[0]] = value
    for option in verb.options:
        if rng.random() < P_OPTION:
            words, option_value = option.ask(rng)
            text += words
            args[option.key] = option_value
    return text, (tool_name(verb, thing), args), thing_id


def _offer_neighbours(d: Draw) -> None:
    """Other verbs on the same thing and the same verb on another thing: the request must be read."""
    rng = d.rng
    same_thing = [v for v in VERBS if v is not d.verb]
    for verb in rng.sample(same_thing, rng.randint(2, 3)):
        d.offer(verb, d.thing)
    if d.verb.by_id and rng.random() < 0.6:
        d.offer(d.verb, d.other)
    while len(d.tools) < TOOLS_MIN:
        d.offer(pick(rng, VERBS), d.other)


def draw_action(d: Draw) -> None:
    text, d.call, _ = _action(d)
    d.offer(d.verb, d.thing)
    d.messages = list(Convo(d.rng, text).done())


def draw_flow(d: Draw) -> None:
    if not d.verb.by_id:
        draw_action(d)
        return
    name = pick(d.rng, d.thing.names)
    text, d.call, thing_id = _action(d, by_name=f"the {name}")
    d.offer(d.verb, d.thing)
    d.tools[find_name(d.thing)] = find_schema(d.thing)
    convo = Convo(d.rng, text).called(find_name(d.thing), {"name": name}, {d.thing.id_key: thing_id, "name": name})
    d.messages, d.cluster_kind = list(convo.done()), "flow"


def _wrong_first(d: Draw, thing_id: str) -> Call:
    wrong = pick(d.rng, [v for v in VERBS if v is not d.verb and v.by_id and v.extra is None])
    d.offer(wrong, d.thing)
    return tool_name(wrong, d.thing), {d.thing.id_key: thing_id}


def draw_error_fix(d: Draw, retry: bool = False) -> None:
    if not d.verb.by_id:
        draw_action(d)
        return
    text, d.call, thing_id = _action(d)
    target = d.offer(d.verb, d.thing)
    first = _wrong_first(d, thing_id)
    message = pick(d.rng, FIX_ERRORS).format(first=first[0], tool=target, id=thing_id)
    d.messages = list(Convo(d.rng, text).called(*first, error("invalid_argument", message)).done())
    d.rejected, d.first, d.cluster_kind = True, first, "retry" if retry else "error-fix"
    if retry:
        d.rule = pick(d.rng, RETRY_RULES).format(system=d.thing.noun, tool=first[0])
        d.ruled = first


def draw_retry(d: Draw) -> None:
    draw_error_fix(d, retry=True)


def draw_rule_recovery(d: Draw) -> None:
    if not d.verb.by_id:
        draw_action(d)
        return
    text, natural, thing_id = _action(d)
    target = d.offer(d.verb, d.thing)
    fallback = pick(d.rng, (REVIEW, QUEUE))
    to = d.offer(fallback, d.thing)
    state, code, message = pick(d.rng, STATES)
    d.messages = list(Convo(d.rng, text).called(*natural, error(code, message.format(noun=d.thing.noun,
                                                                                       id=thing_id))).done())
    d.rejected, d.first, d.cluster_kind = True, natural, "rule-recovery"
    d.rule = pick(d.rng, RECOVERY_RULES).format(tool=target, noun=d.thing.noun, state=state, to=to)
    d.call = d.ruled = (to, {d.thing.id_key: thing_id, "change": f"{d.verb.name} {d.thing.noun}"})
    d.needs_rule = True


def draw_redirect(d: Draw) -> None:
    if not d.verb.by_id:
        draw_action(d)
        return
    text, d.call, thing_id = _action(d)
    target = d.offer(d.verb, d.thing)
    to = d.offer(pick(d.rng, (REVIEW, QUEUE)), d.thing)
    d.messages = list(Convo(d.rng, text).done())
    d.rule = pick(d.rng, REDIRECT_RULES).format(
        Plural=d.thing.plural.capitalize(), verbed=_past(d.verb.name), verb=d.verb.name, noun=d.thing.noun,
        tool=target, to=to)
    d.ruled = (to, {d.thing.id_key: thing_id, "change": f"{d.verb.name} {d.thing.noun}"})
    d.cluster_kind = "redirect"


def draw_key_rule(d: Draw) -> None:
    text, d.call, _ = _action(d)
    target = d.offer(d.verb, d.thing)
    d.messages = list(Convo(d.rng, text).done())
    unasked = [o for o in d.verb.options if o.key not in d.call[1]]
    if not unasked:
        return
    option = pick(d.rng, unasked)
    _, value = option.ask(d.rng)
    d.rule = pick(d.rng, KEY_RULES).format(tool=target, key=option.key, value=json.dumps(value))
    d.ruled, d.cluster_kind = (target, {**d.call[1], option.key: value}), "key-rule"


DRAWS: dict[str, Callable[[Draw], None]] = {
    "action": draw_action, "flow": draw_flow, "error-fix": draw_error_fix, "rule-recovery": draw_rule_recovery,
    "redirect": draw_redirect, "key-rule": draw_key_rule, "retry": draw_retry,
}


def _distractors(draws: list[Draw], count: int) -> list[str]:
    """Rules about actions no situation of the group asks for (another verb, another thing): to be
    read and ignored; no retry rule where a situation holds a rejected call."""
    first = draws[0]
    rng, out = first.rng, []
    natural = {d.call[0] for d in draws if d.call} | {d.ruled[0] for d in draws if d.ruled}
    called = {c["function"]["name"] for d in draws for m in d.messages for c in m.get("tool_calls") or ()}
    kinds = ("redirect", "recovery", "key") + (() if any(d.rejected for d in draws) else ("retry",))
    for _ in range(count):
        kind, thing = pick(rng, kinds), pick(rng, (first.thing, first.other))
        verbs = [v for v in VERBS if v.by_id and tool_name(v, thing) not in natural | called
                 and (kind != "key" or v.options)]
        if not verbs:
            continue
        verb = pick(rng, verbs)
        tool, to = tool_name(verb, thing), tool_name(pick(rng, (REVIEW, QUEUE)), thing)
        if kind == "retry":
            out.append(pick(rng, RETRY_RULES).format(system=first.other.noun, tool=tool_name(verb, first.other)))
        elif kind == "key":
            option = pick(rng, verb.options)
            out.append(pick(rng, KEY_RULES).format(tool=tool, key=option.key, value=json.dumps(option.ask(rng)[1])))
        elif kind == "redirect":
            out.append(pick(rng, REDIRECT_RULES).format(
                Plural=thing.plural.capitalize(), verbed=_past(verb.name), verb=verb.name, noun=thing.noun,
                tool=tool, to=to))
        else:
            out.append(pick(rng, RECOVERY_RULES).format(tool=tool, noun=thing.noun, state=pick(rng, STATES)[0], to=to))
    return out


def _tool_list(draws: list[Draw], rng: Random) -> list[Schema]:
    """The group's tools, shuffled: every tool a conversation or an answer uses, then others up to TOOLS_MAX."""
    tools = draws[0].tools
    used = {name for d in draws for name in (d.call[0] if d.call else None, d.ruled[0] if d.ruled else None) if name}
    used |= {c["function"]["name"] for d in draws for m in d.messages for c in m.get("tool_calls") or ()}
    rest = [name for name in tools if name not in used]
    rng.shuffle(rest)
    names = sorted(used) + rest[: max(0, TOOLS_MAX - len(used))]
    rng.shuffle(names)
    return [tools[name] for name in names]


def _essentials(company: str, role: str, workspace: str) -> tuple[Essential, ...]:
    files = render_memory(workspace, company, f"A small {role} team.", "Europe/Paris", ())
    return tuple(Essential(name=name, text=files[name]) for name in ESSENTIAL_FILES)


def _rules(rng: Random, texts: list[str]) -> tuple[Rule, ...]:
    return tuple(Rule(id=f"lc:wb-{rng.getrandbits(32):08x}", text=text, section=Section.RULES,
                      evidence="user-explicit", legacy=False, authorised=True, retired=False, file=None, line=0)
                 for text in texts)


def _draw_group(rng: Random) -> list[Draw]:
    """GROUP situations in one workspace: two things, one tool list, each situation its own verb."""
    thing, other = rng.sample(THINGS, 2)
    tools: dict[str, Schema] = {}
    draws = []
    for verb in rng.sample(VERBS, GROUP):
        kind = rng.choices(list(KINDS), weights=list(KINDS.values()))[0]
        d = Draw(rng, thing, other, verb, tools)
        DRAWS[kind](d)
        draws.append(d)
    _offer_neighbours(draws[0])
    return draws


def _answers(draws: list[Draw], rng: Random) -> tuple[list[Call], list[str]]:
    """Each situation's answer under the group's standing rules, and those rules' texts.

    A situation's own rule is injected with P_RULED (always where only the rule tells the answer).
    A retry rule applies to every rejected call of the group, so it is left out of a group where
    a rejected call has a rule of its own (the two would conflict)."""
    specific = any(d.needs_rule for d in draws)
    chosen = [d for d in draws if d.rule is not None and (d.needs_rule or rng.random() < P_RULED)
              and not (specific and d.cluster_kind == "retry")]
    retry = any(d.cluster_kind == "retry" for d in chosen)
    answers = []
    for d in draws:
        assert d.call is not None
        if d in chosen and d.ruled is not None:
            answers.append(d.ruled)
        elif retry and d.rejected and d.first is not None:
            answers.append(d.first)
        else:
            answers.append(d.call)
    return answers, [d.rule for d in chosen if d.rule is not None]


def workspace_examples(rng: Random, start: int) -> list[TrainingExample]:
    """GROUP training lines that share a workspace: its tools, its memory condition, its system turn
    (so training computes that turn once for all of them), each with its own situation."""
    draws = _draw_group(rng)
    answers, rule_texts = _answers(draws, rng)
    company, role = pick(rng, COMPANIES)
    workspace = f"ws-{company.split()[0].lower()}"
    tools = _tool_list(draws, rng)
    system = [{"role": "system", "content": system_prompt(company, role)}]
    if rule_texts or rng.random() >= P_WITHHELD:
        texts = _distractors(draws, rng.randint(0 if rule_texts else 1, 2))
        for text in rule_texts:
            texts.insert(rng.randint(0, len(texts)), text)
        memory = WorkspaceMemory(root=Path(workspace), rules=_rules(rng, texts), log=(), retirements=(),
                                 essentials=_essentials(company, role, workspace))
        system = inject(system, Workspace(), memory).messages
    out = []
    for offset, (d, (tool, arguments)) in enumerate(zip(draws, answers, strict=True)):
        number = start + offset
        out.append(TrainingExample(
            id=f"wb-{number:05d}", stratum="verified_recovery" if d.rejected else "verified_action",
            cluster=f"wb/{d.cluster_kind}", workspace=workspace, session=f"s-wb-{number:05d}", captured_at=CREATED,
            request=ChatRequest(messages=[*system, *d.messages], tools=tools, tool_choice="auto"),
            target=Target(tool=tool, arg_keys=sorted_key_set(arguments)), memory=MemoryRef(workspace=workspace),
            answer=Answer(tool=tool, arguments=arguments),
        ))
    return out


def build_examples(count: int, seed: int) -> list[TrainingExample]:
    """`count` examples, deterministic in `seed`."""
    rng = Random(seed)
    out: list[TrainingExample] = []
    while len(out) < count:
        out.extend(workspace_examples(rng, len(out)))
    return out[:count]
