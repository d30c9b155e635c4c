"""ws-sales: Orbit Sales' contacts, deals and calendar."""

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
from demo.tools import SALES

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
    day, hour = random_day(rng), rng.randint(9, 16)
    end_min = hour * 60 + minutes
    return f"{day}T{hour:02d}:00:00", f"{day}T{end_min // 60:02d}:{end_min % 60:02d}:00"


def _sales_conflict(rng: Random) -> Rejection:
    _, name, email, _, _ = pick(rng, _CONTACTS)
    minutes, topic = rng.choice((30, 45, 60)), pick(rng, _TOPICS)
    start, end = _slot(rng, minutes)
    rejected = ("create_event", {"title": f"{topic.title()} with {name}", "start": start, "end": end,
                                 "attendees": [{"email": email}]})
    convo = Convo(rng, f"Book a {minutes}-minute {topic} with {name} ({email}) at {start.replace('T', ' ')[:16]}.")
    convo.called(*rejected, error("conflict", f"{email} is busy from {start} to {end}"))
    day = start[:10]
    recovery = ("find_free_slots", {"attendees": [{"email": email}],
                                    "window": {"from": f"{day}T08:00:00", "to": f"{day}T18:00:00"},
                                    "duration_minutes": minutes})
    return Rejection("sales/calendar-conflict", convo.done(), rejected, recovery)


def _sales_duplicate(rng: Random) -> Rejection:
    _, name, email, company, _ = pick(rng, _CONTACTS)
    rejected = ("create_contact", {"name": name, "email": email, "company": {"name": company}})
    ask = pick(rng, ("Add {n} from {c} ({e}) to the CRM.", "Please create a contact for {n} ({e}) at {c}.",
                      "{c} has a new champion, {n} <{e}>. Put them in the CRM."))
    convo = Convo(rng, ask.format(n=name, c=company, e=email)).called(
        *rejected, error("already_exists", f"a contact with email {email} already exists")
    )
    return Rejection("sales/duplicate-contact", convo.done(), rejected, ("find_contact", {"query": email}))


def _sales_find_log(rng: Random) -> ScenarioStep:
    cid, name, email, _, _ = pick(rng, _CONTACTS)
    topic = pick(rng, _TOPICS)
    convo = Convo(rng, f"Log that I called {name} today about the {topic}.")
    convo.called("find_contact", {"query": name}, {"contacts": [{"contact_id": cid, "name": name, "email": email}]})
    return ScenarioStep("sales/find-log", convo.done(),
                        ("log_activity", {"contact_id": cid, "type": "call", "notes": f"Call about the {topic}."}))


def _sales_find_deal(rng: Random) -> ScenarioStep:
    cid, name, _, company, _ = pick(rng, _CONTACTS)
    deal, amount, cur = f"dl_{rng.randint(100, 999)}", rng.randint(5, 80) * 1000, pick(rng, CURRENCIES)
    convo = Convo(rng, f"Move the {company} deal to negotiation at {amount} {cur}.")
    convo.called("find_contact", {"query": company},
                 {"contacts": [{"contact_id": cid, "name": name, "deals": [{"deal_id": deal, "stage": "proposal"}]}]})
    args = {"deal_id": deal, "fields": {"stage": "negotiation", "amount": {"value": amount, "currency": cur}}}
    return ScenarioStep("sales/find-deal", convo.done(), ("update_deal", args))


def _sales_slots_event(rng: Random) -> ScenarioStep:
    _, name, email, _, _ = pick(rng, _CONTACTS)
    topic = pick(rng, _TOPICS)
    start, end = _slot(rng, 30)
    on_zoom = rng.random() < 0.5
    text = f"Find a 30-minute slot with {name} ({email}) and book a {topic}" + (" on Zoom." if on_zoom else ".")
    convo = Convo(rng, text)
    convo.called("find_free_slots", {"attendees": [{"email": email}],
                                     "window": {"from": f"{start[:10]}T08:00:00", "to": f"{start[:10]}T18:00:00"},
                                     "duration_minutes": 30}, {"slots": [{"start": start, "end": end}]})
    args: dict[str, Any] = {"title": f"{topic.title()} with {name}", "start": start, "end": end,
                            "attendees": [{"email": email}]}
    if on_zoom:
        args["location"] = {"name": "Zoom"}
    return ScenarioStep("sales/slots-event", convo.done(), ("create_event", args))


def _sales_create_contact(rng: Random) -> ScenarioStep:
    first = pick(rng, ("Ines", "Paul", "Mei", "Tariq", "Olga", "Ben"))
    last = pick(rng, ("Alvarez", "Schmidt", "Chen", "Nasser", "Ivanova", "Carter"))
    company, domain = pick(rng, (("Northwind", "northwind.com"), ("Fabrikam", "fabrikam.io"),
                                  ("Contoso", "contoso.net")))
    email = f"{first.lower()}.{last.lower()}@{domain}"
    text = f"New lead: {first} {last}, {email}, works at {company} ({domain})."
    args: dict[str, Any] = {"name": f"{first} {last}", "email": email, "company": {"name": company, "domain": domain}}
    if rng.random() < 0.5:
        args["tags"] = ["inbound"]
        text += " Tag them inbound."
    return ScenarioStep("sales/create-contact", Convo(rng, text).done(), ("create_contact", args))


def _sales_update_stage(rng: Random) -> ScenarioStep:
    deal = f"dl_{rng.randint(100, 999)}"
    stage = pick(rng, ("qualified", "proposal", "closed_lost"))
    text = f"Set deal {deal} to stage {stage}."
    args: dict[str, Any] = {"deal_id": deal, "fields": {"stage": stage}}
    if rng.random() < 0.5:
        args["fields"]["close_date"] = random_day(rng)
        text += f" Expected close date {args['fields']['close_date']}."
    return ScenarioStep("sales/update-stage", Convo(rng, text).done(), ("update_deal", args))


def _sales_create_event(rng: Random) -> ScenarioStep:
    people = rng.sample(_CONTACTS, 2)
    topic = pick(rng, _TOPICS)
    start, end = _slot(rng, 60)
    text = (f"Put a one-hour {topic} on the calendar at {start.replace('T', ' ')[:16]} with {people[0][2]}; "
            f"invite {people[1][2]} as optional. Location: our office, 12 Harbour St.")
    args = {"title": topic.title(), "start": start, "end": end,
            "attendees": [{"email": people[0][2]}, {"email": people[1][2], "optional": True}],
            "location": {"name": "Office", "address": "12 Harbour St"}}
    return ScenarioStep("sales/create-event", Convo(rng, text).done(), ("create_event", args))


def _sales_won_stage(rng: Random) -> ScenarioStep:
    deal = f"dl_{rng.randint(100, 999)}"
    return ScenarioStep("sales/won-stage", Convo(rng, f"We won deal {deal}! Mark it as won.").done(),
                        ("update_deal", {"deal_id": deal, "fields": {"stage": "won"}}))


KIT = Kit("ws-sales", system_prompt("Orbit Sales", "sales"), SALES,
          (_sales_conflict, _sales_duplicate), (_sales_find_log, _sales_find_deal, _sales_slots_event),
          (_sales_create_contact, _sales_update_stage, _sales_create_event), (_sales_won_stage,))
