"""Worlds: deterministic, stateful tool environments for sandboxed task replay (DESIGN §8).

A `World` is a pydantic state model and a set of tools. A tool is a plain typed function

    def finalize_invoice(state: InvoicingState, args: FinalizeInvoiceArgs, ctx: Context) -> dict[str, Any]

whose OpenAI schema is generated from its argument model (`tool_schema`), so the schema a
model is shown and the arguments the world executes cannot drift apart. A tool signals a
refusal by raising `ToolFailureError(code, message)`; the world turns it (and arguments that do
not validate, a tool outside the scenario's allowlist, and any other exception a tool raises:
code `internal`) into an `{"error": {...}}` tool result that `core.guard` classifies as
`failed` or `blocked`. Nothing leaves the world as an exception.

Determinism: the clock is frozen at the scenario's `clock`, ids and randomness come from
`random.Random(seed)`, tools do no I/O. Every episode starts from a fresh validation of the
initial state, and every call is appended to the episode's action log with the canonical
arguments, the guard's kind and the sha256 of the canonical state before and after.
"""

from __future__ import annotations

import hashlib
import inspect
import json
import re
import types
import typing
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from random import Random
from typing import Annotated, Any, Literal, Union, get_args, get_origin

from annotated_types import MaxLen
from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationError
from pydantic.fields import FieldInfo

from core.guard import FAILURES, GuardRules, classify
from core.jsonfile import parse_problem
from core.keyset import canonical_json, canonical_value, escape_key
from core.records import Strict
from replay.errors import ReplayError

Schema = dict[str, Any]
JSON = Any
# The guard's default rules: the same classification the gateway applies to live tool results.
GUARD = GuardRules()
DEFAULT_MAX_TEXT = 80


class _ProseMark:
    """The marker of `Prose`."""


PROSE_MARK = _ProseMark()
# A state field of free text (a body, note, reason, title): its wording is the writer's, so task
# completion compares it for presence (non-empty), not for equal text.
Prose = Annotated[str, PROSE_MARK]


class Args(BaseModel):
    """Base of tool argument models: closed objects, `from`-style keys through aliases."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)


class ToolFailureError(ReplayError):
    """Raised by a tool to refuse a call; becomes an error tool result, never leaves the world."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code, self.message = code, message


@dataclass
class Context:
    """What a tool may use besides the state: the frozen clock and the seeded RNG."""

    clock: datetime
    rng: Random
    done: bool = False

    def new_id(self, prefix: str) -> str:
        return f"{prefix}_{self.rng.getrandbits(32):08x}"

    def today(self) -> str:
        return self.clock.date().isoformat()

    def now(self) -> str:
        return self.clock.strftime("%Y-%m-%dT%H:%M:%S")


ToolFn = Callable[[Any, Any, Context], dict[str, Any]]


@dataclass(frozen=True)
class Tool:
    name: str
    description: str
    args: type[Args]
    fn: ToolFn
    outbound: bool = False  # sends data out of the workspace (email, reply, share, invite)

    def schema(self, max_text: int = DEFAULT_MAX_TEXT) -> Schema:
        return tool_schema(self, max_text)


@dataclass(frozen=True)
class World:
    name: str
    state: type[Strict]
    tools: Mapping[str, Tool]
    # Names of state fields holding prose (bodies, notes): compared for presence, not wording (DESIGN
    # §8 is silent; a free-text reply cannot be expected to equal the oracle's byte for byte). The
    # state model's `Prose` fields are added; more names (keys of untyped dicts) may be given.
    prose_fields: frozenset[str] = frozenset()

    def __post_init__(self) -> None:
        prose, exact = text_fields(self.state)
        names = self.prose_fields | prose
        clash = sorted(names & exact)
        if clash:
            raise TypeError(f"world {self.name}: {', '.join(clash)} is prose in one state model and exact text in "
                            "another; prose is matched by field name, so rename one")
        object.__setattr__(self, "prose_fields", names)

    def schemas(self, names: list[str] | None = None) -> list[Schema]:
        return [self.tools[n].schema() for n in (names if names is not None else list(self.tools))]


def text_fields(model: type[BaseModel]) -> tuple[set[str], set[str]]:
    """The names of a state model's str fields, nested models included: (`Prose`, other text)."""
    prose: set[str] = set()
    exact: set[str] = set()
    seen: set[type[BaseModel]] = set()

    def walk(m: type[BaseModel]) -> None:
        seen.add(m)
        for name, info in m.model_fields.items():
            stack: list[Any] = [info.annotation]
            marked = PROSE_MARK in info.metadata
            while stack:
                kind = stack.pop()
                origin, args = get_origin(kind), [a for a in get_args(kind) if a is not type(None)]
                if origin is typing.Annotated:
                    marked = marked or PROSE_MARK in args[1:]
                    stack.append(args[0])
                elif origin is dict:
                    stack.append(args[1])
                elif args:
                    stack += args
                elif kind is str:
                    (prose if marked else exact).add(info.alias or name)
                elif inspect.isclass(kind) and issubclass(kind, BaseModel) and kind not in seen:
                    walk(kind)

    walk(model)
    return prose, exact


