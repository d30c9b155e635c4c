"""What each authorised demo rule says the next call should be: the claims rule uptake judges
(`replay.memory.uptake`). Read off the rule texts in `demo/memory.py`, as the demo's truth table.

A claim is judged on the chosen call's tool and key set, so a rule is claimed by the tool it
names; a rule whose text is conditional on a tool's rejection ("if send_invoice says …")
concerns only the decisions right after that rejection. `lc:billing-escalations` is about a
value (team billing), so its tool claim only shows whether it pulls answers to an escalation.
A rule about argument values alone has no claim this measure can judge: `UNCLAIMED` says why.
"""

from __future__ import annotations

from replay.memory.uptake import RuleClaim

CLAIMS: dict[str, RuleClaim] = {claim.rule_id: claim for claim in (
    RuleClaim("lc:invoice-customer-filter", tool="list_invoices"),
    RuleClaim("lc:draft-before-send", tool="finalize_invoice", after_rejected="send_invoice"),
    RuleClaim("lc:closed-ticket-reopen", tool="reopen_ticket"),
    RuleClaim("lc:customer-replies-on-ticket", tool="reply_ticket"),
    RuleClaim("lc:billing-escalations", tool="escalate_ticket"),
    RuleClaim("lc:helpdesk-api-flaky", repeat_rejected=True),
    RuleClaim("lc:calendar-conflict-slots", tool="find_free_slots", after_rejected="create_event"),
    RuleClaim("lc:duplicate-contact-lookup", tool="find_contact", after_rejected="create_contact"),
    RuleClaim("lc:folder-not-file", tool="list_files"),
    RuleClaim("lc:missing-destination-folder", tool="create_folder", after_rejected="move_file"),
)}

UNCLAIMED: dict[str, str] = {
    "lc:deal-stage-names": "it names argument values (deal stages), which the chosen call's tool and key set "
                           "do not show",
}
