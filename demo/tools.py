"""OpenAI tool schemas of the demo workspaces: nested objects, lists of objects, optional keys.

Descriptions are short on purpose: the CPU demo model serves a 4,096-token context and
every request carries its workspace's full tool list.

Every tool is `strict` with closed objects (`additionalProperties: false`), as OpenAI's strict
function calling defines it: vLLM then constrains the arguments to the schema, so the small
demo model chooses among the declared (optional) keys instead of inventing new ones, and a
key-set difference means a real choice.
"""

from __future__ import annotations

from typing import Any

Schema = dict[str, Any]
# Free text is bounded: under greedy decoding the 135M demo model can repeat a phrase inside
# a string value until max_tokens, which would turn a real choice of tool and keys into a
# truncated, malformed call. Real tool schemas bound their strings too.
MAX_TEXT = 80


def _tool(name: str, description: str, properties: Schema, required: tuple[str, ...]) -> Schema:
    return {"type": "function", "function": {"name": name, "description": description, "strict": True,
                                             "parameters": _obj(properties, required)}}


def _obj(properties: Schema, required: tuple[str, ...] = ()) -> Schema:
    return {"type": "object", "properties": properties, "required": list(required), "additionalProperties": False}


def _list(items: Schema) -> Schema:
    return {"type": "array", "items": items}


def _str(description: str = "", enum: tuple[str, ...] = (), max_length: int = MAX_TEXT) -> Schema:
    schema: Schema = {"type": "string"}
    if description:
        schema["description"] = description
    if enum:
        schema["enum"] = list(enum)
    else:
        schema["maxLength"] = max_length
    return schema


_NUM: Schema = {"type": "number"}
_INT: Schema = {"type": "integer"}
_BOOL: Schema = {"type": "boolean"}
_DATE = _str("YYYY-MM-DD", max_length=10)
_TIME = _str("ISO 8601 date-time")
_MONEY = _obj({"value": _NUM, "currency": _str("ISO 4217")}, ("value", "currency"))
_PERSON = _obj({"email": _str(), "name": _str()}, ("email",))

INVOICING = (
    _tool("search_invoices", "Free-text search over invoice titles and notes.",
          {"query": _str(), "limit": _INT}, ("query",)),
    _tool("list_invoices", "List invoices matching a filter.",
          {"filter": _obj({"customer_id": _str(), "status": _str(enum=("draft", "open", "overdue", "paid")),
                           "date": _obj({"from": _DATE, "to": _DATE})}),
           "page": _obj({"size": _INT, "cursor": _str()})}, ("filter",)),
    _tool("get_invoice", "Fetch one invoice.", {"invoice_id": _str()}, ("invoice_id",)),
    _tool("create_invoice", "Create a draft invoice.",
          {"customer_id": _str(), "currency": _str("ISO 4217"),
           "lines": _list(_obj({"description": _str(), "quantity": _NUM, "unit_price": _NUM, "tax_code": _str()},
                               ("description", "quantity", "unit_price"))),
           "due_date": _DATE, "notes": _str()}, ("customer_id", "currency", "lines")),
    _tool("finalize_invoice", "Finalize a draft invoice so it can be sent.", {"invoice_id": _str()}, ("invoice_id",)),
    _tool("send_invoice", "Email a finalized invoice.",
          {"invoice_id": _str(), "recipients": _list(_PERSON), "message": _str()}, ("invoice_id", "recipients")),
    _tool("record_payment", "Record a payment against an invoice.",
          {"invoice_id": _str(), "amount": _MONEY, "paid_on": _DATE,
           "method": _str(enum=("bank_transfer", "card", "cash"))}, ("invoice_id", "amount", "paid_on")),
)

SUPPORT = (
    _tool("search_tickets", "Search support tickets.",
          {"query": _str(), "filter": _obj({"status": _str(enum=("open", "pending", "closed")),
                                            "customer_id": _str(), "tags": _list(_str())})}, ()),
    _tool("get_ticket", "Fetch one ticket with its thread.", {"ticket_id": _str()}, ("ticket_id",)),
    _tool("reply_ticket", "Post a public reply on a ticket.",
          {"ticket_id": _str(), "body": _str(),
           "attachments": _list(_obj({"file_id": _str(), "name": _str()}, ("file_id",)))}, ("ticket_id", "body")),
    _tool("reopen_ticket", "Reopen a closed ticket.", {"ticket_id": _str(), "reason": _str()}, ("ticket_id", "reason")),
    _tool("escalate_ticket", "Hand a ticket to another team.",
          {"ticket_id": _str(), "team": _str(enum=("billing", "engineering", "security")), "reason": _str(),
           "priority": _str(enum=("normal", "high", "urgent"))}, ("ticket_id", "team", "reason")),
    _tool("lookup_customer", "Find a customer by email.", {"email": _str()}, ("email",)),
    _tool("send_email", "Send an email.",
          {"to": _list(_PERSON), "cc": _list(_PERSON), "subject": _str(), "body": _str()}, ("to", "subject", "body")),
)

SALES = (
    _tool("find_contact", "Search CRM contacts by name, email or company.", {"query": _str()}, ("query",)),
    _tool("create_contact", "Create a CRM contact.",
          {"name": _str(), "email": _str(), "company": _obj({"name": _str(), "domain": _str()}, ("name",)),
           "tags": _list(_str())}, ("name", "email")),
    _tool("update_deal", "Update fields of a deal.",
          {"deal_id": _str(),
           "fields": _obj({"stage": _str(enum=("lead", "qualified", "proposal", "negotiation", "closed_won",
                                                "closed_lost")),
                           "amount": _MONEY, "close_date": _DATE})}, ("deal_id", "fields")),
    _tool("log_activity", "Log a call, email or meeting on a contact.",
          {"contact_id": _str(), "type": _str(enum=("call", "email", "meeting")), "notes": _str(),
           "occurred_at": _TIME}, ("contact_id", "type", "notes")),
    _tool("create_event", "Create a calendar event.",
          {"title": _str(), "start": _TIME, "end": _TIME,
           "attendees": _list(_obj({"email": _str(), "optional": _BOOL}, ("email",))),
           "location": _obj({"name": _str(), "address": _str()}, ("name",))}, ("title", "start", "end", "attendees")),
    _tool("find_free_slots", "Find times when all attendees are free.",
          {"attendees": _list(_obj({"email": _str()}, ("email",))),
           "window": _obj({"from": _TIME, "to": _TIME}, ("from", "to")), "duration_minutes": _INT},
          ("attendees", "window", "duration_minutes")),
)

FILES = (
    _tool("list_files", "List the files in a folder.",
          {"folder_id": _str(), "filter": _obj({"type": _str(enum=("document", "spreadsheet", "pdf", "image")),
                                                "modified_after": _DATE})}, ("folder_id",)),
    _tool("search_files", "Search files by name and content.", {"query": _str(), "limit": _INT}, ("query",)),
    _tool("read_file", "Read the text of a file.", {"file_id": _str()}, ("file_id",)),
    _tool("move_file", "Move a file to another folder.",
          {"file_id": _str(), "destination": _obj({"folder_id": _str()}, ("folder_id",))},
          ("file_id", "destination")),
    _tool("share_file", "Share a file with people.",
          {"file_id": _str(), "grants": _list(_obj({"email": _str(), "role": _str(enum=("viewer", "editor"))},
                                                   ("email", "role"))),
           "notify": _BOOL, "message": _str()}, ("file_id", "grants")),
    _tool("create_folder", "Create a folder.", {"name": _str(), "parent_id": _str()}, ("name", "parent_id")),
)
