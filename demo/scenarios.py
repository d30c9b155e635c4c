"""Decision situations of the demo workspaces, drawn from a caller's `random.Random`.

Each builder returns one situation with its recorded next call. The recorded call is
always inferable from the conversation: optional keys appear in the target exactly when
the user asked for what they carry, so key-set correctness is a fair test.

* `Rejection`: the assistant's call was rejected by the tool (the conversation holds the
  call and the error); `recovery` is the recorded, different next tool, `rejected` the
  call a failing agent repeats.
* `Step`: a state and its recorded call: a clean multi-step flow, a one-step action, or a
  fresh state before a historically failed call.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from random import Random
from typing import Any, TypeVar

from demo.tools import FILES, INVOICING, SALES, SUPPORT

Call = tuple[str, dict[str, Any]]
Messages = tuple[dict[str, Any], ...]
T = TypeVar("T")


@dataclass(frozen=True)
class Step:
    cluster: str
    messages: Messages
    call: Call


@dataclass(frozen=True)
class Rejection:
    cluster: str
    messages: Messages
    rejected: Call
    recovery: Call


@dataclass(frozen=True)
class Kit:
    """One workspace: its system prompt, tools and situation builders."""

    workspace: str
    system: str
    tools: tuple[dict[str, Any], ...]
    rejections: tuple[Callable[[Random], Rejection], ...]
    flows: tuple[Callable[[Random], Step], ...]
    actions: tuple[Callable[[Random], Step], ...]
    fresh_failures: tuple[Callable[[Random], Step], ...]


class _Convo:
    """A conversation after the system prompt; call ids come from the caller's RNG."""

    def __init__(self, rng: Random, text: str | None = None, history: Messages = ()) -> None:
        self.rng = rng
        self.messages: list[dict[str, Any]] = list(history)
        if text is not None:
            self.messages.append({"role": "user", "content": text})

    def called(self, tool: str, arguments: dict[str, Any], result: dict[str, Any]) -> _Convo:
        call_id = f"call_{self.rng.getrandbits(48):012x}"
        function = {"name": tool, "arguments": json.dumps(arguments)}
        self.messages.append(
            {"role": "assistant", "content": None,
             "tool_calls": [{"id": call_id, "type": "function", "function": function}]}
        )
        self.messages.append({"role": "tool", "tool_call_id": call_id, "content": json.dumps(result)})
        return self

    def done(self) -> Messages:
        return tuple(self.messages)


def _pick(rng: Random, items: Sequence[T]) -> T:
    return items[rng.randrange(len(items))]


def _day(rng: Random) -> str:
    return f"2026-{rng.randint(4, 6):02d}-{rng.randint(1, 28):02d}"


def _error(code: str, message: str) -> dict[str, Any]:
    return {"error": {"code": code, "message": message}}


# --- ws-invoicing -----------------------------------------------------------------------

_CUSTOMERS = (
    ("cus_1042", "Acme Corp", "billing@acme.com", "Maria Lopez"),
    ("cus_2210", "Globex", "ap@globex.io", "Tom Becker"),
    ("cus_3307", "Initech", "finance@initech.com", "Priya Nair"),
    ("cus_4415", "Umbrella Health", "payables@umbrella-health.org", "Jonas Berg"),
    ("cus_5120", "Stark Logistics", "invoices@starklog.com", "Aiko Tanaka"),
    ("cus_6031", "Wayne Studios", "accounts@waynestudios.net", "Sam Okafor"),
)
_SERVICES = ("consulting", "bookkeeping", "payroll processing", "tax advisory", "audit support")
_CURRENCIES = ("EUR", "USD", "GBP")


def _invoice(rng: Random) -> str:
    return f"INV-2026-{rng.randint(100, 999):04d}"


