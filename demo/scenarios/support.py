"""ws-support: Brightdesk's tickets, customers and escalations."""

from __future__ import annotations

from random import Random
from typing import Any

from demo.scenarios.parts import (
    Convo,
    Kit,
    Rejection,
    ScenarioStep,
    error,
    pick,
    system_prompt,
)
from demo.tools import SUPPORT

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
    _, name, _ = pick(rng, _PEOPLE)
    ticket = _ticket(rng)
    news = pick(rng, ("the refund went through", "the duplicate charge was reversed", "their account is unlocked"))
    rejected = ("reply_ticket", {"ticket_id": ticket, "body": f"Hi {name.split()[0]}, {news}."})
    convo = Convo(rng, f"Reply on ticket {ticket} and let {name} know {news}.").called(
        *rejected, error("failed_precondition", f"ticket {ticket} is closed; closed tickets do not accept replies")
    )
    recovery = ("reopen_ticket", {"ticket_id": ticket, "reason": f"Customer update: {news}"})
    return Rejection("support/closed-ticket", convo.done(), rejected, recovery)


def _sup_customer_email(rng: Random) -> Rejection:
    _, name, email = pick(rng, _PEOPLE)
    ticket = _ticket(rng)
    fix = pick(rng, ("the login bug", "the CSV export error", "the missing invoices page"))
    rejected = ("send_email", {"to": [{"email": email, "name": name}], "subject": f"Update on {ticket}",
                               "body": f"We fixed {fix}."})
    convo = Convo(rng, f"Let {name} ({email}) know we fixed {fix} from ticket {ticket}.").called(
        *rejected, error("permission_denied", "outbound email to customers is disabled in this workspace")
    )
    return Rejection("support/customer-email", convo.done(), rejected,
                     ("reply_ticket", {"ticket_id": ticket, "body": f"Good news: we fixed {fix}."}))


def _sup_name_lookup(rng: Random) -> Rejection:
    _, name, _ = pick(rng, _PEOPLE)
    rejected = ("lookup_customer", {"email": name})
    ask = pick(rng, ("Pull up {n}'s tickets{w}.", "What has {n} been writing to us about{w}?",
                     "Find {n}'s tickets{w}."))
    when = pick(rng, ("", " this week", " this month"))
    convo = Convo(rng, ask.format(n=name, w=when)).called(
        *rejected, error("invalid_argument", f"'{name}' is not an email address; search_tickets finds tickets "
                                             "by customer name")
    )
    return Rejection("support/name-lookup", convo.done(), rejected, ("search_tickets", {"query": name}))


def _sup_customer_not_ticket(rng: Random) -> Rejection:
    cid, name, _ = pick(rng, _PEOPLE)
    rejected = ("get_ticket", {"ticket_id": cid})
    topic = pick(rng, ("the refund", "the login problem", "the export bug"))
    ask = pick(rng, ("Open {n}'s ticket about {t} ({c}).", "Show me the ticket {n} ({c}) filed about {t}.",
                     "Customer {c}, {n}, asks about {t}: pull up their ticket."))
    convo = Convo(rng, ask.format(n=name, c=cid, t=topic)).called(
        *rejected, error("not_found", f"{cid} is a customer id, not a ticket; search_tickets with "
                                      "filter.customer_id lists a customer's tickets")
    )
    return Rejection("support/customer-not-ticket", convo.done(), rejected,
                     ("search_tickets", {"filter": {"customer_id": cid}}))


def _sup_lookup_search(rng: Random) -> ScenarioStep:
    cid, name, email = pick(rng, _PEOPLE)
    status = pick(rng, ("open", "pending"))
    convo = Convo(rng, f"{email} wrote in again. Find their {status} tickets.")
    convo.called("lookup_customer", {"email": email}, {"customer_id": cid, "name": name, "plan": "business"})
    return ScenarioStep("support/lookup-search", convo.done(),
                        ("search_tickets", {"filter": {"customer_id": cid, "status": status}}))


