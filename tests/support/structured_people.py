"""A planted set of structured tool results, for person names under keys (tests/replay/privacy/
test_structured_people.py and scripts/bench_redact.py --structured).

Generated here, seeded, not taken from `presidio-evaluator`: that package pulls spaCy, scikit-learn, pandas and
plotly and loads a downloaded spaCy model at run time, and its templates are prose sentences, not JSON. The
shape is the same: templates (here, the records tools return: orders, tickets, contacts, e-mails, CRM rows,
shipments, status changes, catalogues), filled with names from several languages and with look-alikes that
sit under the same keys (products, organisations, teams, ids, enum values, places and dates under
`from`/`to`). Each case says which values must go (every name) and which must stay byte-identical (every
look-alike). A name is scored redacted when no occurrence of it is left in the redacted record; a look-alike is
scored changed when fewer of its occurrences are left than were there.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

NAMES: dict[str, list[tuple[str, str]]] = {
    "English": [("Jane", "Roe"), ("Michael", "Thompson"), ("Emily", "Clarke"), ("David", "O'Connor")],
    "German": [("Jürgen", "Weiß"), ("Anna-Lena", "Schröder"), ("Lukas", "von Stein"), ("Hannah", "Brückner")],
    "French": [("Amélie", "Dubois"), ("François", "Lefèvre"), ("Chloé", "Marchand"), ("Jean-Luc", "Girard")],
    "Spanish": [("José María", "García-López"), ("Lucía", "Fernández"), ("Álvaro", "Núñez"), ("Carmen", "Ruiz")],
    "Portuguese": [("João", "Gonçalves"), ("Ana", "Souza"), ("Thiago", "Araújo"), ("Beatriz", "dos Santos")],
    "Italian": [("Giulia", "Bianchi"), ("Lorenzo", "De Luca"), ("Francesca", "Romano"), ("Matteo", "Esposito")],
    "Dutch": [("Jan", "van der Berg"), ("Sanne", "de Vries"), ("Pieter", "Bakker"), ("Femke", "Jansen")],
    "Polish": [("Łukasz", "Wiśniewski"), ("Małgorzata", "Zielińska"), ("Piotr", "Kowalczyk"), ("Zofia", "Wójcik")],
    "Turkish": [("Çağlar", "Şahin"), ("Ayşe", "Yıldız"), ("Mehmet", "Öztürk"), ("Elif", "Çelik")],
    "Greek": [("Γιώργος", "Παπαδόπουλος"), ("Μαρία", "Νικολάου"), ("Νίκος", "Γεωργίου"), ("Ελένη", "Δημητρίου")],
    "Russian": [("Иван", "Петров"), ("Ольга", "Смирнова"), ("Дмитрий", "Кузнецов"), ("Анна", "Волкова")],
    "Vietnamese": [("Văn An", "Nguyễn"), ("Thị Lan", "Trần"), ("Minh", "Phạm"), ("Thu", "Lê")],
    "Irish": [("Siobhán", "Ní Bhriain"), ("Seán", "Ó Súilleabháin"), ("Aoife", "Murphy"), ("Cian", "Byrne")],
    "Arabic": [("محمد", "العلي"), ("فاطمة", "الزهراء"), ("Omar", "al-Hassan"), ("Layla", "Haddad")],
    "Chinese": [("伟", "王"), ("秀英", "李"), ("Wei", "Zhang"), ("Mei", "Chen")],
    "Japanese": [("太郎", "山田"), ("花子", "佐藤"), ("Haruto", "Suzuki"), ("Yui", "Takahashi")],
    "Korean": [("민준", "김"), ("서연", "이"), ("Ji-woo", "Park"), ("Seo-yeon", "Choi")],
    "Hindi": [("प्रिया", "शर्मा"), ("राहुल", "वर्मा"), ("Priya", "Sharma"), ("Arjun", "Patel")],
    "held-out": [("María José", "de la Cruz"), ("Jean-Pierre", "L'Écuyer"), ("Charles", "d'Artagnan"),
                 ("Oluwaseun", "Adeyemi"), ("Ngozi", "Okonjo-Iweala"), ("Søren", "Kierkegaard"), ("Ólafur", "Arnalds"),
                 ("Tomasz", "Dąbrowski"), ("สมชาย", "ใจดี"), ("דוד", "כהן"), ("Aigerim", "Nurlanovna"),
                 ("Mary-Kate", "O'Neill-Smith"), ("Ximena", "Ñáñez"), ("Kōji", "Tanaka"), ("bell", "hooks")],
}
"""Given and family names per language (East Asian names written family name first, as their scripts do). The
`held-out` names were written after the rules were tuned on the others, and not tuned against: their figure is
the honest one."""
FAMILY_FIRST = frozenset({"Chinese", "Japanese", "Korean"})

LOOKALIKES: dict[str, list[str]] = {
    "PRODUCT": ["Widget Pro", "ThinkPad Carbon", "Surface Laptop", "Rocket Skates", "Galaxy Tab", "Aeron Chair",
                "Standing Desk", "Trail Runner"],
    "ORGANISATION": ["Acme GmbH", "Globex Corporation", "Initech Ltd", "Umbrella Holdings", "Stark Industries Inc",
                     "Wayne Enterprises LLC"],
    "TEAM": ["Billing Team", "Customer Support", "Platform Ops", "Finance Department", "Sales Desk"],
    "ID": ["C-1042", "usr_8f3a21", "INV-2024-0017", "a3f9c2e1", "TKT-88", "cus_NeZ7w1"],
    "ENUM": ["Open", "In Progress", "Done", "HIGH", "paid", "EUR", "Pending", "Closed", "Unassigned", "active"],
    "PLACE": ["Berlin", "Hamburg", "New York", "Lyon", "Rotterdam", "Osaka"],
    "DATE": ["2024-03-01", "2025-11-30", "01.02.2026"],
}
"""Values that sit under the same keys and must stay."""


@dataclass
class StructuredCase:
    record: dict[str, Any]
    names: list[str] = field(default_factory=list)
    """Every person name planted (each must be gone)."""
    names_language: list[str] = field(default_factory=list)
    keep: list[tuple[str, str]] = field(default_factory=list)
    """(kind, value) of every look-alike planted (each must stay)."""
    template: str = ""


class _Draw:
    def __init__(self, rng: random.Random, case: StructuredCase, languages: list[str]) -> None:
        self.rng, self.case, self.languages = rng, case, languages

    def person(self) -> str:
        language = self.rng.choice(self.languages)
        given, family = self.rng.choice(NAMES[language])
        name = f"{family}{given}" if language in FAMILY_FIRST and not given.isascii() else \
            f"{family} {given}" if language in FAMILY_FIRST else f"{given} {family}"
        self.case.names.append(name)
        self.case.names_language.append(language)
        return name

    def given(self) -> tuple[str, str]:
        language = self.rng.choice(self.languages)
        given, family = self.rng.choice(NAMES[language])
        self.case.names += [given, family]
        self.case.names_language += [language, language]
        return given, family

    def like(self, kind: str) -> str:
        value = self.rng.choice(LOOKALIKES[kind])
        self.case.keep.append((kind, value))
        return value

    def email(self) -> str:
        return f"user{self.rng.randrange(1000)}@example.com"


def _order(d: _Draw) -> dict[str, Any]:
    return {"order": {"id": d.like("ID"), "customer": d.person(), "status": d.like("ENUM"),
                      "items": [{"name": d.like("PRODUCT"), "qty": 2}]}}


def _ticket(d: _Draw) -> dict[str, Any]:
    return {"ticket": {"id": d.like("ID"), "assignee": d.person(), "reporter": d.person(), "priority": d.like("ENUM"),
                       "title": f"{d.like('PRODUCT')} does not start", "team": d.like("TEAM")}}


def _contact(d: _Draw) -> dict[str, Any]:
    return {"contact": {"name": d.person(), "email": d.email(), "company": d.like("ORGANISATION")}}


def _crm_row(d: _Draw) -> dict[str, Any]:
    first, last = d.given()
    return {"id": d.like("ID"), "firstName": first, "lastName": last, "status": d.like("ENUM")}


def _mail(d: _Draw) -> dict[str, Any]:
    return {"message": {"from": f"{d.person()} <{d.email()}>", "to": [d.person(), d.person()],
                        "subject": f"Re: {d.like('PRODUCT')}"}}


def _billing(d: _Draw) -> dict[str, Any]:
    return {"invoice": d.like("ID"), "billing_name": d.person(), "currency": "EUR", "owner": d.like("TEAM")}


def _catalogue(d: _Draw) -> dict[str, Any]:
    return {"products": [{"name": d.like("PRODUCT"), "sku": d.like("ID")}, {"name": d.like("PRODUCT")}],
            "vendor": {"name": d.like("ORGANISATION"), "type": "company"}}


def _shipment(d: _Draw) -> dict[str, Any]:
    return {"shipment": {"id": d.like("ID"), "from": d.like("PLACE"), "to": d.like("PLACE"),
                         "date": d.like("DATE"), "recipient": d.person()}}


def _transition(d: _Draw) -> dict[str, Any]:
    return {"change": {"field": "status", "from": d.like("ENUM"), "to": d.like("ENUM"), "created_by": d.person()}}


def _period(d: _Draw) -> dict[str, Any]:
    return {"report": {"from": d.like("DATE"), "to": d.like("DATE"), "owner": d.like("ORGANISATION")}}


def _lines(d: _Draw) -> dict[str, Any]:
    return {"text": f"Customer: {d.person()}\nStatus: {d.like('ENUM')}\nProduct: {d.like('PRODUCT')}\n"}


TEMPLATES: dict[str, Callable[[_Draw], dict[str, Any]]] = {
    "order": _order, "ticket": _ticket, "contact": _contact, "crm_row": _crm_row, "mail": _mail,
    "billing": _billing, "catalogue": _catalogue, "shipment": _shipment, "transition": _transition,
    "period": _period, "key_value_lines": _lines}


TUNED = sorted(set(NAMES) - {"held-out"})


def planted(count: int = 400, seed: int = 65, languages: list[str] = TUNED) -> list[StructuredCase]:
    """`count` records, templates and values drawn in a seeded order, the names from `languages`."""
    rng = random.Random(seed)
    cases = []
    for _ in range(count):
        template = rng.choice(sorted(TEMPLATES))
        case = StructuredCase({}, template=template)
        case.record = TEMPLATES[template](_Draw(rng, case, languages))
        cases.append(case)
    return cases


@dataclass
class Tally:
    total: int = 0
    hit: int = 0
    misses: list[str] = field(default_factory=list)


@dataclass
class StructuredScore:
    languages: dict[str, Tally] = field(default_factory=dict)
    lookalikes: dict[str, Tally] = field(default_factory=dict)


def _leaves(value: Any) -> list[str]:
    if isinstance(value, dict):
        return [s for v in value.values() for s in _leaves(v)]
    if isinstance(value, list):
        return [s for v in value for s in _leaves(v)]
    return [value] if isinstance(value, str) else []


def _occurrences(record: Any, value: str) -> int:
    return sum(leaf.count(value) for leaf in _leaves(record))


def score(cases: list[StructuredCase], redact: Callable[[Any], Any], as_text: bool = True) -> StructuredScore:
    """Each case's record redacted as a tool result carries it: a JSON text (`as_text`) or the object."""
    result = StructuredScore()
    for case in cases:
        record = json.dumps(case.record, ensure_ascii=False) if as_text else case.record
        out = redact(record)
        redacted = json.loads(out) if as_text else out
        for name, language in zip(case.names, case.names_language, strict=True):
            tally = result.languages.setdefault(language, Tally())
            tally.total += 1
            if _occurrences(redacted, name) == 0:
                tally.hit += 1
            else:
                tally.misses.append(name)
        for kind, value in case.keep:
            tally = result.lookalikes.setdefault(kind, Tally())
            tally.total += 1
            if _occurrences(redacted, value) < _occurrences(case.record, value):
                tally.hit += 1
                tally.misses.append(value)
    return result


def table(result: StructuredScore) -> str:
    def rate(t: Tally) -> str:
        return f"{100 * t.hit / t.total:.0f}%" if t.total else "-"

    lines = ["| language | names | redacted | recall |", "|---|---:|---:|---:|"]
    lines += [f"| {k} | {t.total} | {t.hit} | {rate(t)} |" for k, t in sorted(result.languages.items())]
    total = Tally(sum(t.total for t in result.languages.values()), sum(t.hit for t in result.languages.values()))
    lines += [f"| **all** | {total.total} | {total.hit} | **{rate(total)}** |", "",
              "| look-alike | count | changed | over-redaction |", "|---|---:|---:|---:|"]
    lines += [f"| {k} | {t.total} | {t.hit} | {rate(t)} |" for k, t in sorted(result.lookalikes.items())]
    changed = Tally(sum(t.total for t in result.lookalikes.values()), sum(t.hit for t in result.lookalikes.values()))
    lines.append(f"| **all** | {changed.total} | {changed.hit} | **{rate(changed)}** |")
    return "\n".join(lines)
