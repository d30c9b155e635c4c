"""ws-invoicing: Northwind Bookkeeping's invoices, customers and payments."""

from __future__ import annotations

from random import Random
from typing import Any

from demo.scenarios.parts import (
    CURRENCIES,
    Convo,
    Kit,
    Rejection,
    ScenarioStep,
    error,
    pick,
    random_day,
    system_prompt,
)
from demo.tools import INVOICING

_CUSTOMERS = (
    ("cus_1042", "Acme Corp", "billing@acme.com", "Maria Lopez"),
    ("cus_2210", "Globex", "ap@globex.io", "Tom Becker"),
    ("cus_3307", "Initech", "finance@initech.com", "Priya Nair"),
    ("cus_4415", "Umbrella Health", "payables@umbrella-health.org", "Jonas Berg"),
    ("cus_5120", "Stark Logistics", "invoices@starklog.com", "Aiko Tanaka"),
    ("cus_6031", "Wayne Studios", "accounts@waynestudios.net", "Sam Okafor"),
)
_SERVICES = ("consulting", "bookkeeping", "payroll processing", "tax advisory", "audit support")


def _invoice(rng: Random) -> str:
    return f"INV-2026-{rng.randint(100, 999):04d}"


def _inv_customer_filter(rng: Random) -> Rejection:
    cid, name, _, _ = pick(rng, _CUSTOMERS)
    status = pick(rng, ("open", "overdue", "draft", "paid"))
    since = random_day(rng) if rng.random() < 0.5 else None
    ask = pick(rng, ("Show me the {s} invoices for {n} (customer {c})", "Pull up {n}'s {s} invoices, customer id {c}"))
    text = ask.format(s=status, n=name, c=cid) + (f", issued since {since}." if since else ".")
    rejected = ("search_invoices", {"query": f"{status} invoices", "customer": cid})
    convo = Convo(rng, text).called(
        *rejected,
        error("invalid_argument", "search_invoices does not accept 'customer'; it only does free-text search")
    )
    flt: dict[str, Any] = {"customer_id": cid, "status": status}
    if since:
        flt["date"] = {"from": since}
    return Rejection("invoicing/customer-filter", convo.done(), rejected, ("list_invoices", {"filter": flt}))


def _inv_draft_send(rng: Random) -> Rejection:
    _, _, email, contact = pick(rng, _CUSTOMERS)
    inv = _invoice(rng)
    rejected = ("send_invoice", {"invoice_id": inv, "recipients": [{"email": email, "name": contact}]})
    convo = Convo(rng, f"Send invoice {inv} to {contact} at {email}.").called(
        *rejected, error("failed_precondition", f"invoice {inv} is a draft; drafts cannot be sent")
    )
    return Rejection("invoicing/draft-send", convo.done(), rejected, ("finalize_invoice", {"invoice_id": inv}))


def _inv_create_finalize(rng: Random) -> ScenarioStep:
    cid, name, _, _ = pick(rng, _CUSTOMERS)
    hours, rate = rng.randint(2, 40), rng.choice((60, 85, 120, 150))
    cur, svc = pick(rng, CURRENCIES), pick(rng, _SERVICES)
    inv = _invoice(rng)
    args = {"customer_id": cid, "currency": cur, "lines": [{"description": svc, "quantity": hours, "unit_price": rate}]}
    convo = Convo(rng, f"Bill {name} ({cid}) for {hours} hours of {svc} at {rate} {cur} an hour "
                        "and get it ready to send.")
    convo.called("create_invoice", args, {"invoice_id": inv, "status": "draft", "total": hours * rate})
    return ScenarioStep("invoicing/create-finalize", convo.done(), ("finalize_invoice", {"invoice_id": inv}))


def _inv_lookup_send(rng: Random) -> ScenarioStep:
    cid, _, email, contact = pick(rng, _CUSTOMERS)
    inv, days = _invoice(rng), rng.choice((7, 14, 30))
    convo = Convo(rng, f"Email invoice {inv} to {contact} ({email}) with a note that payment is due in {days} days.")
    convo.called("get_invoice", {"invoice_id": inv}, {"invoice_id": inv, "customer_id": cid, "status": "open"})
    args = {"invoice_id": inv, "recipients": [{"email": email, "name": contact}],
            "message": f"Payment is due in {days} days."}
    return ScenarioStep("invoicing/lookup-send", convo.done(), ("send_invoice", args))


