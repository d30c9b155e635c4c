"""Memory conditions of a replay arm, and injecting them into a request as production does.

Production (001 S8, DESIGN §5) appends workspace memory to the system prompt:

    <original system prompt>

    <memory>
    [memory/profile.md]
    ...
    </memory>

    <standing_rules>
    Every rule below is mandatory.
    - Never place an anchor inside a bulleted list item. <!-- lc:anchor-placement evidence:user-explicit -->
    </standing_rules>

The essentials come first and the standing rules last: the rules are a *footer*, and a rule
read last is not buried under the essentials. Each block is present only when non-empty.
A request without a system message gets one, first. An Anthropic Messages request keeps its
system prompt in its `system` field (a string or text blocks) and a Responses request in
`instructions`: the footer goes there (`inject_system`). Rule and memory text is escaped so it
cannot open or close either block, and a rule is one line, so it cannot forge another rule.

Conditions and what each injects:

* `withheld` — nothing.
* `workspace` — the decision's essentials and every *authorised* rule (004: an id,
  `evidence:user-explicit`, in Rules or Pending, not retired).
* `workspace-minus:<id>` — `workspace` without that rule: the causal ablation.
* `rules:<id,id>` — exactly those rules, no essentials; may name legacy rules (an explicit
  choice), never retired rules or rules with non-explicit evidence.
* `rule:<text>` — that one rule, no essentials, with the synthetic id `rule:<sha256[:12]>`.

Rules come only from a `WorkspaceMemory` (or the arm's own `rule:` text): nothing in the
request itself — a tool result, a vendor page — ever becomes a rule or an injected id.
"""

from __future__ import annotations

import copy
import hashlib
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from replay.errors import ReplayError
from replay.memory.files import AUTHORISED_EVIDENCE, Essential, Rule, Section, WorkspaceMemory

RULES_OPEN, RULES_CLOSE = "<standing_rules>", "</standing_rules>"
MEMORY_OPEN, MEMORY_CLOSE = "<memory>", "</memory>"
RULES_PREAMBLE = "Every rule below is mandatory."
# Any spelling a model could read as one of our tags: `<memory>`, `</ Standing_Rules >`, `<memory attr>`.
_TAG_RE = re.compile(r"<(?=\s*/?\s*(?:standing_rules|memory)\b)", re.I)
_COMMENT_OPEN_RE = re.compile(r"<(?=!--)")


class ConditionError(ReplayError, ValueError):
    """A memory condition that cannot be parsed or applied to this decision."""


@dataclass(frozen=True)
class Withheld:
    def __str__(self) -> str:
        return "withheld"


@dataclass(frozen=True)
class Workspace:
    def __str__(self) -> str:
        return "workspace"


@dataclass(frozen=True)
class WorkspaceMinus:
    rule_id: str

    def __str__(self) -> str:
        return f"workspace-minus:{self.rule_id}"


@dataclass(frozen=True)
class ChosenRules:
    rule_ids: tuple[str, ...]

    def __str__(self) -> str:
        return "rules:" + ",".join(self.rule_ids)


@dataclass(frozen=True)
class OneRule:
    text: str

    @property
    def rule_id(self) -> str:
        return synthetic_rule_id(self.text)

    def __str__(self) -> str:
        return f"rule:{self.text}"


MemoryCondition = Withheld | Workspace | WorkspaceMinus | ChosenRules | OneRule


@dataclass(frozen=True)
class Injection:
    """The request messages under a condition, and what they carry (provenance)."""

    messages: list[dict[str, Any]]
    rule_ids: tuple[str, ...]
    essentials: tuple[str, ...]


def synthetic_rule_id(text: str) -> str:
    """Stable id of a `rule:<text>` rule: the same text is the same rule in every run."""
    return "rule:" + hashlib.sha256(" ".join(text.split()).encode()).hexdigest()[:12]