def _inv_customer_filter(rng: Random) -> Rejection:
    cid, name, _, _ = _pick(rng, _CUSTOMERS)
    status = _pick(rng, ("open", "overdue", "draft", "paid"))
    since = _day(rng) if rng.random() < 0.5 else None
    ask = _pick(rng, ("Show me the {s} invoices for {n} (customer {c})", "Pull up {n}'s {s} invoices, customer id {c}"))
    text = ask.format(s=status, n=name, c=cid) + (f", issued since {since}." if since else ".")
    rejected = ("search_invoices", {"query": f"{status} invoices", "customer": cid})
    convo = _Convo(rng, text).called(
        *rejected,
        _error("invalid_argument", "search_invoices does not accept 'customer'; it only does free-text search")
    )
    flt: dict[str, Any] = {"customer_id": cid, "status": status}
    if since:
        flt["date"] = {"from": since}
    return Rejection("invoicing/customer-filter", convo.done(), rejected, ("list_invoices", {"filter": flt}))


def _inv_draft_send(rng: Random) -> Rejection:
    _, _, email, contact = _pick(rng, _CUSTOMERS)
    inv = _invoice(rng)
    rejected = ("send_invoice", {"invoice_id": inv, "recipients": [{"email": email, "name": contact}]})
    convo = _Convo(rng, f"Send invoice {inv} to {contact} at {email}.").called(
        *rejected, _error("failed_precondition", f"invoice {inv} is a draft; drafts cannot be sent")
    )
    return Rejection("invoicing/draft-send", convo.done(), rejected, ("finalize_invoice", {"invoice_id": inv}))


def _inv_create_finalize(rng: Random) -> Step:
    cid, name, _, _ = _pick(rng, _CUSTOMERS)
    hours, rate = rng.randint(2, 40), rng.choice((60, 85, 120, 150))
    cur, svc = _pick(rng, _CURRENCIES), _pick(rng, _SERVICES)
    inv = _invoice(rng)
    args = {"customer_id": cid, "currency": cur, "lines": [{"description": svc, "quantity": hours, "unit_price": rate}]}
    convo = _Convo(rng, f"Bill {name} ({cid}) for {hours} hours of {svc} at {rate} {cur} an hour "
                        "and get it ready to send.")
    convo.called("create_invoice", args, {"invoice_id": inv, "status": "draft", "total": hours * rate})
    return Step("invoicing/create-finalize", convo.done(), ("finalize_invoice", {"invoice_id": inv}))


def _inv_lookup_send(rng: Random) -> Step:
    cid, _, email, contact = _pick(rng, _CUSTOMERS)
    inv, days = _invoice(rng), rng.choice((7, 14, 30))
    convo = _Convo(rng, f"Email invoice {inv} to {contact} ({email}) with a note that payment is due in {days} days.")
    convo.called("get_invoice", {"invoice_id": inv}, {"invoice_id": inv, "customer_id": cid, "status": "open"})
    args = {"invoice_id": inv, "recipients": [{"email": email, "name": contact}],
            "message": f"Payment is due in {days} days."}
    return Step("invoicing/lookup-send", convo.done(), ("send_invoice", args))


def _inv_payment_then_open(rng: Random) -> Step:
    cid, name, _, _ = _pick(rng, _CUSTOMERS)
    inv, amount, cur, day = _invoice(rng), rng.randint(3, 90) * 100, _pick(rng, _CURRENCIES), _day(rng)
    convo = _Convo(rng, f"{name} ({cid}) paid {amount} {cur} for {inv} by bank transfer on {day}. "
                        "Record it, then list what is still open for them.")
    convo.called("record_payment", {"invoice_id": inv, "amount": {"value": amount, "currency": cur}, "paid_on": day,
                                    "method": "bank_transfer"}, {"payment_id": f"pay_{rng.randint(1000, 9999)}"})
    target = ("list_invoices", {"filter": {"customer_id": cid, "status": "open"}})
    return Step("invoicing/payment-open", convo.done(), target)


