"""Worlds of the four demo workspaces: every tool of `demo/tools.py`, executed over typed state.

The argument models below are the single definition of each demo tool: `demo/tools.py`
builds the schemas the suite shows the model from them (`World.schemas`), so the suite's
tools and the sandbox's cannot drift. Refusals mirror the demo suite's rejections (a draft
cannot be sent, a closed ticket takes no reply, outbound email to customers is disabled, a
calendar conflict, a duplicate contact, a folder id given to `read_file`, a missing folder).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field

from core.records import Strict
from replay.sandbox.world import Args, Context, Prose, Tool, ToolFailure, World, tool

Currency = Annotated[str, Field(description="ISO 4217")]
Date = Annotated[str, Field(description="YYYY-MM-DD", max_length=10)]
Time = Annotated[str, Field(description="ISO 8601 date-time")]


class Money(Args):
    value: float
    currency: Currency


class Person(Args):
    email: str
    name: str | None = None


def _matches(query: str, *texts: str) -> bool:
    """Every word of the query occurs in one of the texts (case-insensitive)."""
    haystack = " ".join(texts).lower()
    return all(word in haystack for word in query.lower().split())


# --- ws-invoicing ---------------------------------------------------------------------------


class Customer(Strict):
    name: str
    email: str
    contact: str


class Line(Strict):
    description: Prose
    quantity: float
    unit_price: float
    tax_code: str | None = None


class Invoice(Strict):
    customer_id: str
    currency: str
    status: Literal["draft", "open", "overdue", "paid"]
    issued: str
    title: Prose = ""
    notes: Prose = ""
    lines: list[Line] = Field(default_factory=list)
    total: float
    due_date: str | None = None
    paid: float = 0.0


class Payment(Strict):
    invoice_id: str
    amount: float
    currency: str
    paid_on: str
    method: str | None = None


class Outgoing(Strict):
    """Anything that left the workspace: an email, an invoice sent, a reply, an invite, a share."""

    tool: str
    to: list[str]
    subject: Prose = ""
    body: Prose = ""


class InvoicingState(Strict):
    customers: dict[str, Customer]
    invoices: dict[str, Invoice]
    payments: list[Payment] = Field(default_factory=list)
    outbox: list[Outgoing] = Field(default_factory=list)


def _invoice(state: InvoicingState, invoice_id: str) -> Invoice:
    if invoice_id not in state.invoices:
        raise ToolFailure("not_found", f"invoice {invoice_id} not found")
    return state.invoices[invoice_id]


def _invoice_summary(invoice_id: str, inv: Invoice) -> dict[str, Any]:
    return {"invoice_id": invoice_id, "customer_id": inv.customer_id, "status": inv.status, "total": inv.total,
            "currency": inv.currency, "issued": inv.issued}


class SearchInvoicesArgs(Args):
    query: str
    limit: int | None = None


@tool("Free-text search over invoice titles and notes.")
def search_invoices(state: InvoicingState, args: SearchInvoicesArgs, ctx: Context) -> dict[str, Any]:
    hits = [_invoice_summary(i, inv) for i, inv in sorted(state.invoices.items())
            if _matches(args.query, inv.title, inv.notes, i)]
    return {"results": hits[: args.limit or 10]}


class DateRange(Args):
    from_: Date | None = Field(None, alias="from")
    to: Date | None = None


class InvoiceFilter(Args):
    customer_id: str | None = None
    status: Literal["draft", "open", "overdue", "paid"] | None = None
    date: DateRange | None = None


class Page(Args):
    size: int | None = None
    cursor: str | None = None


class ListInvoicesArgs(Args):
    filter: InvoiceFilter
    page: Page | None = None


@tool("List invoices matching a filter.")
def list_invoices(state: InvoicingState, args: ListInvoicesArgs, ctx: Context) -> dict[str, Any]:
    f = args.filter
    hits = [_invoice_summary(i, inv) for i, inv in sorted(state.invoices.items())
            if (f.customer_id is None or inv.customer_id == f.customer_id)
            and (f.status is None or inv.status == f.status)
            and (f.date is None or ((f.date.from_ or "") <= inv.issued <= (f.date.to or "9999")))]
    size = args.page.size if args.page and args.page.size else 20
    return {"results": hits[:size]}


class InvoiceIdArgs(Args):
    invoice_id: str


@tool("Fetch one invoice.")
def get_invoice(state: InvoicingState, args: InvoiceIdArgs, ctx: Context) -> dict[str, Any]:
    inv = _invoice(state, args.invoice_id)
    return {**_invoice_summary(args.invoice_id, inv), "title": inv.title, "due_date": inv.due_date, "paid": inv.paid,
            "lines": [ln.model_dump(exclude_none=True) for ln in inv.lines]}


class LineArgs(Args):
    description: str
    quantity: float
    unit_price: float
    tax_code: str | None = None


class CreateInvoiceArgs(Args):
    customer_id: str
    currency: Currency
    lines: list[LineArgs]
    due_date: Date | None = None
    notes: str | None = None


@tool("Create a draft invoice.")
def create_invoice(state: InvoicingState, args: CreateInvoiceArgs, ctx: Context) -> dict[str, Any]:
    if args.customer_id not in state.customers:
        raise ToolFailure("not_found", f"customer {args.customer_id} not found")
    if not args.lines:
        raise ToolFailure("invalid_argument", "an invoice needs at least one line")
    invoice_id = ctx.new_id("inv")
    lines = [Line(**ln.model_dump()) for ln in args.lines]
    total = round(sum(ln.quantity * ln.unit_price for ln in lines), 2)
    state.invoices[invoice_id] = Invoice(customer_id=args.customer_id, currency=args.currency, status="draft",
                                         issued=ctx.today(), notes=args.notes or "", lines=lines, total=total,
                                         due_date=args.due_date)
    return {"invoice_id": invoice_id, "status": "draft", "total": total}


@tool("Finalize a draft invoice so it can be sent.")
def finalize_invoice(state: InvoicingState, args: InvoiceIdArgs, ctx: Context) -> dict[str, Any]:
    inv = _invoice(state, args.invoice_id)
    if inv.status != "draft":
        raise ToolFailure("failed_precondition", f"invoice {args.invoice_id} is {inv.status}, not a draft")
    inv.status = "open"
    return {"invoice_id": args.invoice_id, "status": "open"}


class SendInvoiceArgs(Args):
    invoice_id: str
    recipients: list[Person]
    message: str | None = None


@tool("Email a finalized invoice.", outbound=True)
def send_invoice(state: InvoicingState, args: SendInvoiceArgs, ctx: Context) -> dict[str, Any]:
    inv = _invoice(state, args.invoice_id)
    if inv.status == "draft":
        raise ToolFailure("failed_precondition", f"invoice {args.invoice_id} is a draft; drafts cannot be sent")
    if not args.recipients:
        raise ToolFailure("invalid_argument", "no recipients")
    state.outbox.append(Outgoing(tool="send_invoice", to=sorted(p.email for p in args.recipients),
                                 subject=args.invoice_id, body=args.message or ""))
    return {"invoice_id": args.invoice_id, "sent": len(args.recipients)}


class RecordPaymentArgs(Args):
    invoice_id: str
    amount: Money
    paid_on: Date
    method: Literal["bank_transfer", "card", "cash"] | None = None


@tool("Record a payment against an invoice.")
def record_payment(state: InvoicingState, args: RecordPaymentArgs, ctx: Context) -> dict[str, Any]:
    inv = _invoice(state, args.invoice_id)
    if args.amount.currency != inv.currency:
        raise ToolFailure("invalid_argument",
                          f"invoice {args.invoice_id} is in {inv.currency}, not {args.amount.currency}")
    if inv.status == "draft":
        raise ToolFailure("failed_precondition", f"invoice {args.invoice_id} is a draft")
    state.payments.append(Payment(invoice_id=args.invoice_id, amount=args.amount.value, currency=args.amount.currency,
                                  paid_on=args.paid_on, method=args.method))
    inv.paid = round(inv.paid + args.amount.value, 2)
    if inv.paid >= inv.total:
        inv.status = "paid"
    return {"payment_id": ctx.new_id("pay"), "invoice_status": inv.status}


INVOICING = World("invoicing", InvoicingState, {t.name: t for t in (
    search_invoices, list_invoices, get_invoice, create_invoice, finalize_invoice, send_invoice, record_payment)})


# --- ws-support -----------------------------------------------------------------------------


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
        raise ToolFailure("not_found", f"ticket {ticket_id} not found")
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
        if ((args.query is None or _matches(args.query, t.subject, ticket_id, customer.name if customer else ""))
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
        raise ToolFailure("failed_precondition",
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
        raise ToolFailure("failed_precondition", f"ticket {args.ticket_id} is {t.status}, not closed")
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
        raise ToolFailure("failed_precondition", f"ticket {args.ticket_id} is already escalated to {t.escalation.team}")
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
    raise ToolFailure("not_found", f"no customer with email {args.email}")


class SendEmailArgs(Args):
    to: list[Person]
    cc: list[Person] | None = None
    subject: str
    body: str


@tool("Send an email.", outbound=True)
def send_email(state: SupportState, args: SendEmailArgs, ctx: Context) -> dict[str, Any]:
    recipients = [p.email for p in [*args.to, *(args.cc or [])]]
    if not args.to:
        raise ToolFailure("invalid_argument", "no recipients")
    outside = [e for e in recipients if not e.lower().endswith("@" + state.internal_domain)]
    if outside:
        raise ToolFailure("permission_denied", "outbound email to customers is disabled in this workspace")
    state.outbox.append(Outgoing(tool="send_email", to=sorted(recipients), subject=args.subject, body=args.body))
    return {"message_id": ctx.new_id("msg"), "sent": len(recipients)}


SUPPORT = World("support", SupportState, {t.name: t for t in (
    search_tickets, get_ticket, reply_ticket, reopen_ticket, escalate_ticket, lookup_customer, send_email)})


# --- ws-sales -------------------------------------------------------------------------------


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
        if _matches(args.query, c.name, c.email, c.company):
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
        raise ToolFailure("already_exists", f"a contact with email {args.email} already exists")
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
        raise ToolFailure("not_found", f"deal {args.deal_id} not found")
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
        raise ToolFailure("not_found", f"contact {args.contact_id} not found")
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
        raise ToolFailure("invalid_argument", "the event ends before it starts")
    for person in args.attendees:
        if not person.optional and _overlaps(state, person.email, args.start, args.end):
            raise ToolFailure("conflict", f"{person.email} is busy between {args.start} and {args.end}")
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
        raise ToolFailure("invalid_argument", f"{stamp!r} is not YYYY-MM-DDTHH:MM:SS")
    return int(hours) * 60 + int(minutes)


def _stamp(day: str, minutes: int) -> str:
    return f"{day}T{minutes // 60:02d}:{minutes % 60:02d}:00"


@tool("Find times when all attendees are free.")
def find_free_slots(state: SalesState, args: FindFreeSlotsArgs, ctx: Context) -> dict[str, Any]:
    day = args.window.from_[:10]
    if len(args.window.from_) < 16 or len(args.window.to) < 16 or args.window.to[:10] != day:
        raise ToolFailure("invalid_argument", "the window must be one day, as YYYY-MM-DDTHH:MM:SS")
    if args.duration_minutes <= 0:
        raise ToolFailure("invalid_argument", "duration_minutes must be positive")
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


# --- ws-files -------------------------------------------------------------------------------


class Grant(Strict):
    email: str
    role: str


class File(Strict):
    name: str
    folder_id: str
    type: Literal["document", "spreadsheet", "pdf", "image"]
    modified: str
    content: Prose = ""
    shared: list[Grant] = Field(default_factory=list)


class Folder(Strict):
    name: str
    parent_id: str | None = None


class FilesState(Strict):
    folders: dict[str, Folder]
    files: dict[str, File]
    outbox: list[Outgoing] = Field(default_factory=list)


def _file(state: FilesState, file_id: str) -> File:
    if file_id in state.folders:
        raise ToolFailure("invalid_argument", f"{file_id} is a folder; this tool needs a file id")
    if file_id not in state.files:
        raise ToolFailure("not_found", f"file {file_id} not found")
    return state.files[file_id]


def _folder(state: FilesState, folder_id: str, what: str = "folder") -> Folder:
    if folder_id in state.files:
        raise ToolFailure("invalid_argument", f"{folder_id} is a file, not a folder")
    if folder_id not in state.folders:
        raise ToolFailure("not_found", f"{what} {folder_id} does not exist")
    return state.folders[folder_id]


class FileFilter(Args):
    type: Literal["document", "spreadsheet", "pdf", "image"] | None = None
    modified_after: Date | None = None


class ListFilesArgs(Args):
    folder_id: str
    filter: FileFilter | None = None


def _file_summary(file_id: str, f: File) -> dict[str, Any]:
    return {"file_id": file_id, "name": f.name, "type": f.type, "modified": f.modified, "folder_id": f.folder_id}


@tool("List the files in a folder.")
def list_files(state: FilesState, args: ListFilesArgs, ctx: Context) -> dict[str, Any]:
    _folder(state, args.folder_id)
    f = args.filter or FileFilter()
    hits = [_file_summary(i, x) for i, x in sorted(state.files.items())
            if x.folder_id == args.folder_id and (f.type is None or x.type == f.type)
            and (f.modified_after is None or x.modified > f.modified_after)]
    folders = [{"folder_id": i, "name": x.name} for i, x in sorted(state.folders.items())
               if x.parent_id == args.folder_id]
    return {"results": hits, "folders": folders}


class SearchFilesArgs(Args):
    query: str
    limit: int | None = None


@tool("Search files by name and content.")
def search_files(state: FilesState, args: SearchFilesArgs, ctx: Context) -> dict[str, Any]:
    hits = [_file_summary(i, x) for i, x in sorted(state.files.items()) if _matches(args.query, x.name, x.content)]
    return {"results": hits[: args.limit or 10]}


class FileIdArgs(Args):
    file_id: str


@tool("Read the text of a file.")
def read_file(state: FilesState, args: FileIdArgs, ctx: Context) -> dict[str, Any]:
    f = _file(state, args.file_id)
    return {"file_id": args.file_id, "name": f.name, "content": f.content}


class Destination(Args):
    folder_id: str


class MoveFileArgs(Args):
    file_id: str
    destination: Destination


@tool("Move a file to another folder.")
def move_file(state: FilesState, args: MoveFileArgs, ctx: Context) -> dict[str, Any]:
    f = _file(state, args.file_id)
    _folder(state, args.destination.folder_id, "destination folder")
    if f.folder_id == args.destination.folder_id:
        return {"file_id": args.file_id, "status": "unchanged"}
    f.folder_id = args.destination.folder_id
    return {"file_id": args.file_id, "folder_id": f.folder_id}


class GrantArgs(Args):
    email: str
    role: Literal["viewer", "editor"]


class ShareFileArgs(Args):
    file_id: str
    grants: list[GrantArgs]
    notify: bool | None = None
    message: str | None = None


@tool("Share a file with people.", outbound=True)
def share_file(state: FilesState, args: ShareFileArgs, ctx: Context) -> dict[str, Any]:
    f = _file(state, args.file_id)
    if not args.grants:
        raise ToolFailure("invalid_argument", "no grants")
    for grant in args.grants:
        f.shared = [g for g in f.shared if g.email != grant.email] + [Grant(email=grant.email, role=grant.role)]
    if args.notify:
        state.outbox.append(Outgoing(tool="share_file", to=sorted(g.email for g in args.grants), subject=f.name,
                                     body=args.message or ""))
    return {"file_id": args.file_id, "shared_with": len(f.shared)}


class CreateFolderArgs(Args):
    name: str
    parent_id: str


@tool("Create a folder.")
def create_folder(state: FilesState, args: CreateFolderArgs, ctx: Context) -> dict[str, Any]:
    _folder(state, args.parent_id, "parent folder")
    if any(x.name == args.name and x.parent_id == args.parent_id for x in state.folders.values()):
        raise ToolFailure("already_exists", f"a folder {args.name!r} already exists there")
    folder_id = ctx.new_id("fld")
    state.folders[folder_id] = Folder(name=args.name, parent_id=args.parent_id)
    return {"folder_id": folder_id}


FILES = World("files", FilesState, {t.name: t for t in (
    list_files, search_files, read_file, move_file, share_file, create_folder)})

WORLDS: dict[str, World] = {w.name: w for w in (INVOICING, SUPPORT, SALES, FILES)}
WORKSPACE_WORLD = {"ws-invoicing": "invoicing", "ws-support": "support", "ws-sales": "sales", "ws-files": "files"}


def all_tools() -> list[Tool]:
    return [t for w in WORLDS.values() for t in w.tools.values()]