def _sup_check_escalate(rng: Random) -> ScenarioStep:
    ticket = _ticket(rng)
    subject = pick(rng, ("Customer sees another account's invoices", "Password reset email went to a stranger"))
    convo = Convo(rng, f"Ticket {ticket} may be a data leak. Check it and escalate it urgently if so.")
    convo.called("get_ticket", {"ticket_id": ticket}, {"ticket_id": ticket, "subject": subject, "priority": "normal"})
    args = {"ticket_id": ticket, "team": "security", "reason": subject, "priority": "urgent"}
    return ScenarioStep("support/check-escalate", convo.done(), ("escalate_ticket", args))


def _sup_search_reply(rng: Random) -> ScenarioStep:
    _, name, _ = pick(rng, _PEOPLE)
    ticket, file_id = _ticket(rng), f"fil_{rng.randint(100, 999)}"
    convo = Convo(rng, f"Find {name}'s ticket about the export failing and send them the workaround guide "
                        f"({file_id}).")
    convo.called("search_tickets", {"query": f"{name} export failing"},
                 {"tickets": [{"ticket_id": ticket, "subject": "Export fails with timeout", "customer": name}]})
    args = {"ticket_id": ticket, "body": "Here is the workaround guide for the export issue.",
            "attachments": [{"file_id": file_id}]}
    return ScenarioStep("support/search-reply", convo.done(), ("reply_ticket", args))


def _sup_internal_email(rng: Random) -> ScenarioStep:
    (to_name, to_email), (cc_name, cc_email) = rng.sample(_COLLEAGUES, 2)
    ticket = _ticket(rng)
    text = f"Email {to_name} ({to_email}) a summary of ticket {ticket}: the customer needs a callback today."
    args: dict[str, Any] = {"to": [{"email": to_email, "name": to_name}], "subject": f"Summary of {ticket}",
                            "body": "The customer needs a callback today."}
    if rng.random() < 0.5:
        args["cc"] = [{"email": cc_email}]
        text += f" Copy {cc_email}."
    return ScenarioStep("support/internal-email", Convo(rng, text).done(), ("send_email", args))


def _sup_escalate(rng: Random) -> ScenarioStep:
    ticket = _ticket(rng)
    team, reason = pick(rng, (("engineering", "the API returns 500 errors"), ("billing", "a refund is stuck"),
                               ("security", "a suspicious login was reported")))
    text = f"Escalate {ticket} to {team}: {reason}."
    args: dict[str, Any] = {"ticket_id": ticket, "team": team, "reason": reason}
    if rng.random() < 0.5:
        args["priority"] = "high"
        text += " Make it high priority."
    return ScenarioStep("support/escalate", Convo(rng, text).done(), ("escalate_ticket", args))


def _sup_lookup(rng: Random) -> ScenarioStep:
    _, _, email = pick(rng, _PEOPLE)
    return ScenarioStep("support/lookup", Convo(rng, f"Who is {email}? Pull up their customer record.").done(),
                        ("lookup_customer", {"email": email}))


def _sup_finance_team(rng: Random) -> ScenarioStep:
    ticket = _ticket(rng)
    text = f"Escalate ticket {ticket} to the finance team, the customer was charged twice."
    args = {"ticket_id": ticket, "team": "finance", "reason": "customer charged twice"}
    return ScenarioStep("support/finance-team", Convo(rng, text).done(), ("escalate_ticket", args))


KIT = Kit("ws-support", system_prompt("Brightdesk", "customer support"), SUPPORT,
          (_sup_closed_ticket, _sup_customer_email, _sup_name_lookup, _sup_customer_not_ticket),
          (_sup_lookup_search, _sup_check_escalate, _sup_search_reply),
          (_sup_internal_email, _sup_escalate, _sup_lookup), (_sup_finance_team,))