def _inv_create(rng: Random) -> Step:
    cid, name, _, _ = _pick(rng, _CUSTOMERS)
    cur = _pick(rng, _CURRENCIES)
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
        args["due_date"] = _day(rng)
        text += f" Due {args['due_date']}."
    if rng.random() < 0.3:
        args["notes"] = "PO 4471"
        text += " Add the note 'PO 4471'."
    return Step("invoicing/create", _Convo(rng, text).done(), ("create_invoice", args))


def _inv_record_payment(rng: Random) -> Step:
    inv, amount, cur, day = _invoice(rng), rng.randint(1, 50) * 50, _pick(rng, _CURRENCIES), _day(rng)
    method = _pick(rng, ("card", "bank_transfer", "cash"))
    text = f"Record a {method.replace('_', ' ')} payment of {amount} {cur} on {inv}, received {day}."
    args = {"invoice_id": inv, "amount": {"value": amount, "currency": cur}, "paid_on": day, "method": method}
    return Step("invoicing/record-payment", _Convo(rng, text).done(), ("record_payment", args))


def _inv_list_range(rng: Random) -> Step:
    cid, name, _, _ = _pick(rng, _CUSTOMERS)
    start, end = sorted((_day(rng), _day(rng)))
    text = f"List the invoices for {name} ({cid}) dated {start} to {end}."
    args: dict[str, Any] = {"filter": {"customer_id": cid, "date": {"from": start, "to": end}}}
    if rng.random() < 0.4:
        args["page"] = {"size": 50}
        text += " Show 50 per page."
    return Step("invoicing/list-range", _Convo(rng, text).done(), ("list_invoices", args))


def _inv_search_by_customer(rng: Random) -> Step:
    cid, name, _, _ = _pick(rng, _CUSTOMERS)
    text = f"Find the unpaid invoices for {name} (customer {cid})."
    return Step("invoicing/search-by-customer", _Convo(rng, text).done(),
                ("search_invoices", {"query": f"unpaid {name}", "customer": cid}))


# --- ws-support -------------------------------------------------------------------------

_PEOPLE = (
    ("c_301", "Lena Fischer", "lena@fischer-bau.de"),
    ("c_302", "Omar Haddad", "omar@haddadtrading.com"),
    ("c_303", "Grace Kim", "grace.kim@northpeak.io"),
    ("c_304", "Diego Santos", "diego@santosfoods.br"),
    ("c_305", "Hannah Walsh", "hwalsh@walshlegal.ie"),
    ("c_306", "Victor Petrov", "victor@petrovdesign.com"),
)
_COLLEAGUES = (("Nina Park", "nina@brightdesk.io"), ("Ravi Shah", "ravi@brightdesk.io"),
               ("Ella Moore", "ella@brightdesk.io"))


def _ticket(rng: Random) -> str:
    return f"T-{rng.randint(4000, 9999)}"


def _sup_closed_ticket(rng: Random) -> Rejection:
    _, name, _ = _pick(rng, _PEOPLE)
    ticket = _ticket(rng)
    news = _pick(rng, ("the refund went through", "the duplicate charge was reversed", "their account is unlocked"))
    rejected = ("reply_ticket", {"ticket_id": ticket, "body": f"Hi {name.split()[0]}, {news}."})
    convo = _Convo(rng, f"Reply on ticket {ticket} and let {name} know {news}.").called(
        *rejected, _error("failed_precondition", f"ticket {ticket} is closed; closed tickets do not accept replies")
    )
    recovery = ("reopen_ticket", {"ticket_id": ticket, "reason": f"Customer update: {news}"})
    return Rejection("support/closed-ticket", convo.done(), rejected, recovery)


