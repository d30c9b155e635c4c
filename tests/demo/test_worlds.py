"""The demo worlds: every demo tool executes over state, refuses like the demo suite, deterministically."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Annotated, Any, get_args, get_origin

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import BaseModel

from core.guard import FAILURES, GuardRules, classify
from demo import tools, worlds
from replay.sandbox.measures import score
from replay.sandbox.pack import play
from replay.sandbox.scenario import Call, Scenario
from replay.sandbox.world import Episode, under

CLOCK = datetime(2026, 8, 2, 10, tzinfo=UTC)
INVOICING = {
    "customers": {"cus_1": {"name": "Acme", "email": "billing@acme.com", "contact": "Maria"}},
    "invoices": {
        "INV-1": {"customer_id": "cus_1", "currency": "EUR", "status": "draft", "issued": "2026-07-01",
                  "title": "consulting July", "total": 500},
        "INV-2": {"customer_id": "cus_1", "currency": "EUR", "status": "open", "issued": "2026-06-01",
                  "title": "audit support", "total": 300},
    },
}
SUPPORT = {
    "customers": {"c_1": {"name": "Lena Fischer", "email": "lena@fischer.de", "phone": "+49 151 0000"}},
    "tickets": {"T-1": {"customer_id": "c_1", "subject": "Export fails", "status": "open"},
                "T-2": {"customer_id": "c_1", "subject": "Refund", "status": "closed"}},
}
SALES = {
    "contacts": {"ct_1": {"name": "Dana Whitfield", "email": "dana@brightline.com", "company": "Brightline"}},
    "deals": {"dl_1": {"contact_id": "ct_1", "stage": "proposal", "amount": 10000, "currency": "EUR"}},
    "busy": {"dana@brightline.com": [["2026-08-03T09:00:00", "2026-08-03T10:00:00"]]},
}
FILES = {
    "folders": {"fld_1": {"name": "Contracts"}, "fld_2": {"name": "Archive"}},
    "files": {"fil_1": {"name": "NDA template", "folder_id": "fld_1", "type": "document", "modified": "2026-06-01",
                        "content": "mutual NDA"}},
}
STATES = {"invoicing": INVOICING, "support": SUPPORT, "sales": SALES, "files": FILES}

# (world, tool, arguments that succeed, a state path that changes (None: a read),
#  arguments that are refused)
CASES: list[tuple[str, str, dict[str, Any], str | None, dict[str, Any]]] = [
    ("invoicing", "search_invoices", {"query": "consulting"}, None, {"query": "x", "customer": "cus_1"}),
    ("invoicing", "list_invoices", {"filter": {"customer_id": "cus_1", "status": "open"}}, None,
     {"filter": {"status": "void"}}),
    ("invoicing", "get_invoice", {"invoice_id": "INV-1"}, None, {"invoice_id": "INV-9"}),
    ("invoicing", "create_invoice", {"customer_id": "cus_1", "currency": "EUR",
                                     "lines": [{"description": "x", "quantity": 2, "unit_price": 50}]}, "invoices",
     {"customer_id": "cus_9", "currency": "EUR", "lines": [{"description": "x", "quantity": 1, "unit_price": 1}]}),
    ("invoicing", "finalize_invoice", {"invoice_id": "INV-1"}, "invoices.INV-1.status", {"invoice_id": "INV-2"}),
    ("invoicing", "send_invoice", {"invoice_id": "INV-2", "recipients": [{"email": "billing@acme.com"}]}, "outbox",
     {"invoice_id": "INV-1", "recipients": [{"email": "billing@acme.com"}]}),
    ("invoicing", "record_payment", {"invoice_id": "INV-2", "amount": {"value": 300, "currency": "EUR"},
                                     "paid_on": "2026-08-01"}, "invoices.INV-2.status",
     {"invoice_id": "INV-2", "amount": {"value": 300, "currency": "USD"}, "paid_on": "2026-08-01"}),
    ("support", "search_tickets", {"filter": {"status": "open"}}, None, {"filter": {"status": "gone"}}),
    ("support", "get_ticket", {"ticket_id": "T-1"}, None, {"ticket_id": "T-9"}),
    ("support", "reply_ticket", {"ticket_id": "T-1", "body": "hi"}, "tickets.T-1.thread",
     {"ticket_id": "T-2", "body": "hi"}),
    ("support", "reopen_ticket", {"ticket_id": "T-2", "reason": "update"}, "tickets.T-2.status",
     {"ticket_id": "T-1", "reason": "update"}),
    ("support", "escalate_ticket", {"ticket_id": "T-1", "team": "security", "reason": "leak"}, "tickets.T-1.escalation",
     {"ticket_id": "T-1", "team": "finance", "reason": "charged twice"}),
    ("support", "lookup_customer", {"email": "lena@fischer.de"}, None, {"email": "nobody@x.com"}),
    ("support", "send_email", {"to": [{"email": "nina@brightdesk.io"}], "subject": "s", "body": "b"}, "outbox",
     {"to": [{"email": "lena@fischer.de"}], "subject": "s", "body": "b"}),
    ("sales", "find_contact", {"query": "brightline"}, None, {"query": 5}),
    ("sales", "create_contact", {"name": "Ines Chen", "email": "ines@contoso.net"}, "contacts",
     {"name": "Dana", "email": "dana@brightline.com"}),
    ("sales", "update_deal", {"deal_id": "dl_1", "fields": {"stage": "negotiation"}}, "deals.dl_1.stage",
     {"deal_id": "dl_1", "fields": {"stage": "won"}}),
    ("sales", "log_activity", {"contact_id": "ct_1", "type": "call", "notes": "n"}, "activities",
     {"contact_id": "ct_9", "type": "call", "notes": "n"}),
    ("sales", "create_event", {"title": "Demo", "start": "2026-08-03T11:00:00", "end": "2026-08-03T11:30:00",
                               "attendees": [{"email": "dana@brightline.com"}]}, "events",
     {"title": "Demo", "start": "2026-08-03T09:00:00", "end": "2026-08-03T09:30:00",
      "attendees": [{"email": "dana@brightline.com"}]}),
    ("sales", "find_free_slots", {"attendees": [{"email": "dana@brightline.com"}],
                                  "window": {"from": "2026-08-03T08:00:00", "to": "2026-08-03T18:00:00"},
                                  "duration_minutes": 30}, None,
     {"attendees": [], "window": {"from": "2026-08-03", "to": "2026-08-04"}, "duration_minutes": 30}),
    ("files", "list_files", {"folder_id": "fld_1"}, None, {"folder_id": "fil_1"}),
    ("files", "search_files", {"query": "nda"}, None, {"query": "nda", "limit": "many"}),
    ("files", "read_file", {"file_id": "fil_1"}, None, {"file_id": "fld_1"}),
    ("files", "move_file", {"file_id": "fil_1", "destination": {"folder_id": "fld_2"}}, "files.fil_1.folder_id",
     {"file_id": "fil_1", "destination": {"folder_id": "fld_signed"}}),
    ("files", "share_file", {"file_id": "fil_1", "grants": [{"email": "a@b.com", "role": "viewer"}]},
     "files.fil_1.shared", {"file_id": "fil_1", "grants": [{"email": "a@b.com", "role": "owner"}]}),
    ("files", "create_folder", {"name": "Signed", "parent_id": "fld_1"}, "folders",
     {"name": "Signed", "parent_id": "fld_9"}),
]


def episode(world: str, seed: int = 1) -> Episode:
    w = worlds.WORLDS[world]
    return Episode.start(w, STATES[world], list(w.tools), CLOCK, seed)


def test_every_demo_tool_is_executed_by_a_world_with_the_schema_the_suite_shows() -> None:
    shown = [t for group in (tools.INVOICING, tools.SUPPORT, tools.SALES, tools.FILES) for t in group]
    executed = [t.schema() for t in worlds.all_tools()]
    assert json.dumps(shown) == json.dumps(executed)
    assert {c[1] for c in CASES} == {t.name for t in worlds.all_tools()}
    assert sum(1 for c in CASES if c[3] is not None) >= 15  # stateful tools that change the state


@pytest.mark.parametrize(("world", "name", "good", "changes", "bad"), CASES, ids=[c[1] for c in CASES])
def test_tool_changes_state_or_refuses_with_a_classified_error(world: str, name: str, good: dict[str, Any],
                                                                changes: str | None, bad: dict[str, Any]) -> None:
    ep = episode(world)
    result = ep.call(name, good)
    ok = ep.actions[-1]
    assert ok.ok and classify(json.dumps(result), GuardRules(), name) == "ok" or ok.kind in ("empty_result", "no_op")
    if changes is None:
        assert ok.state_before == ok.state_after
    else:
        assert any(under(p, changes) for p in ok.changes), ok.changes
    refused = episode(world).call(name, bad)
    assert "error" in refused and classify(json.dumps(refused), GuardRules(), name) in FAILURES


def test_demo_rejections_read_as_the_suite_recorded_them() -> None:
    sup = episode("support")
    assert sup.call("send_email", CASES[13][4])["error"]["code"] == "permission_denied"
    assert sup.actions[-1].kind == "blocked"
    inv = episode("invoicing")
    assert "drafts cannot be sent" in inv.call("send_invoice", CASES[5][4])["error"]["message"]
    sales = episode("sales")
    assert sales.call("create_event", CASES[18][4])["error"]["code"] == "conflict"
    slots = sales.call("find_free_slots", CASES[19][2])["slots"]
    assert slots[0] == {"start": "2026-08-03T08:00:00", "end": "2026-08-03T08:30:00"}
    assert {"start": "2026-08-03T09:00:00", "end": "2026-08-03T09:30:00"} not in slots


@pytest.mark.parametrize("world", sorted(STATES))
def test_the_same_calls_on_the_same_seed_give_byte_identical_action_logs(world: str) -> None:
    calls = [(c[1], c[2]) for c in CASES if c[0] == world] + [(c[1], c[4]) for c in CASES if c[0] == world]

    def run(seed: int) -> str:
        ep = episode(world, seed)
        for name, args in calls:
            ep.call(name, args)
        return "\n".join(e.model_dump_json() for e in ep.actions)

    assert run(11) == run(11)


@settings(max_examples=40, deadline=None)
@given(picks=st.lists(st.tuples(st.integers(0, len(CASES) - 1), st.booleans()), max_size=12),
       seed=st.integers(0, 2**16))
def test_any_sequence_of_calls_is_deterministic_and_never_raises(picks: list[tuple[int, bool]], seed: int) -> None:
    def run() -> tuple[str, str]:
        eps = {w: episode(w, seed) for w in STATES}
        for index, good in picks:
            world, name, ok_args, _, bad_args = CASES[index]
            eps[world].call(name, ok_args if good else bad_args)
        logs = "\n".join(e.model_dump_json() for ep in eps.values() for e in ep.actions)
        return logs, json.dumps([ep.snapshot() for ep in eps.values()], sort_keys=True)

    assert run() == run()


def test_malformed_times_are_refused_not_raised() -> None:
    result = episode("sales").call("find_free_slots", {"attendees": [{"email": "a@b.c"}],
                                                       "window": {"from": "2026-08-03Txx:00:00", "to": "2026-08-03T18:00:00"},
                                                       "duration_minutes": 30})
    assert result["error"]["code"] == "invalid_argument"


# --- free text is compared for presence, not wording (issue 23 item 23) ---------------------

# Every str field of a demo state that is NOT free text: ids and references, emails, dates and
# times, codes and enums, and names a user gives (a person, company, file, folder, place).
EXACT = {"customer_id", "email", "contact", "currency", "issued", "due_date", "tax_code", "invoice_id", "paid_on",
         "method", "tool", "to", "author", "team", "priority", "status", "tags", "plan", "phone", "name",
         "internal_domain", "contact_id", "stage", "close_date", "type", "occurred_at", "company", "domain", "start",
         "end", "attendees", "location", "busy", "role", "folder_id", "modified", "parent_id"}


def str_fields(model: type[BaseModel], seen: set[type] | None = None) -> set[str]:
    """The names of every str-valued field (optional, in lists and dicts too) of a state model, nested models included."""
    seen = seen if seen is not None else set()
    seen.add(model)
    names: set[str] = set()
    for name, info in model.model_fields.items():
        stack = [info.annotation]
        while stack:
            kind = stack.pop()
            args = [a for a in get_args(kind) if a is not type(None)]
            if get_origin(kind) is Annotated:
                stack.append(args[0])
            elif get_origin(kind) is dict:
                stack.append(args[1])  # keys are ids
            elif args:
                stack += args
            elif kind is str:
                names.add(info.alias or name)
            elif isinstance(kind, type) and issubclass(kind, BaseModel) and kind not in seen:
                names |= str_fields(kind, seen)
    return names


@pytest.mark.parametrize("world", sorted(worlds.WORLDS))
def test_every_free_text_field_of_a_world_is_prose(world: str) -> None:
    w = worlds.WORLDS[world]
    fields = str_fields(w.state)
    assert fields - EXACT <= w.prose_fields, f"free text compared exactly: {sorted(fields - EXACT - w.prose_fields)}"
    assert not (w.prose_fields & EXACT)


def _reworded(state: Any, prose: frozenset[str], start: Any, key: str = "") -> Any:
    if isinstance(state, dict):
        return {k: _reworded(v, prose, start.get(k) if isinstance(start, dict) else None, k) for k, v in state.items()}
    if isinstance(state, list):
        return [_reworded(v, prose, start[i] if isinstance(start, list) and i < len(start) else None, key)
                for i, v in enumerate(state)]
    if isinstance(state, str) and key in prose and state and state != start:
        return f"In other words: {state[::-1]}"
    return state


WRITES = [(world, tool, good) for world, tool, good, path, _ in CASES if path is not None]


@pytest.mark.parametrize(("world", "tool", "good"), WRITES, ids=[f"{w}.{t}" for w, t, _ in WRITES])
def test_a_reworded_free_text_still_completes_the_task(world: str, tool: str, good: dict[str, Any]) -> None:
    w = worlds.WORLDS[world]
    scn = Scenario.model_validate({
        "id": "s", "world": world, "workspace": "ws", "policy_family": "f", "clock": CLOCK.isoformat(), "seed": 1,
        "initial_state": STATES[world], "messages": [{"role": "user", "content": "do it"}], "tools": list(w.tools),
        "oracle": [{"tool": tool, "arguments": good}], "broken": [], "oracle_answer": "Done.", "broken_answer": "-",
        "success": {"may_change": sorted(w.state.model_fields)}})  # only the oracle comparison decides
    oracle = play(w, scn, scn.oracle, scn.oracle_answer)
    end = _reworded(oracle.end_state, w.prose_fields, oracle.start_state)
    model = oracle.model_copy(update={"end_state": end})
    assert score(scn, model, oracle.end_state, w.prose_fields).task_completed
    if end != oracle.end_state:  # and free text left empty is not the same as free text written
        blank = _blank(oracle.end_state, w.prose_fields, oracle.start_state)
        assert not score(scn, oracle.model_copy(update={"end_state": blank}), oracle.end_state,
                         w.prose_fields).task_completed


def _blank(state: Any, prose: frozenset[str], start: Any, key: str = "") -> Any:
    if isinstance(state, dict):
        return {k: _blank(v, prose, start.get(k) if isinstance(start, dict) else None, k) for k, v in state.items()}
    if isinstance(state, list):
        return [_blank(v, prose, start[i] if isinstance(start, list) and i < len(start) else None, key)
                for i, v in enumerate(state)]
    return "" if isinstance(state, str) and key in prose and state and state != start else state


def test_a_reworded_reopen_reason_reopens_the_ticket() -> None:
    w = worlds.WORLDS["support"]
    scn = Scenario.model_validate({
        "id": "s", "world": "support", "workspace": "ws", "policy_family": "f", "clock": CLOCK.isoformat(),
        "seed": 1, "initial_state": SUPPORT, "messages": [{"role": "user", "content": "Reopen T-2."}],
        "tools": list(w.tools), "oracle": [{"tool": "reopen_ticket", "arguments": {"ticket_id": "T-2",
                                                                                  "reason": "customer replied"}}],
        "broken": [], "oracle_answer": "Reopened.", "broken_answer": "-",
        "success": {"assert": [{"path": "tickets.T-2.status", "value": "open"}], "may_change": ["tickets.T-2"]}})
    reworded = play(w, scn, [Call(tool="reopen_ticket", arguments={"ticket_id": "T-2",
                                                                   "reason": "The customer wrote back."})], "Reopened.")
    oracle_end = play(w, scn, scn.oracle, scn.oracle_answer).end_state
    scores = score(scn, reworded, oracle_end, w.prose_fields)
    assert scores.task_completed, scores.not_completed_because
