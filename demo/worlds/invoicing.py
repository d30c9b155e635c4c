"""The ws-invoicing world: invoices, payments and outbound invoice email."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from core.records import Strict
from demo.worlds.common import Currency, Date, Money, Outgoing, Person, matches
from replay.sandbox.world import Args, Context, Prose, ToolFailureError, World, tool


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




class InvoicingState(Strict):
    customers: dict[str, Customer]
    invoices: dict[str, Invoice]
    payments: list[Payment] = Field(default_factory=list)
    outbox: list[Outgoing] = Field(default_factory=list)


def _invoice(state: InvoicingState, invoice_id: str) -> Invoice:
    if invoice_id not in state.invoices:
        raise ToolFailureError("not_found", f"invoice {invoice_id} not found")
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
            if matches(args.query, inv.title, inv.notes, i)]
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
        raise ToolFailureError("not_found", f"customer {args.customer_id} not found")
    if not args.lines:
        raise ToolFailureError("invalid_argument", "an invoice needs at least one line")
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
        raise ToolFailureError("failed_precondition", f"invoice {args.invoice_id} is {inv.status}, not a draft")
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
        raise ToolFailureError("failed_precondition", f"invoice {args.invoice_id} is a draft; drafts cannot be sent")
    if not args.recipients:
        raise ToolFailureError("invalid_argument", "no recipients")
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
        raise ToolFailureError("invalid_argument",
                               f"invoice {args.invoice_id} is in {inv.currency}, not {args.amount.currency}")
    if inv.status == "draft":
        raise ToolFailureError("failed_precondition", f"invoice {args.invoice_id} is a draft")
    state.payments.append(Payment(invoice_id=args.invoice_id, amount=args.amount.value, currency=args.amount.currency,
                                  paid_on=args.paid_on, method=args.method))
    inv.paid = round(inv.paid + args.amount.value, 2)
    if inv.paid >= inv.total:
        inv.status = "paid"
    return {"payment_id": ctx.new_id("pay"), "invoice_status": inv.status}


INVOICING = World("invoicing", InvoicingState, {t.name: t for t in (
    search_invoices, list_invoices, get_invoice, create_invoice, finalize_invoice, send_invoice, record_payment)})