def _sup_customer_email(rng: Random) -> Rejection:
    _, name, email = _pick(rng, _PEOPLE)
    ticket = _ticket(rng)
    fix = _pick(rng, ("the login bug", "the CSV export error", "the missing invoices page"))
    rejected = ("send_email", {"to": [{"email": email, "name": name}], "subject": f"Update on {ticket}",
                               "body": f"We fixed {fix}."})
    convo = _Convo(rng, f"Let {name} ({email}) know we fixed {fix} from ticket {ticket}.").called(
        *rejected, _error("permission_denied", "outbound email to customers is disabled in this workspace")
    )
    return Rejection("support/customer-email", convo.done(), rejected,
                     ("reply_ticket", {"ticket_id": ticket, "body": f"Good news: we fixed {fix}."}))


def _sup_lookup_search(rng: Random) -> Step:
    cid, name, email = _pick(rng, _PEOPLE)
    status = _pick(rng, ("open", "pending"))
    convo = _Convo(rng, f"{email} wrote in again. Find their {status} tickets.")
    convo.called("lookup_customer", {"email": email}, {"customer_id": cid, "name": name, "plan": "business"})
    return Step("support/lookup-search", convo.done(),
                ("search_tickets", {"filter": {"customer_id": cid, "status": status}}))


def _sup_check_escalate(rng: Random) -> Step:
    ticket = _ticket(rng)
    subject = _pick(rng, ("Customer sees another account's invoices", "Password reset email went to a stranger"))
    convo = _Convo(rng, f"Ticket {ticket} may be a data leak. Check it and escalate it urgently if so.")
    convo.called("get_ticket", {"ticket_id": ticket}, {"ticket_id": ticket, "subject": subject, "priority": "normal"})
    args = {"ticket_id": ticket, "team": "security", "reason": subject, "priority": "urgent"}
    return Step("support/check-escalate", convo.done(), ("escalate_ticket", args))


def _sup_search_reply(rng: Random) -> Step:
    _, name, _ = _pick(rng, _PEOPLE)
    ticket, file_id = _ticket(rng), f"fil_{rng.randint(100, 999)}"
    convo = _Convo(rng, f"Find {name}'s ticket about the export failing and send them the workaround guide "
                        f"({file_id}).")
    convo.called("search_tickets", {"query": f"{name} export failing"},
                 {"tickets": [{"ticket_id": ticket, "subject": "Export fails with timeout", "customer": name}]})
    args = {"ticket_id": ticket, "body": "Here is the workaround guide for the export issue.",
            "attachments": [{"file_id": file_id}]}
    return Step("support/search-reply", convo.done(), ("reply_ticket", args))


def _sup_internal_email(rng: Random) -> Step:
    (to_name, to_email), (cc_name, cc_email) = rng.sample(_COLLEAGUES, 2)
    ticket = _ticket(rng)
    text = f"Email {to_name} ({to_email}) a summary of ticket {ticket}: the customer needs a callback today."
    args: dict[str, Any] = {"to": [{"email": to_email, "name": to_name}], "subject": f"Summary of {ticket}",
                            "body": "The customer needs a callback today."}
    if rng.random() < 0.5:
        args["cc"] = [{"email": cc_email}]
        text += f" Copy {cc_email}."
    return Step("support/internal-email", _Convo(rng, text).done(), ("send_email", args))


def _sup_escalate(rng: Random) -> Step:
    ticket = _ticket(rng)
    team, reason = _pick(rng, (("engineering", "the API returns 500 errors"), ("billing", "a refund is stuck"),
                               ("security", "a suspicious login was reported")))
    text = f"Escalate {ticket} to {team}: {reason}."
    args: dict[str, Any] = {"ticket_id": ticket, "team": team, "reason": reason}
    if rng.random() < 0.5:
        args["priority"] = "high"
        text += " Make it high priority."
    return Step("support/escalate", _Convo(rng, text).done(), ("escalate_ticket", args))


def _sup_lookup(rng: Random) -> Step:
    _, _, email = _pick(rng, _PEOPLE)
    return Step("support/lookup", _Convo(rng, f"Who is {email}? Pull up their customer record.").done(),
                ("lookup_customer", {"email": email}))


