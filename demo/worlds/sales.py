"""The ws-sales world: CRM contacts, deals, activities and the calendar."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from core.records import Strict
from demo.worlds.common import Date, Money, Outgoing, Time, matches
from replay.sandbox.world import Args, Context, Prose, ToolFailureError, World, tool


class Company(Args):
    name: str
    domain: str | None = None


class Deal(Strict):
    contact_id: str
    stage: str
    amount: float
    currency: str
    close_date: str | None = None


class Activity(Strict):
    contact_id: str
    type: str
    notes: Prose
    occurred_at: str


class Contact(Strict):
    name: str
    email: str
    company: str = ""
    domain: str | None = None
    tags: list[str] = Field(default_factory=list)


class Event(Strict):
    title: Prose
    start: str
    end: str
    attendees: list[str]
    location: str | None = None


class SalesState(Strict):
    contacts: dict[str, Contact]
    deals: dict[str, Deal] = Field(default_factory=dict)
    activities: list[Activity] = Field(default_factory=list)
    events: dict[str, Event] = Field(default_factory=dict)
    busy: dict[str, list[list[str]]] = Field(default_factory=dict)  # email -> [[start, end], ...]
    outbox: list[Outgoing] = Field(default_factory=list)


class FindContactArgs(Args):
    query: str


@tool("Search CRM contacts by name, email or company.")
def find_contact(state: SalesState, args: FindContactArgs, ctx: Context) -> dict[str, Any]:
    hits = []
    for contact_id, c in sorted(state.contacts.items()):
        if matches(args.query, c.name, c.email, c.company):
            deals = [{"deal_id": d, "stage": deal.stage, "amount": deal.amount, "currency": deal.currency}
                     for d, deal in sorted(state.deals.items()) if deal.contact_id == contact_id]
            hits.append({"contact_id": contact_id, "name": c.name, "email": c.email, "company": c.company,
                         "deals": deals})
    return {"results": hits}


class CreateContactArgs(Args):
    name: str
    email: str
    company: Company | None = None
    tags: list[str] | None = None


@tool("Create a CRM contact.")
def create_contact(state: SalesState, args: CreateContactArgs, ctx: Context) -> dict[str, Any]:
    if any(c.email.lower() == args.email.lower() for c in state.contacts.values()):
        raise ToolFailureError("already_exists", f"a contact with email {args.email} already exists")
    contact_id = ctx.new_id("ct")
    state.contacts[contact_id] = Contact(name=args.name, email=args.email,
                                         company=args.company.name if args.company else "",
                                         domain=args.company.domain if args.company else None, tags=args.tags or [])
    return {"contact_id": contact_id}


class DealFields(Args):
    stage: Literal["lead", "qualified", "proposal", "negotiation", "closed_won", "closed_lost"] | None = None
    amount: Money | None = None
    close_date: Date | None = None


class UpdateDealArgs(Args):
    deal_id: str
    fields: DealFields


@tool("Update fields of a deal.")
def update_deal(state: SalesState, args: UpdateDealArgs, ctx: Context) -> dict[str, Any]:
    deal = state.deals.get(args.deal_id)
    if deal is None:
        raise ToolFailureError("not_found", f"deal {args.deal_id} not found")
    f = args.fields
    if f.stage is None and f.amount is None and f.close_date is None:
        return {"deal_id": args.deal_id, "updated": 0}
    deal.stage = f.stage or deal.stage
    if f.amount is not None:
        deal.amount, deal.currency = f.amount.value, f.amount.currency
    deal.close_date = f.close_date or deal.close_date
    return {"deal_id": args.deal_id, "stage": deal.stage, "amount": deal.amount, "currency": deal.currency}


class LogActivityArgs(Args):
    contact_id: str
    type: Literal["call", "email", "meeting"]
    notes: str
    occurred_at: Time | None = None


@tool("Log a call, email or meeting on a contact.")
def log_activity(state: SalesState, args: LogActivityArgs, ctx: Context) -> dict[str, Any]:
    if args.contact_id not in state.contacts:
        raise ToolFailureError("not_found", f"contact {args.contact_id} not found")
    state.activities.append(Activity(contact_id=args.contact_id, type=args.type, notes=args.notes,
                                     occurred_at=args.occurred_at or ctx.now()))
    return {"activity_id": ctx.new_id("act")}


class Attendee(Args):
    email: str
    optional: bool | None = None


class Location(Args):
    name: str
    address: str | None = None


class CreateEventArgs(Args):
    title: str
    start: Time
    end: Time
    attendees: list[Attendee]
    location: Location | None = None


def _overlaps(state: SalesState, email: str, start: str, end: str) -> bool:
    return any(s < end and start < e for s, e in state.busy.get(email, []))


@tool("Create a calendar event.", outbound=True)
def create_event(state: SalesState, args: CreateEventArgs, ctx: Context) -> dict[str, Any]:
    if args.end <= args.start:
        raise ToolFailureError("invalid_argument", "the event ends before it starts")
    for person in args.attendees:
        if not person.optional and _overlaps(state, person.email, args.start, args.end):
            raise ToolFailureError("conflict", f"{person.email} is busy between {args.start} and {args.end}")
    event_id = ctx.new_id("evt")
    emails = [p.email for p in args.attendees]
    state.events[event_id] = Event(title=args.title, start=args.start, end=args.end, attendees=emails,
                                   location=args.location.name if args.location else None)
    for email in emails:
        state.busy.setdefault(email, []).append([args.start, args.end])
    state.outbox.append(Outgoing(tool="create_event", to=sorted(emails), subject=args.title))
    return {"event_id": event_id}


class SlotAttendee(Args):
    email: str


class Window(Args):
    from_: Time = Field(alias="from")
    to: Time


class FindFreeSlotsArgs(Args):
    attendees: list[SlotAttendee]
    window: Window
    duration_minutes: int


def _minutes(stamp: str) -> int:
    hours, minutes = stamp[11:13], stamp[14:16]
    if not (hours.isdigit() and minutes.isdigit()):
        raise ToolFailureError("invalid_argument", f"{stamp!r} is not YYYY-MM-DDTHH:MM:SS")
    return int(hours) * 60 + int(minutes)


def _stamp(day: str, minutes: int) -> str:
    return f"{day}T{minutes // 60:02d}:{minutes % 60:02d}:00"


@tool("Find times when all attendees are free.")
def find_free_slots(state: SalesState, args: FindFreeSlotsArgs, ctx: Context) -> dict[str, Any]:
    day = args.window.from_[:10]
    if len(args.window.from_) < 16 or len(args.window.to) < 16 or args.window.to[:10] != day:
        raise ToolFailureError("invalid_argument", "the window must be one day, as YYYY-MM-DDTHH:MM:SS")
    if args.duration_minutes <= 0:
        raise ToolFailureError("invalid_argument", "duration_minutes must be positive")
    slots: list[dict[str, str]] = []
    start, last = _minutes(args.window.from_), _minutes(args.window.to)
    while start + args.duration_minutes <= last and len(slots) < 3:
        s, e = _stamp(day, start), _stamp(day, start + args.duration_minutes)
        if not any(_overlaps(state, a.email, s, e) for a in args.attendees):
            slots.append({"start": s, "end": e})
        start += 30
    return {"slots": slots}


SALES = World("sales", SalesState, {t.name: t for t in (
    find_contact, create_contact, update_deal, log_activity, create_event, find_free_slots)})
