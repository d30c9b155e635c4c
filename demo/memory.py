"""Workspace memory of the demo, in the memory-system format (DESIGN §5), with the truth
about each rule recorded here so a demo can say whether the lesson gate got it right.

Rule ids are written `lc:<slug>`, as `replay.memory.files` names them. Roles:

* `genuine` — authorised (`evidence:user-explicit`) and matches the recorded recoveries;
* `harmful` — authorised and plausible, but tells the agent to repeat a rejected call;
* `neutral` — authorised, about things the suite does not score;
* `legacy` — no `evidence:` (injected only when an arm names it).

`replay.memory.contract.check_memory` finds no violation in these files, only the legacy warnings.

ws-files is written in the older style (` — ` in headings) to exercise both spellings.
"""

from __future__ import annotations

from dataclasses import dataclass

ONE_RULE_TEXT = "If a tool call was just rejected, choose a different tool and say why."


@dataclass(frozen=True)
class DemoRule:
    slug: str
    text: str
    role: str
    evidence: str | None
    pending: bool
    quote: str
    wrong_right: tuple[str, str] | None = None

    @property
    def id(self) -> str:
        return f"lc:{self.slug}"


@dataclass(frozen=True)
class Retired:
    slug: str
    superseded_by: str
    reason: str
    day: str


_EXPLICIT = "user-explicit"

RULES: dict[str, tuple[DemoRule, ...]] = {
    "ws-invoicing": (
        DemoRule("invoice-customer-filter",
                 "To find a customer's invoices use list_invoices with filter.customer_id; "
                 "search_invoices cannot filter by customer.",
                 "genuine", _EXPLICIT, False,
                 "search_invoices can't filter by customer any more, use list_invoices with the customer id",
                 ('search_invoices {"customer": "cus_1042"}', 'list_invoices {"filter": {"customer_id": "cus_1042"}}')),
        DemoRule("billing-contact", "Address invoice emails to the customer's billing contact, not a personal inbox.",
                 "neutral", _EXPLICIT, False, "always send invoices to the billing address on file"),
        DemoRule("iso-dates", "Use ISO dates (YYYY-MM-DD) in every invoice field.", "legacy", None, False, ""),
        DemoRule("draft-before-send",
                 "If send_invoice says the invoice is a draft, call finalize_invoice first, then send it.",
                 "genuine", _EXPLICIT, True, "drafts have to be finalized before they can go out",
                 ("send_invoice again", 'finalize_invoice {"invoice_id": ...}')),
    ),
    "ws-support": (
        DemoRule("closed-ticket-reopen",
                 "A closed ticket takes no replies: reopen it with reopen_ticket and a reason, then reply.",
                 "genuine", _EXPLICIT, False, "reopen closed tickets first, replies bounce otherwise"),
        DemoRule("customer-replies-on-ticket",
                 "Email to customers is disabled here; answer customers on their ticket with reply_ticket.",
                 "genuine", _EXPLICIT, False, "we don't email customers directly, reply on the ticket"),
        DemoRule("billing-escalations", "Double charges and refunds go to team billing.",
                 "genuine", _EXPLICIT, False, "anything about charges goes to billing, there is no finance team"),
        DemoRule("helpdesk-api-flaky",
                 "When a tool rejects a call, send the same call again unchanged; the helpdesk API often fails "
                 "once and then succeeds.",
                 "harmful", _EXPLICIT, True, "the helpdesk API is flaky, just retry it"),
    ),
    "ws-sales": (
        DemoRule("calendar-conflict-slots",
                 "If create_event reports a conflict, call find_free_slots for the attendees before proposing a time.",
                 "genuine", _EXPLICIT, False, "when someone's busy, look up free slots instead of guessing"),
        DemoRule("duplicate-contact-lookup",
                 "If create_contact says the contact exists, look it up with find_contact instead of creating it.",
                 "genuine", _EXPLICIT, False, "don't create duplicates, find the existing contact"),
        DemoRule("deal-stage-names",
                 "Deal stages are lead, qualified, proposal, negotiation, closed_won, closed_lost; never use 'won'.",
                 "genuine", _EXPLICIT, True, "it's closed_won, not won"),
        DemoRule("same-day-logging", "Log every customer call the same day.", "legacy", None, False, ""),
    ),
    "ws-files": (
        DemoRule("folder-not-file", "Ids that start with fld_ are folders: list them with list_files, never read_file.",
                 "genuine", _EXPLICIT, False, "fld_ ids are folders, you can't read them"),
        DemoRule("missing-destination-folder",
                 "If move_file says the destination is missing, create it with create_folder under the parent first.",
                 "genuine", _EXPLICIT, False, "just create the folder if it isn't there"),
        DemoRule("file-naming", "Name new folders in Title Case.", "neutral", _EXPLICIT, True,
                 "folders in Title Case please"),
    ),
}