def _sup_finance_team(rng: Random) -> Step:
    ticket = _ticket(rng)
    text = f"Escalate ticket {ticket} to the finance team, the customer was charged twice."
    return Step("support/finance-team", _Convo(rng, text).done(),
                ("escalate_ticket", {"ticket_id": ticket, "team": "finance", "reason": "customer charged twice"}))


# --- ws-sales ---------------------------------------------------------------------------

_CONTACTS = (
    ("ct_7001", "Dana Whitfield", "dana@brightline.com", "Brightline", "brightline.com"),
    ("ct_7002", "Marcus Reed", "marcus@tidewater.co", "Tidewater", "tidewater.co"),
    ("ct_7003", "Sofia Rossi", "sofia.rossi@veloce.it", "Veloce", "veloce.it"),
    ("ct_7004", "Kenji Mori", "kmori@hikari.jp", "Hikari", "hikari.jp"),
    ("ct_7005", "Amara Obi", "amara@sunfield.ng", "Sunfield", "sunfield.ng"),
    ("ct_7006", "Lukas Novak", "lukas@brnoworks.cz", "Brno Works", "brnoworks.cz"),
)
_TOPICS = ("demo", "pricing review", "kickoff", "renewal check-in", "security Q&A")


def _slot(rng: Random, minutes: int) -> tuple[str, str]:
    day, hour = _day(rng), rng.randint(9, 16)
    end_min = hour * 60 + minutes
    return f"{day}T{hour:02d}:00:00", f"{day}T{end_min // 60:02d}:{end_min % 60:02d}:00"


def _sales_conflict(rng: Random) -> Rejection:
    _, name, email, _, _ = _pick(rng, _CONTACTS)
    minutes, topic = rng.choice((30, 45, 60)), _pick(rng, _TOPICS)
    start, end = _slot(rng, minutes)
    rejected = ("create_event", {"title": f"{topic.title()} with {name}", "start": start, "end": end,
                                 "attendees": [{"email": email}]})
    convo = _Convo(rng, f"Book a {minutes}-minute {topic} with {name} ({email}) at {start.replace('T', ' ')[:16]}.")
    convo.called(*rejected, _error("conflict", f"{email} is busy from {start} to {end}"))
    day = start[:10]
    recovery = ("find_free_slots", {"attendees": [{"email": email}],
                                    "window": {"from": f"{day}T08:00:00", "to": f"{day}T18:00:00"},
                                    "duration_minutes": minutes})
    return Rejection("sales/calendar-conflict", convo.done(), rejected, recovery)


def _sales_duplicate(rng: Random) -> Rejection:
    _, name, email, company, _ = _pick(rng, _CONTACTS)
    rejected = ("create_contact", {"name": name, "email": email, "company": {"name": company}})
    ask = _pick(rng, ("Add {n} from {c} ({e}) to the CRM.", "Please create a contact for {n} ({e}) at {c}.",
                      "{c} has a new champion, {n} <{e}>. Put them in the CRM."))
    convo = _Convo(rng, ask.format(n=name, c=company, e=email)).called(
        *rejected, _error("already_exists", f"a contact with email {email} already exists")
    )
    return Rejection("sales/duplicate-contact", convo.done(), rejected, ("find_contact", {"query": email}))


def _sales_find_log(rng: Random) -> Step:
    cid, name, email, _, _ = _pick(rng, _CONTACTS)
    topic = _pick(rng, _TOPICS)
    convo = _Convo(rng, f"Log that I called {name} today about the {topic}.")
    convo.called("find_contact", {"query": name}, {"contacts": [{"contact_id": cid, "name": name, "email": email}]})
    return Step("sales/find-log", convo.done(),
                ("log_activity", {"contact_id": cid, "type": "call", "notes": f"Call about the {topic}."}))