def tool(description: str, outbound: bool = False) -> Callable[[ToolFn], Tool]:
    """Declare a tool: its argument model is read from the function's `args` annotation."""

    def wrap(fn: ToolFn) -> Tool:
        hints = typing.get_type_hints(fn)
        args_model = hints.get("args")
        if not (inspect.isclass(args_model) and issubclass(args_model, Args)):
            raise TypeError(f"tool {fn.__name__}: the 'args' parameter must be annotated with an Args model")
        return Tool(fn.__name__, description, args_model, fn, outbound)

    return wrap


# --- schema generation ---------------------------------------------------------------------


def tool_schema(t: Tool, max_text: int = DEFAULT_MAX_TEXT) -> Schema:
    """The OpenAI strict function schema of a tool, from its argument model."""
    return {"type": "function", "function": {"name": t.name, "description": t.description, "strict": True,
                                             "parameters": _object_schema(t.args, max_text)}}


def _object_schema(model: type[BaseModel], max_text: int) -> Schema:
    properties: Schema = {}
    required: list[str] = []
    for name, info in model.model_fields.items():
        key = info.alias or name
        properties[key] = _field_schema(info.annotation, info, max_text)
        if info.is_required():
            required.append(key)
    return {"type": "object", "properties": properties, "required": required, "additionalProperties": False}


def _field_schema(annotation: Any, info: FieldInfo | None, max_text: int) -> Schema:
    annotation = _unwrap_optional(annotation)
    origin = get_origin(annotation)
    description = info.description if info is not None else None
    if origin is Literal:
        schema: Schema = {"type": "string"}
        if description:
            schema["description"] = description
        schema["enum"] = [str(v) for v in get_args(annotation)]
        return schema
    if origin is list:
        return {"type": "array", "items": _field_schema(get_args(annotation)[0], None, max_text)}
    if origin is typing.Annotated:
        inner, *meta = get_args(annotation)
        sub = FieldInfo.from_annotation(annotation)
        return _field_schema(inner, sub, max_text) if meta else _field_schema(inner, None, max_text)
    if inspect.isclass(annotation) and issubclass(annotation, BaseModel):
        return _object_schema(annotation, max_text)
    if annotation is str:
        schema = {"type": "string"}
        if description:
            schema["description"] = description
        limits = [m.max_length for m in (info.metadata if info is not None else []) if isinstance(m, MaxLen)]
        schema["maxLength"] = limits[0] if limits else max_text
        return schema
    simple = {bool: "boolean", int: "integer", float: "number"}
    if annotation in simple:
        return {"type": simple[annotation]}
    raise TypeError(f"no JSON schema for the annotation {annotation!r}")


def _unwrap_optional(annotation: Any) -> Any:
    if get_origin(annotation) in (Union, types.UnionType):
        members = [a for a in get_args(annotation) if a is not type(None)]
        if len(members) == 1:
            return members[0]
    return annotation


# --- state, hashes, diffs ------------------------------------------------------------------


def state_json(state: BaseModel) -> JSON:
    return canonical_value(state.model_dump(mode="json", by_alias=True))


def state_hash(value: JSON) -> str:
    return hashlib.sha256(canonical_json(value).encode()).hexdigest()


def leaves(value: JSON, prefix: str = "") -> dict[str, JSON]:
    """Every leaf of a JSON value by path (`a.b[0].c`, keys escaped as in `core.keyset`);
    empty objects and lists are leaves."""
    if isinstance(value, dict) and value:
        out: dict[str, JSON] = {}
        for key, item in value.items():
            step = escape_key(str(key))
            out.update(leaves(item, f"{prefix}.{step}" if prefix else step))
        return out
    if isinstance(value, list) and value:
        out = {}
        for i, item in enumerate(value):
            out.update(leaves(item, f"{prefix}[{i}]"))
        return out
    return {prefix: value}


def diff(before: Mapping[str, JSON], after: Mapping[str, JSON]) -> dict[str, dict[str, JSON]]:
    """Changed leaves: `{path: {"before": v, "after": v}}`, a side left out where the leaf is absent."""
    changes: dict[str, dict[str, JSON]] = {}
    for path in sorted(set(before) | set(after)):
        if path in before and path in after and canonical_json(before[path]) == canonical_json(after[path]):
            continue
        change = {side: values[path] for side, values in (("before", before), ("after", after)) if path in values}
        changes[path] = change
    return changes


_STEP = re.compile(r"\[\d+\]|\.?((?:\\.|[^.\[\\])+)")


def path_steps(path: str) -> list[str | int] | None:
    """A leaf path as its steps (object keys unescaped, list indices as ints); None when it is no path."""
    steps: list[str | int] = []
    pos = 0
    while pos < len(path):
        match = _STEP.match(path, pos)
        if match is None or (match.group(0).startswith(".") and pos == 0):
            return None
        steps.append(int(match.group(0)[1:-1]) if match.group(1) is None else re.sub(r"\\(.)", r"\1", match.group(1)))
        pos = match.end()
    return steps