def parse_condition(value: str) -> MemoryCondition:
    """Parse a run config's `memory = "..."`. Bare slugs in ids get the `lc:` prefix."""
    text = value.strip()
    if text == "withheld":
        return Withheld()
    if text == "workspace":
        return Workspace()
    kind, sep, rest = text.partition(":")
    if sep and kind == "workspace-minus":
        return WorkspaceMinus(_rule_id(rest, value))
    if sep and kind == "rules":
        ids = tuple(dict.fromkeys(_rule_id(part, value) for part in rest.split(",")))
        return ChosenRules(ids)
    if sep and kind == "rule":
        rule_text = " ".join(rest.split())
        if not rule_text:
            raise ConditionError(f"memory condition {value!r}: rule:<text> needs the rule's text")
        return OneRule(rule_text)
    raise ConditionError(
        f"unknown memory condition {value!r}: expected withheld, workspace, workspace-minus:<id>, rules:<id,id> "
        "or rule:<text>"
    )


def _rule_id(part: str, value: str) -> str:
    slug = part.strip().removeprefix("lc:")
    if not slug or any(c.isspace() for c in slug):
        raise ConditionError(f"memory condition {value!r}: {part.strip()!r} is not a rule id (lc:<slug>)")
    return f"lc:{slug}"


def select_rules(condition: MemoryCondition, memory: WorkspaceMemory | None) -> tuple[tuple[Rule, ...], bool]:
    """The rules a condition injects and whether the essentials go with them."""
    match condition:
        case Withheld():
            return (), False
        case OneRule(text=text):
            rule = Rule(
                id=condition.rule_id, text=text, section=Section.RULES, evidence=None,
                legacy=False, authorised=True, retired=False, file=None, line=0,
            )
            return (rule,), False
    if memory is None:
        raise ConditionError(f"memory condition {condition}: the decision has no workspace memory")
    match condition:
        case Workspace():
            return memory.authorised_rules(), True
        case WorkspaceMinus(rule_id=rule_id):
            _known(memory, rule_id, condition)
            if not any(r.authorised for r in memory.find(rule_id)):
                raise ConditionError(
                    f"memory condition {condition}: {rule_id} is not injected under 'workspace' "
                    f"({_why_not(memory.find(rule_id)[0])}), so leaving it out changes nothing"
                )
            return tuple(r for r in memory.authorised_rules() if r.id != rule_id), True
        case ChosenRules(rule_ids=rule_ids):
            chosen: list[Rule] = []
            for rule_id in rule_ids:
                _known(memory, rule_id, condition)
                for rule in memory.find(rule_id):
                    if rule.retired or not (rule.authorised or rule.legacy):
                        raise ConditionError(
                            f"memory condition {condition}: {rule_id} cannot be injected ({_why_not(rule)})")
                    chosen.append(rule)
            return tuple(sorted(chosen, key=lambda r: r.line)), False
    raise ConditionError(f"unsupported memory condition {condition!r}")


@dataclass(frozen=True)
class Footer:
    """What a condition appends to the system prompt ('' when nothing), and what it carries."""

    text: str
    rule_ids: tuple[str, ...]
    essentials: tuple[str, ...]


def footer(condition: MemoryCondition, memory: WorkspaceMemory | None) -> Footer:
    """The `<memory>` and `<standing_rules>` blocks a condition injects, each only when non-empty."""
    rules, with_essentials = select_rules(condition, memory)
    essentials = memory.essentials if with_essentials and memory is not None else ()
    text = "\n\n".join(b for b in (_memory_block(essentials), _rules_block(rules)) if b)
    rule_ids = tuple(dict.fromkeys(r.id for r in rules if r.id is not None))
    return Footer(text, rule_ids, tuple(e.name for e in essentials))


def inject(messages: Sequence[dict[str, Any]], condition: MemoryCondition, memory: WorkspaceMemory | None) -> Injection:
    """New messages for the request under `condition`; the input is not modified."""
    out = copy.deepcopy(list(messages))
    system_index = next((i for i, m in enumerate(out) if m.get("role") == "system"), None)
    if system_index is not None and _carries_memory(out[system_index].get("content")):
        raise ConditionError(_CARRIES)
    added = footer(condition, memory)
    if added.text:
        if system_index is None:
            out.insert(0, {"role": "system", "content": added.text})
        else:
            out[system_index]["content"] = _append(out[system_index].get("content"), added.text)
    return Injection(messages=out, rule_ids=added.rule_ids, essentials=added.essentials)