def _sales_find_deal(rng: Random) -> Step:
    cid, name, _, company, _ = _pick(rng, _CONTACTS)
    deal, amount, cur = f"dl_{rng.randint(100, 999)}", rng.randint(5, 80) * 1000, _pick(rng, _CURRENCIES)
    convo = _Convo(rng, f"Move the {company} deal to negotiation at {amount} {cur}.")
    convo.called("find_contact", {"query": company},
                 {"contacts": [{"contact_id": cid, "name": name, "deals": [{"deal_id": deal, "stage": "proposal"}]}]})
    args = {"deal_id": deal, "fields": {"stage": "negotiation", "amount": {"value": amount, "currency": cur}}}
    return Step("sales/find-deal", convo.done(), ("update_deal", args))


def _sales_slots_event(rng: Random) -> Step:
    _, name, email, _, _ = _pick(rng, _CONTACTS)
    topic = _pick(rng, _TOPICS)
    start, end = _slot(rng, 30)
    on_zoom = rng.random() < 0.5
    text = f"Find a 30-minute slot with {name} ({email}) and book a {topic}" + (" on Zoom." if on_zoom else ".")
    convo = _Convo(rng, text)
    convo.called("find_free_slots", {"attendees": [{"email": email}],
                                     "window": {"from": f"{start[:10]}T08:00:00", "to": f"{start[:10]}T18:00:00"},
                                     "duration_minutes": 30}, {"slots": [{"start": start, "end": end}]})
    args: dict[str, Any] = {"title": f"{topic.title()} with {name}", "start": start, "end": end,
                            "attendees": [{"email": email}]}
    if on_zoom:
        args["location"] = {"name": "Zoom"}
    return Step("sales/slots-event", convo.done(), ("create_event", args))


def _sales_create_contact(rng: Random) -> Step:
    first = _pick(rng, ("Ines", "Paul", "Mei", "Tariq", "Olga", "Ben"))
    last = _pick(rng, ("Alvarez", "Schmidt", "Chen", "Nasser", "Ivanova", "Carter"))
    company, domain = _pick(rng, (("Northwind", "northwind.com"), ("Fabrikam", "fabrikam.io"),
                                  ("Contoso", "contoso.net")))
    email = f"{first.lower()}.{last.lower()}@{domain}"
    text = f"New lead: {first} {last}, {email}, works at {company} ({domain})."
    args: dict[str, Any] = {"name": f"{first} {last}", "email": email, "company": {"name": company, "domain": domain}}
    if rng.random() < 0.5:
        args["tags"] = ["inbound"]
        text += " Tag them inbound."
    return Step("sales/create-contact", _Convo(rng, text).done(), ("create_contact", args))


def _sales_update_stage(rng: Random) -> Step:
    deal = f"dl_{rng.randint(100, 999)}"
    stage = _pick(rng, ("qualified", "proposal", "closed_lost"))
    text = f"Set deal {deal} to stage {stage}."
    args: dict[str, Any] = {"deal_id": deal, "fields": {"stage": stage}}
    if rng.random() < 0.5:
        args["fields"]["close_date"] = _day(rng)
        text += f" Expected close date {args['fields']['close_date']}."
    return Step("sales/update-stage", _Convo(rng, text).done(), ("update_deal", args))


def _sales_create_event(rng: Random) -> Step:
    people = rng.sample(_CONTACTS, 2)
    topic = _pick(rng, _TOPICS)
    start, end = _slot(rng, 60)
    text = (f"Put a one-hour {topic} on the calendar at {start.replace('T', ' ')[:16]} with {people[0][2]}; "
            f"invite {people[1][2]} as optional. Location: our office, 12 Harbour St.")
    args = {"title": topic.title(), "start": start, "end": end,
            "attendees": [{"email": people[0][2]}, {"email": people[1][2], "optional": True}],
            "location": {"name": "Office", "address": "12 Harbour St"}}
    return Step("sales/create-event", _Convo(rng, text).done(), ("create_event", args))