def _inv_payment_then_open(rng: Random) -> ScenarioStep:
    cid, name, _, _ = pick(rng, _CUSTOMERS)
    inv, amount, cur, day = _invoice(rng), rng.randint(3, 90) * 100, pick(rng, CURRENCIES), random_day(rng)
    convo = Convo(rng, f"{name} ({cid}) paid {amount} {cur} for {inv} by bank transfer on {day}. "
                        "Record it, then list what is still open for them.")
    convo.called("record_payment", {"invoice_id": inv, "amount": {"value": amount, "currency": cur}, "paid_on": day,
                                    "method": "bank_transfer"}, {"payment_id": f"pay_{rng.randint(1000, 9999)}"})
    target = ("list_invoices", {"filter": {"customer_id": cid, "status": "open"}})
    return ScenarioStep("invoicing/payment-open", convo.done(), target)


def _inv_create(rng: Random) -> ScenarioStep:
    cid, name, _, _ = pick(rng, _CUSTOMERS)
    cur = pick(rng, CURRENCIES)
    lines = [{"description": svc, "quantity": rng.randint(1, 20), "unit_price": rng.choice((45, 90, 250))}
             for svc in rng.sample(_SERVICES, rng.randint(1, 3))]
    vat = rng.random() < 0.4
    if vat:
        for line in lines:
            line["tax_code"] = "VAT20"
    parts = "; ".join(f"{ln['quantity']} x {ln['description']} at {ln['unit_price']}" for ln in lines)
    text = f"Create an invoice in {cur} for {name} ({cid}): {parts}."
    text += " Apply tax code VAT20 to every line." if vat else ""
    args: dict[str, Any] = {"customer_id": cid, "currency": cur, "lines": lines}
    if rng.random() < 0.5:
        args["due_date"] = random_day(rng)
        text += f" Due {args['due_date']}."
    if rng.random() < 0.3:
        args["notes"] = "PO 4471"
        text += " Add the note 'PO 4471'."
    return ScenarioStep("invoicing/create", Convo(rng, text).done(), ("create_invoice", args))


def _inv_record_payment(rng: Random) -> ScenarioStep:
    inv, amount, cur, day = _invoice(rng), rng.randint(1, 50) * 50, pick(rng, CURRENCIES), random_day(rng)
    method = pick(rng, ("card", "bank_transfer", "cash"))
    text = f"Record a {method.replace('_', ' ')} payment of {amount} {cur} on {inv}, received {day}."
    args = {"invoice_id": inv, "amount": {"value": amount, "currency": cur}, "paid_on": day, "method": method}
    return ScenarioStep("invoicing/record-payment", Convo(rng, text).done(), ("record_payment", args))


def _inv_list_range(rng: Random) -> ScenarioStep:
    cid, name, _, _ = pick(rng, _CUSTOMERS)
    start, end = sorted((random_day(rng), random_day(rng)))
    text = f"List the invoices for {name} ({cid}) dated {start} to {end}."
    args: dict[str, Any] = {"filter": {"customer_id": cid, "date": {"from": start, "to": end}}}
    if rng.random() < 0.4:
        args["page"] = {"size": 50}
        text += " Show 50 per page."
    return ScenarioStep("invoicing/list-range", Convo(rng, text).done(), ("list_invoices", args))


def _inv_search_by_customer(rng: Random) -> ScenarioStep:
    cid, name, _, _ = pick(rng, _CUSTOMERS)
    text = f"Find the unpaid invoices for {name} (customer {cid})."
    return ScenarioStep("invoicing/search-by-customer", Convo(rng, text).done(),
                        ("search_invoices", {"query": f"unpaid {name}", "customer": cid}))


KIT = Kit("ws-invoicing", system_prompt("Northwind Bookkeeping", "invoicing"), INVOICING,
          (_inv_customer_filter, _inv_draft_send), (_inv_create_finalize, _inv_lookup_send, _inv_payment_then_open),
          (_inv_create, _inv_record_payment, _inv_list_range), (_inv_search_by_customer,))