def inject_system(system: Any, condition: MemoryCondition, memory: WorkspaceMemory | None) -> tuple[Any, Footer]:
    """A system field under `condition` (Anthropic Messages `system`, a string or text blocks;
    Responses `instructions`), as production injects it: the footer after the prompt's text, in
    its last text block (vLLM joins the system blocks with nothing between them, so a block of its
    own would lose the blank line), or as a block of its own when there is no text block. None
    stays None when nothing is injected. The input is not modified."""
    if _carries_memory(system):
        raise ConditionError(_CARRIES)
    added = footer(condition, memory)
    if not added.text:
        return copy.deepcopy(system), added
    if not isinstance(system, list):
        return _append(system, added.text), added
    out = copy.deepcopy(system)
    last = next((i for i in range(len(out) - 1, -1, -1) if isinstance(out[i], dict) and out[i].get("type") == "text"
                 and isinstance(out[i].get("text"), str)), None)
    if last is None:
        return [*out, {"type": "text", "text": added.text}], added
    out[last]["text"] = _append(out[last]["text"], added.text)
    return out, added


_CARRIES = ("the decision's system prompt already contains a <memory> or <standing_rules> block; "
            "a suite request must carry no memory (DESIGN §3): memory is injected by the arm")


def escape(text: str) -> str:
    """Neutralise anything that would open or close a memory block (`<` becomes `&lt;`)."""
    return _TAG_RE.sub("&lt;", text)


def render_rule(rule: Rule) -> str:
    """A rule as one line of the footer, with its id comment as in the rules file."""
    text = _COMMENT_OPEN_RE.sub("&lt;", escape(" ".join(rule.text.split())))
    marker = " ".join(filter(None, (rule.id, f"evidence:{rule.evidence}" if rule.evidence else None)))
    lines = [f"- {text} <!-- {marker} -->"]
    lines += [f"  {_COMMENT_OPEN_RE.sub('&lt;', escape(' '.join(d.split())))}" for d in rule.detail]
    return "\n".join(lines)


def _rules_block(rules: Sequence[Rule]) -> str:
    if not rules:
        return ""
    return "\n".join([RULES_OPEN, RULES_PREAMBLE, *(render_rule(r) for r in rules), RULES_CLOSE])


def _memory_block(essentials: Sequence[Essential]) -> str:
    parts = [f"[{e.name}]\n{escape(e.text.strip())}" for e in essentials if e.text.strip()]
    if not parts:
        return ""
    return "\n".join([MEMORY_OPEN, "\n\n".join(parts), MEMORY_CLOSE])


def _append(content: Any, footer: str) -> Any:
    """Append to a system message whether its content is a string, parts or empty."""
    if isinstance(content, list):
        return [*content, {"type": "text", "text": footer}]
    if not content:
        return footer
    return f"{content}\n\n{footer}"


def _carries_memory(content: Any) -> bool:
    if isinstance(content, list):
        text = " ".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    else:
        text = str(content or "")
    return bool(re.search(r"<\s*(standing_rules|memory)\s*>", text, re.I))


def _known(memory: WorkspaceMemory, rule_id: str, condition: MemoryCondition) -> None:
    if not memory.find(rule_id):
        known = ", ".join(sorted({r.id for r in memory.rules if r.id})) or "none"
        raise ConditionError(f"memory condition {condition}: no rule {rule_id} in {memory.root} (rules there: {known})")


def _why_not(rule: Rule) -> str:
    if rule.retired:
        return "retired"
    if rule.legacy:
        return "legacy: no evidence"
    if rule.evidence != AUTHORISED_EVIDENCE:
        return f"evidence:{rule.evidence} is not user-explicit"
    return f"not in a binding section (line {rule.line})"
