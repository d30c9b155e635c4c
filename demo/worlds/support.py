"""The ws-support world: tickets, their threads, escalations and customer email."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from core.records import Strict
from demo.worlds.common import Outgoing, Person, matches
from replay.sandbox.world import Args, Context, Prose, ToolFailureError, World, tool


class Post(Strict):
    author: str
    body: Prose


class Escalation(Strict):
    team: str
    priority: str
    reason: Prose


class Ticket(Strict):
    customer_id: str
    subject: Prose
    status: Literal["open", "pending", "closed"]
    priority: str = "normal"
    tags: list[str] = Field(default_factory=list)
    thread: list[Post] = Field(default_factory=list)
    escalation: Escalation | None = None
    reopen_reason: Prose | None = None


class SupportCustomer(Strict):
    name: str
    email: str
    plan: str = "business"
    phone: str | None = None


class SupportState(Strict):
    customers: dict[str, SupportCustomer]
    tickets: dict[str, Ticket]
    internal_domain: str = "brightdesk.io"
    outbox: list[Outgoing] = Field(default_factory=list)


def _ticket(state: SupportState, ticket_id: str) -> Ticket:
    if ticket_id not in state.tickets:
        raise ToolFailureError("not_found", f"ticket {ticket_id} not found")
    return state.tickets[ticket_id]


class TicketFilter(Args):
    status: Literal["open", "pending", "closed"] | None = None
    customer_id: str | None = None
    tags: list[str] | None = None


class SearchTicketsArgs(Args):
    query: str | None = None
    filter: TicketFilter | None = None


@tool("Search support tickets.")
def search_tickets(state: SupportState, args: SearchTicketsArgs, ctx: Context) -> dict[str, Any]:
    f = args.filter or TicketFilter()
    hits = []
    for ticket_id, t in sorted(state.tickets.items()):
        customer = state.customers.get(t.customer_id)
        if ((args.query is None or matches(args.query, t.subject, ticket_id, customer.name if customer else ""))
                and (f.status is None or t.status == f.status)
                and (f.customer_id is None or t.customer_id == f.customer_id)
                and all(tag in t.tags for tag in f.tags or [])):
            hits.append({"ticket_id": ticket_id, "subject": t.subject, "status": t.status,
                         "customer_id": t.customer_id})
    return {"results": hits}


class TicketIdArgs(Args):
    ticket_id: str


@tool("Fetch one ticket with its thread.")
def get_ticket(state: SupportState, args: TicketIdArgs, ctx: Context) -> dict[str, Any]:
    t = _ticket(state, args.ticket_id)
    return {"ticket_id": args.ticket_id, **t.model_dump(exclude={"escalation", "reopen_reason"})}


class Attachment(Args):
    file_id: str
    name: str | None = None


class ReplyTicketArgs(Args):
    ticket_id: str
    body: str
    attachments: list[Attachment] | None = None


@tool("Post a public reply on a ticket.", outbound=True)
def reply_ticket(state: SupportState, args: ReplyTicketArgs, ctx: Context) -> dict[str, Any]:
    t = _ticket(state, args.ticket_id)
    if t.status == "closed":
        raise ToolFailureError("failed_precondition",
                               f"ticket {args.ticket_id} is closed; closed tickets do not accept replies")
    t.thread.append(Post(author="agent", body=args.body))
    customer = state.customers.get(t.customer_id)
    state.outbox.append(Outgoing(tool="reply_ticket", to=[customer.email] if customer else [], subject=args.ticket_id,
                                 body=args.body))
    return {"ticket_id": args.ticket_id, "posted": True}


class ReopenTicketArgs(Args):
    ticket_id: str
    reason: str


@tool("Reopen a closed ticket.")
def reopen_ticket(state: SupportState, args: ReopenTicketArgs, ctx: Context) -> dict[str, Any]:
    t = _ticket(state, args.ticket_id)
    if t.status != "closed":
        raise ToolFailureError("failed_precondition", f"ticket {args.ticket_id} is {t.status}, not closed")
    t.status, t.reopen_reason = "open", args.reason
    return {"ticket_id": args.ticket_id, "status": "open"}


class EscalateTicketArgs(Args):
    ticket_id: str
    team: Literal["billing", "engineering", "security"]
    reason: str
    priority: Literal["normal", "high", "urgent"] | None = None


@tool("Hand a ticket to another team.")
def escalate_ticket(state: SupportState, args: EscalateTicketArgs, ctx: Context) -> dict[str, Any]:
    t = _ticket(state, args.ticket_id)
    if t.escalation is not None:
        raise ToolFailureError("failed_precondition",
                               f"ticket {args.ticket_id} is already escalated to {t.escalation.team}")
    t.escalation = Escalation(team=args.team, priority=args.priority or "normal", reason=args.reason)
    t.priority = args.priority or t.priority
    return {"ticket_id": args.ticket_id, "team": args.team, "status": "escalated"}


class LookupCustomerArgs(Args):
    email: str


@tool("Find a customer by email.")
def lookup_customer(state: SupportState, args: LookupCustomerArgs, ctx: Context) -> dict[str, Any]:
    for customer_id, c in sorted(state.customers.items()):
        if c.email.lower() == args.email.lower():
            return {"customer_id": customer_id, "name": c.name, "plan": c.plan}
    raise ToolFailureError("not_found", f"no customer with email {args.email}")


class SendEmailArgs(Args):
    to: list[Person]
    cc: list[Person] | None = None
    subject: str
    body: str


@tool("Send an email.", outbound=True)
def send_email(state: SupportState, args: SendEmailArgs, ctx: Context) -> dict[str, Any]:
    recipients = [p.email for p in [*args.to, *(args.cc or [])]]
    if not args.to:
        raise ToolFailureError("invalid_argument", "no recipients")
    outside = [e for e in recipients if not e.lower().endswith("@" + state.internal_domain)]
    if outside:
        raise ToolFailureError("permission_denied", "outbound email to customers is disabled in this workspace")
    state.outbox.append(Outgoing(tool="send_email", to=sorted(recipients), subject=args.subject, body=args.body))
    return {"message_id": ctx.new_id("msg"), "sent": len(recipients)}


SUPPORT = World("support", SupportState, {t.name: t for t in (
    search_tickets, get_ticket, reply_ticket, reopen_ticket, escalate_ticket, lookup_customer, send_email)})