def in_state(model: type[BaseModel], path: str) -> bool:
    """Whether a leaf path can name something in states of this model: field names (by alias) of
    models, any key of a dict, an index of a list. Checks that would look at a path no state has
    are dead, so packs refuse them."""
    steps = path_steps(path)
    if not steps:
        return False
    annotation: Any = model
    for step in steps:
        annotation = _unwrap_optional(annotation)
        origin = get_origin(annotation)
        if annotation is Any:
            return True
        if inspect.isclass(annotation) and issubclass(annotation, BaseModel):
            fields = {info.alias or name: info.annotation for name, info in annotation.model_fields.items()}
            if not isinstance(step, str) or step not in fields:
                return False
            annotation = fields[step]
        elif origin is dict and isinstance(step, str):
            annotation = get_args(annotation)[1]
        elif origin is list and isinstance(step, int):
            annotation = get_args(annotation)[0]
        else:
            return False
    return True


def under(path: str, prefix: str) -> bool:
    """`path` is `prefix` or inside it."""
    return path == prefix or path.startswith((prefix + ".", prefix + "["))


# --- episodes and their action log --------------------------------------------------------


def _json_text(text: str) -> str:
    _, problem = parse_problem(text)
    if problem is not None:
        raise ValueError(problem)
    return text


class ActionRecord(Strict):
    """One call of an episode's action log (DESIGN §8 calls the log the episode's ledger: a trajectory's `ledger`)."""

    step: int
    tool: str
    arguments: Annotated[str, AfterValidator(_json_text)]
    """The call's arguments as canonical JSON (a stored line that holds anything else is refused)."""
    allowed: bool
    outbound: bool
    ok: bool
    kind: str  # the guard's classification of the result
    error_code: str | None = None
    result: JSON = None
    state_before: str
    state_after: str
    changes: dict[str, dict[str, JSON]] = Field(default_factory=dict)


@dataclass
class Episode:
    """One run of a world from its initial state: call tools, read the action log and the end state."""

    world: World
    allowlist: frozenset[str]
    state: Strict
    ctx: Context
    actions: list[ActionRecord] = field(default_factory=list)

    @classmethod
    def start(cls, world: World, initial_state: Mapping[str, Any], allowlist: list[str], clock: datetime,
              seed: int) -> Episode:
        state = world.state.model_validate(initial_state)  # a fresh object graph per episode
        return cls(world, frozenset(allowlist), state, Context(clock=clock, rng=Random(seed)))

    def snapshot(self) -> JSON:
        return state_json(self.state)

    def call(self, name: str, arguments: Mapping[str, Any]) -> dict[str, Any]:
        """Run one call; the result is what the model is shown, and the call is in the action log."""
        before = self.snapshot()
        t = self.world.tools.get(name)
        allowed = t is not None and name in self.allowlist
        error_code: str | None = None
        if not allowed:
            error_code = "permission_denied"
            result: dict[str, Any] = _error(error_code, f"tool {name!r} is not allowed in this task")
        else:
            assert t is not None
            result, error_code = self._run(t, arguments, before)
        after = self.snapshot()
        kind = classify(json.dumps(result), GUARD, name)
        self.actions.append(ActionRecord(
            step=len(self.actions) + 1, tool=name, arguments=canonical_json(dict(arguments)), allowed=allowed,
            outbound=bool(t and t.outbound), ok=error_code is None and kind not in FAILURES, kind=kind,
            error_code=error_code, result=canonical_value(result),
            state_before=state_hash(before), state_after=state_hash(after),
            changes=diff(leaves(before), leaves(after))))
        return result

    def _run(self, t: Tool, arguments: Mapping[str, Any], before: JSON) -> tuple[dict[str, Any], str | None]:
        try:
            args = t.args.model_validate(dict(arguments))
        except ValidationError as exc:
            return _error("invalid_argument", _validation_text(t.name, exc)), "invalid_argument"
        try:
            return t.fn(self.state, args, self.ctx), None
        except ToolFailureError as exc:
            # A refused call changes nothing: restore the state it may have touched.
            self.state = self.world.state.model_validate(before)
            return _error(exc.code, exc.message), exc.code
        except Exception as exc:  # noqa: BLE001 - a tool's bug is the episode's tool result, never a crash
            self.state = self.world.state.model_validate(before)
            return _error("internal", f"{t.name} failed: {type(exc).__name__}: {exc}"), "internal"


def _error(code: str, message: str) -> dict[str, Any]:
    return {"error": {"code": code, "message": message}}


def _validation_text(name: str, exc: ValidationError) -> str:
    parts = []
    for error in exc.errors()[:3]:
        where = ".".join(str(p) for p in error["loc"]) or "arguments"
        parts.append(f"{where}: {error['msg']}")
    return f"{name}: invalid arguments: " + "; ".join(parts)