def _sales_won_stage(rng: Random) -> Step:
    deal = f"dl_{rng.randint(100, 999)}"
    return Step("sales/won-stage", _Convo(rng, f"We won deal {deal}! Mark it as won.").done(),
                ("update_deal", {"deal_id": deal, "fields": {"stage": "won"}}))


# --- ws-files ---------------------------------------------------------------------------

_FOLDERS = (("fld_210", "Q3 reports"), ("fld_211", "Contracts"), ("fld_212", "Board packs"),
            ("fld_213", "Onboarding"), ("fld_214", "Tax 2026"))
_DOCS = (("fil_501", "pricing sheet"), ("fil_502", "NDA template"), ("fil_503", "onboarding checklist"),
         ("fil_504", "Q3 revenue summary"), ("fil_505", "security policy"), ("fil_506", "travel policy"))
_PARTNERS = ("alex@partnerco.com", "jo@auditors.eu", "sam@lawfirm.com", "kai@agency.io")


def _files_folder_read(rng: Random) -> Rejection:
    fld, name = _pick(rng, _FOLDERS)
    rejected = ("read_file", {"file_id": fld})
    ask = _pick(rng, ("What's in {n} ({f})?", "Open {f} ({n}) for me.", "Can you check the {n} folder, {f}?"))
    convo = _Convo(rng, ask.format(n=name, f=fld)).called(
        *rejected, _error("invalid_argument", f"{fld} is a folder; read_file needs a file id")
    )
    return Rejection("files/folder-read", convo.done(), rejected, ("list_files", {"folder_id": fld}))


def _files_missing_destination(rng: Random) -> Rejection:
    fil, doc = _pick(rng, _DOCS)
    parent, parent_name = _pick(rng, _FOLDERS)
    sub = _pick(rng, ("Archive", "Signed", "Drafts", "2026"))
    guess = f"fld_{sub.lower()}"
    rejected = ("move_file", {"file_id": fil, "destination": {"folder_id": guess}})
    convo = _Convo(rng, f"Move the {doc} ({fil}) into the {sub} folder inside {parent_name} ({parent}).").called(
        *rejected, _error("not_found", f"destination folder {guess} does not exist")
    )
    return Rejection("files/missing-destination", convo.done(), rejected,
                     ("create_folder", {"name": sub, "parent_id": parent}))


def _files_search_share(rng: Random) -> Step:
    fil, doc = _pick(rng, _DOCS)
    email, role = _pick(rng, _PARTNERS), _pick(rng, ("viewer", "editor"))
    convo = _Convo(rng, f"Share the {doc} with {email} as {role} and notify them.")
    convo.called("search_files", {"query": doc}, {"files": [{"file_id": fil, "name": doc}]})
    args = {"file_id": fil, "grants": [{"email": email, "role": role}], "notify": True}
    return Step("files/search-share", convo.done(), ("share_file", args))


def _files_list_read(rng: Random) -> Step:
    fld, name = _pick(rng, _FOLDERS)
    newest, older = f"fil_{rng.randint(600, 699)}", f"fil_{rng.randint(700, 799)}"
    convo = _Convo(rng, f"Open the newest document in {name} ({fld}).")
    convo.called("list_files", {"folder_id": fld, "filter": {"type": "document"}},
                 {"files": [{"file_id": newest, "modified": "2026-06-22"},
                            {"file_id": older, "modified": "2026-05-11"}]})
    return Step("files/list-read", convo.done(), ("read_file", {"file_id": newest}))


def _files_search_move(rng: Random) -> Step:
    fil, doc = _pick(rng, _DOCS)
    fld, name = _pick(rng, _FOLDERS)
    convo = _Convo(rng, f"Move the {doc} into {name} ({fld}).")
    convo.called("search_files", {"query": doc}, {"files": [{"file_id": fil, "name": doc}]})
    return Step("files/search-move", convo.done(), ("move_file", {"file_id": fil, "destination": {"folder_id": fld}}))