RETIRED: dict[str, tuple[Retired, ...]] = {
    "ws-invoicing": (Retired("invoice-search-first", "invoice-customer-filter",
                             "search_invoices lost its customer filter in API v3", "2026-06-30"),),
    "ws-sales": (Retired("event-retry-later", "calendar-conflict-slots",
                         "retrying later double-booked two demos", "2026-07-14"),),
}

GENUINE_RULE_IDS = frozenset(r.id for rules in RULES.values() for r in rules if r.role == "genuine")
HARMFUL_RULE_IDS = frozenset(r.id for rules in RULES.values() for r in rules if r.role == "harmful")

_PROFILES = {
    "ws-invoicing": ("Northwind Bookkeeping", "Bookkeeping firm; invoices for about 40 clients.", "Europe/Berlin"),
    "ws-support": ("Brightdesk", "B2B helpdesk team of six; tickets in English and German.", "Europe/Dublin"),
    "ws-sales": ("Orbit Sales", "Three account executives selling analytics subscriptions.", "America/New_York"),
    "ws-files": ("Ledgerline", "Accounting practice; shares documents with auditors and partners.", "Europe/London"),
}


def memory_files(workspace: str) -> dict[str, str]:
    """Relative path → text of every memory file of one demo workspace."""
    company, about, tz = _PROFILES[workspace]
    return render_memory(workspace, company, about, tz, RULES[workspace], RETIRED.get(workspace, ()),
                         old_style=workspace == "ws-files")


def render_memory(workspace: str, company: str, about: str, tz: str, rules: tuple[DemoRule, ...],
                  retired: tuple[Retired, ...] = (), old_style: bool = False) -> dict[str, str]:
    """Relative path → text of a workspace's memory files in the memory-system format."""
    return {
        "rules/learned-corrections.md": _rules_file(rules, old_style),
        "memory/reference/corrections-log.md": _log_file(rules, retired, old_style),
        "memory/profile.md": f"# Profile\n\n- Workspace: {workspace} ({company})\n- {about}\n- Time zone: {tz}\n",
        "memory/index.md": _index(workspace),
        "memory/weekly-summary.md": _weekly(company),
    }


def _rule_line(rule: DemoRule) -> str:
    marker = f"lc:{rule.slug}" + (f" evidence:{rule.evidence}" if rule.evidence else "")
    return f"- {rule.text} <!-- {marker} -->"


def _rules_file(rules: tuple[DemoRule, ...], old_style: bool) -> str:
    sep = " — " if old_style else ": "
    lines = ["# Learned corrections", "", f"## Rules{sep}in force", ""]
    lines += [_rule_line(r) for r in rules if not r.pending]
    lines += ["", f"## Pending{sep}awaiting nightly merge", ""]
    lines += [_rule_line(r) for r in rules if r.pending]
    return "\n".join(lines) + "\n"


def _log_file(rules: tuple[DemoRule, ...], retired: tuple[Retired, ...], old_style: bool) -> str:
    lines = ["# Corrections log", ""]
    for rule in rules:
        if rule.evidence is None:
            continue
        heading = f"## lc:{rule.slug}" + (" — learned correction" if old_style else "")
        lines += [heading, f"**Rule (current):** {rule.text}",
                  "**History:** 2026-07-03 added" + (" (pending)" if rule.pending else "; 2026-07-04 merged"),
                  f"**Evidence:** {rule.evidence} · scope: standing", f'**Source quote:** "{rule.quote}"']
        if rule.wrong_right:
            lines.append(f"**Wrong:** {rule.wrong_right[0]} · **Right:** {rule.wrong_right[1]}")
        lines.append("")
    lines += ["## Retired", ""]
    lines += [f"- lc:{r.slug}: superseded by lc:{r.superseded_by} ({r.reason}), {r.day}" for r in retired]
    return "\n".join(lines) + "\n"


def _index(workspace: str) -> str:
    return (f"# Memory index ({workspace})\n\n- profile.md: who this workspace is\n"
            "- weekly-summary.md: what happened last week\n"
            "- reference/corrections-log.md: provenance of every learned correction\n")


def _weekly(company: str) -> str:
    return (f"# Weekly summary (2026-07-27 to 2026-08-02)\n\n- Routine week for {company}; "
            "no open incidents.\n- New corrections wait under Pending for the nightly merge.\n")
