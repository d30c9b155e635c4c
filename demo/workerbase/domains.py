"""The worker base's invented world: things, verbs, and the tools built from them.

Every drawn workspace gets its own small tool list from verbs × things, so the base cannot
learn which tool a workspace wants; it must read the request, the tool names
and descriptions, the error and the standing rules. None of the things, tool names, workspaces
or rule texts occurs in the demo suite or the sandbox pack (`tests/demo/workerbase/test_data.py`
checks it).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from random import Random
from typing import Any

from demo.scenarios.base import pick

Schema = dict[str, Any]


@dataclass(frozen=True)
class Thing:
    noun: str
    plural: str
    prefix: str
    names: tuple[str, ...]

    @property
    def id_key(self) -> str:
        return f"{self.noun}_id"

    def new_id(self, rng: Random) -> str:
        return f"{self.prefix}-{rng.randint(1000, 9999)}"


_PLACES = ("Berlin", "Lisbon", "Osaka", "Quebec", "Nairobi", "Tallinn", "Perth", "Bergen")
THINGS = tuple(Thing(noun, plural, prefix, tuple(f"{place} {noun}" for place in _PLACES)) for noun, plural, prefix in (
    ("order", "orders", "ORD"), ("parcel", "parcels", "PCL"), ("badge", "badges", "BDG"),
    ("licence", "licences", "LIC"), ("vendor", "vendors", "VND"), ("asset", "assets", "AST"),
    ("shift", "shifts", "SHF"), ("course", "courses", "CRS"), ("grant", "grants", "GRT"),
    ("device", "devices", "DEV"), ("policy", "policies", "POL"), ("claim", "claims", "CLM"),
    ("lease", "leases", "LSE"), ("voucher", "vouchers", "VCH"), ("visit", "visits", "VST"),
    ("booking", "bookings", "BKG"), ("rollout", "rollouts", "RLT"), ("alert", "alerts", "ALR"),
    ("shipment", "shipments", "SHP"), ("vehicle", "vehicles", "VEH"), ("permit", "permits", "PRM"),
    ("campaign", "campaigns", "CMP"), ("survey", "surveys", "SRV"), ("loan", "loans", "LN"),
    ("subscription", "subscriptions", "SUB"), ("timesheet", "timesheets", "TS"), ("quote", "quotes", "QT"),
    ("incident", "incidents", "INC"), ("article", "articles", "ART"), ("warranty", "warranties", "WRT"),
))
_PEOPLE = ("ana@corvid.co", "ben@corvid.co", "chloe@corvid.co", "dev@corvid.co", "emre@corvid.co")
_NAMED = (("Ana Silva", "ana@corvid.co"), ("Ben Okoro", "ben@corvid.co"), ("Chloe Marsh", "chloe@corvid.co"),
          ("Dev Patel", "dev@corvid.co"))
_REASONS = ("the client asked for it", "a budget review", "a duplicate entry", "a safety check")
_DESTINATIONS = ("Team North", "Team South", "the Madrid office", "the archive desk")


def _said(value: str) -> tuple[str, Any]:
    return value, value


def _recipients(rng: Random) -> tuple[str, Any]:
    """One or two people, as a user names them and as the `recipients` list of objects."""
    people = rng.sample(_NAMED, rng.randint(1, 2))
    words = " and ".join(f"{name} ({email})" for name, email in people)
    return words, [{"email": email, "name": name} for name, email in people]


def text_param() -> Schema:
    return {"type": "string", "maxLength": 80}


def enum_param(*values: str) -> Schema:
    return {"type": "string", "enum": list(values)}


@dataclass(frozen=True)
class Option:
    """An optional argument and how a user asks for it."""

    key: str
    schema: Schema
    ask: Callable[[Random], tuple[str, Any]]
    """-> (the words that ask for it, the value)."""


def _priority(rng: Random) -> tuple[str, Any]:
    return " Make it high priority.", "high"


def _note(rng: Random) -> tuple[str, Any]:
    note = pick(rng, ("waiting on legal", "checked by finance", "customer is happy"))
    return f" Add the note '{note}'.", note


def _notify(rng: Random) -> tuple[str, Any]:
    return pick(rng, (" Let the owner know.", " Notify the owner.")), True


def _months(rng: Random) -> tuple[str, Any]:
    months = rng.randint(2, 24)
    return f" For {months} months.", months


def _format(rng: Random) -> tuple[str, Any]:
    fmt = pick(rng, ("csv", "pdf"))
    return f" As a {fmt}.", fmt


def _owner(rng: Random) -> tuple[str, Any]:
    person = pick(rng, _PEOPLE)
    return f" Owned by {person}.", person


def _status(rng: Random) -> tuple[str, Any]:
    status = pick(rng, ("open", "closed", "pending"))
    return f" Only the {status} ones.", status


PRIORITY = Option("priority", enum_param("low", "normal", "high"), _priority)
NOTE = Option("note", text_param(), _note)
NOTIFY = Option("notify_owner", {"type": "boolean"}, _notify)
MONTHS = Option("months", {"type": "integer"}, _months)
FORMAT = Option("format", enum_param("csv", "pdf"), _format)
OWNER = Option("owner", text_param(), _owner)
STATUS = Option("status", enum_param("open", "closed", "pending"), _status)


@dataclass(frozen=True)
class Verb:
    """A kind of action on a thing: the tool `<name>_<noun>`, how it is described and asked for."""

    name: str
    description: str
    """`{noun}`/`{plural}` filled in."""
    asks: tuple[str, ...]
    """User phrasings; `{the}` is "the <noun> <id>", `{name}` a value of the required extra."""
    extra: tuple[str, Callable[[Random], tuple[str, Any]], Schema] | None = None
    """A required argument besides the id: its key, (the words that say it, its value), its schema."""
    options: tuple[Option, ...] = ()
    by_id: bool = True


VERBS = (
    Verb("cancel", "Cancel a {noun}.", ("Cancel {the}.", "Please call off {the}.", "Scrap {the}, we don't need it.",
                                          "{The} is no longer wanted; kill it."),
         options=(NOTE, NOTIFY)),
    Verb("archive", "Archive a {noun} so it no longer shows.", ("Archive {the}.", "Put {the} away in the archive.",
                                                               "Shelve {the}; it's finished.")),
    Verb("approve", "Approve a {noun}.", ("Approve {the}.", "Sign off on {the}.", "{The} looks fine, approve it."),
         options=(NOTE,)),
    Verb("assign", "Give a {noun} to a person.", ("Assign {the} to {value}.", "Hand {the} over to {value}.",
                                                  "{value} should own {the} from now on."),
         extra=("assignee", lambda rng: _said(pick(rng, _PEOPLE)), text_param()), options=(PRIORITY, NOTIFY)),
    Verb("renew", "Extend a {noun}.", ("Renew {the}.", "Extend {the}.", "{The} runs out soon; keep it going.",
                                         "Give {the} another term."),
         options=(MONTHS,)),
    Verb("suspend", "Pause a {noun} for a while.", ("Suspend {the} because of {value}.",
                                                    "Put {the} on hold: {value}.", "Pause {the} due to {value}."),
         extra=("reason", lambda rng: _said(pick(rng, _REASONS)), text_param()), options=(NOTIFY,)),
    Verb("restore", "Bring back an archived or paused {noun}.",
         ("Restore {the}.", "Bring {the} back.", "Reinstate {the}, please.", "Undo the pause on {the}.")),
    Verb("transfer", "Move a {noun} to another team or office.", ("Transfer {the} to {value}.",
                                                                  "Move {the} over to {value}.",
                                                                  "{value} takes over {the}; transfer it."),
         extra=("destination", lambda rng: _said(pick(rng, _DESTINATIONS)), text_param()), options=(NOTE,)),
    Verb("export", "Download a {noun} as a file.",
         ("Export {the}.", "Download {the} for me.", "I need {the} as a file.", "Get me a file of {the}."),
         options=(FORMAT,)),
    Verb("send", "Email a {noun} to people.",
         ("Send {the} to {value}.", "Email {the} over to {value}.", "{value} should get a copy of {the}.",
          "Share {the} with {value} by email."),
         extra=("recipients", _recipients, {"type": "array", "items": {
             "type": "object", "properties": {"email": text_param(), "name": text_param()}, "required": ["email"],
             "additionalProperties": False}}), options=(NOTE,)),
    Verb("get", "Show one {noun}.", ("Show me {the}.", "Pull up {the}.", "What's the state of {the}?",
                                     "What do we have on {the}?")),
    Verb("flag", "Mark a {noun} for review.", ("Flag {the} for review.", "Mark {the} so someone checks it.",
                                              "Something is off with {the}; flag it."), options=(PRIORITY, NOTE)),
    Verb("close", "Close a {noun} that is done.",
         ("Close {the}.", "{The} is done, close it.", "Wrap up {the}.", "We're finished with {the}; mark it done."),
         options=(NOTE,)),
    Verb("list", "List {plural}.", ("List our {plural}.", "Which {plural} do we have?", "Show all {plural}.",
                                                "Give me an overview of the {plural}."),
         options=(STATUS, OWNER), by_id=False),
)
REVIEW = Verb("request", "Ask a manager to sign off a change to a {noun}.", ())
QUEUE = Verb("queue", "Queue a change to a {noun} for the next batch run.", ())


def tool_name(verb: Verb, thing: Thing) -> str:
    if verb is REVIEW:
        return f"request_{thing.noun}_review"
    if verb is QUEUE:
        return f"queue_{thing.noun}_change"
    return f"{verb.name}_{thing.plural if not verb.by_id else thing.noun}"


def find_name(thing: Thing) -> str:
    return f"find_{thing.noun}"


def tool_schema(verb: Verb, thing: Thing) -> Schema:
    """The strict OpenAI function schema of `verb` on `thing` (closed objects, as the demo's tools)."""
    required: dict[str, Schema] = {thing.id_key: text_param()} if verb.by_id else {}
    if verb in (REVIEW, QUEUE):
        required["change"] = text_param()
    if verb.extra:
        required[verb.extra[0]] = verb.extra[2]
    properties = {**required, **{o.key: o.schema for o in verb.options}}
    return _function(tool_name(verb, thing), verb.description.format(noun=thing.noun, plural=thing.plural),
                     properties, list(required))


def find_schema(thing: Thing) -> Schema:
    return _function(find_name(thing), f"Find a {thing.noun} by its name; returns its id.", {"name": text_param()},
                     ["name"])


def _function(name: str, description: str, properties: dict[str, Schema], required: list[str]) -> Schema:
    return {"type": "function", "function": {
        "name": name, "description": description, "strict": True,
        "parameters": {"type": "object", "properties": properties, "required": required,
                       "additionalProperties": False}}}


COMPANIES = (("Corvid Works", "operations"), ("Tallow & Finch", "back office"), ("Nimbus Yard", "service desk"),
             ("Quarry Lane", "admin"), ("Saltmarsh Co", "operations"), ("Juniper Row", "team"))