def _files_share(rng: Random) -> Step:
    fil, doc = _pick(rng, _DOCS)
    emails = rng.sample(_PARTNERS, rng.randint(1, 2))
    text = f"Give {' and '.join(emails)} view access to the {doc} ({fil})."
    args: dict[str, Any] = {"file_id": fil, "grants": [{"email": e, "role": "viewer"} for e in emails]}
    if rng.random() < 0.5:
        args["message"] = "For your review."
        text += " Add the message 'For your review.'"
    return Step("files/share", _Convo(rng, text).done(), ("share_file", args))


def _files_list_filtered(rng: Random) -> Step:
    fld, name = _pick(rng, _FOLDERS)
    kind, day = _pick(rng, ("spreadsheet", "pdf", "document")), _day(rng)
    text = f"Which {kind}s in {name} ({fld}) changed after {day}?"
    return Step("files/list-filtered", _Convo(rng, text).done(),
                ("list_files", {"folder_id": fld, "filter": {"type": kind, "modified_after": day}}))


def _files_new_folder(rng: Random) -> Step:
    parent, parent_name = _pick(rng, _FOLDERS)
    name = _pick(rng, ("Invoices", "Drafts", "Q4", "Signed", "Templates"))
    convo = _Convo(rng, f"Create a folder called {name} inside {parent_name} ({parent}).")
    return Step("files/new-folder", convo.done(), ("create_folder", {"name": name, "parent_id": parent}))


def _files_summarise_folder(rng: Random) -> Step:
    fld, name = _pick(rng, _FOLDERS)
    return Step("files/summarise-folder", _Convo(rng, f"Summarise what is in {name} ({fld}).").done(),
                ("read_file", {"file_id": fld}))


def _system(company: str, role: str) -> str:
    return (f"You are the {role} assistant for {company}. Act through the tools listed; make exactly one "
            "tool call per turn and use only ids that appear in the conversation.")


KITS = (
    Kit("ws-invoicing", _system("Northwind Bookkeeping", "invoicing"), INVOICING,
        (_inv_customer_filter, _inv_draft_send), (_inv_create_finalize, _inv_lookup_send, _inv_payment_then_open),
        (_inv_create, _inv_record_payment, _inv_list_range), (_inv_search_by_customer,)),
    Kit("ws-support", _system("Brightdesk", "customer support"), SUPPORT,
        (_sup_closed_ticket, _sup_customer_email), (_sup_lookup_search, _sup_check_escalate, _sup_search_reply),
        (_sup_internal_email, _sup_escalate, _sup_lookup), (_sup_finance_team,)),
    Kit("ws-sales", _system("Orbit Sales", "sales"), SALES,
        (_sales_conflict, _sales_duplicate), (_sales_find_log, _sales_find_deal, _sales_slots_event),
        (_sales_create_contact, _sales_update_stage, _sales_create_event), (_sales_won_stage,)),
    Kit("ws-files", _system("Ledgerline", "document"), FILES,
        (_files_folder_read, _files_missing_destination), (_files_search_share, _files_list_read, _files_search_move),
        (_files_share, _files_list_filtered, _files_new_folder), (_files_summarise_folder,)),
)


def wrap_up(rng: Random, step: Step) -> Messages:
    """The step's call succeeded and was reported; the user closes: the right move is no call."""
    convo = _Convo(rng, history=step.messages)
    convo.called(*step.call, {"status": "ok"})
    convo.messages.append({"role": "assistant", "content": _pick(rng, ("Done.", "All set.", "That's done."))})
    convo.messages.append({"role": "user", "content": _pick(rng, ("Thanks, that's all for now.", "Great, thank you!"))})
    return convo.done()
