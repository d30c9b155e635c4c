"""The tool-outcome guard: each of the eight anomaly kinds of 001 S11, `ok`, and configurable rules."""

from __future__ import annotations

import json

import pytest

from core.guard import ANOMALIES, FAILURES, GuardRules, classify

RULES = GuardRules()


@pytest.mark.parametrize(("content", "kind"), [
    ("", "empty_result"),
    ("   ", "empty_result"),
    (None, "empty_result"),
    ("[]", "empty_result"),
    ("{}", "empty_result"),
    ('""', "empty_result"),
    ("null", "empty_result"),
    ('{"results": [], "total": 0}', "empty_result"),
    ('{"success": true, "error": "quota exceeded"}', "failure_in_success_channel"),
    ('{"ok": true, "message": "Error: the invoice was not saved"}', "failure_in_success_channel"),
    ("<html>502 Bad Gateway</html>", "invalid_envelope"),
    ('{"error": "invoice 7 does not exist"}', "failed"),
    ('{"success": false}', "failed"),
    ('{"status": "failed", "reason": "timeout"}', "failed"),
    ("Error: connection reset", "failed"),
    ('{"error": {"code": 403, "message": "Permission denied for ledger"}}', "blocked"),
    ('{"status": "forbidden"}', "blocked"),
    ("Access denied by policy", "blocked"),
    ('{"status": "partial", "rows": [1]}', "partial"),
    ('{"items": [1, 2], "has_more": true}', "partial"),
    ('{"status": "pending", "job": "j-1"}', "pending"),
    ('{"state": "QUEUED"}', "pending"),
    ('{"status": "unchanged"}', "no_op"),
    ('{"updated": 0}', "no_op"),
    ('{"invoices": [{"id": "inv-1"}]}', "ok"),
    ('{"success": true, "id": "inv-9"}', "ok"),
    ('{"updated": 2}', "ok"),
    ("[1, 2]", "ok"),
    ([{"type": "text", "text": '{"error": "boom"}'}], "failed"),
])
def test_each_kind_is_recognised(content, kind):
    assert classify(content, RULES) == kind


def test_the_eight_anomaly_kinds_and_which_are_failures():
    assert set(ANOMALIES) == {"empty_result", "failure_in_success_channel", "invalid_envelope", "failed", "blocked",
                              "partial", "pending", "no_op"}
    assert set(ANOMALIES) > FAILURES


def test_rules_are_configurable():
    text_tools = GuardRules(expect_json=False)
    assert classify("Invoice 7 paid on 2026-03-01.", text_tools) == "ok"
    assert classify("Invoice 7 paid on 2026-03-01.", RULES) == "invalid_envelope"
    per_tool = GuardRules(per_tool_expect_json={"read_file": False})
    assert classify("plain file text", per_tool, "read_file") == "ok"
    assert classify("plain file text", per_tool, "search") == "invalid_envelope"
    custom = GuardRules(pending_statuses=("waiting_for_approval",), status_keys=("phase",))
    assert classify(json.dumps({"phase": "waiting_for_approval"}), custom) == "pending"
    assert classify(json.dumps({"status": "pending"}), custom) == "ok"


def test_unknown_rule_keys_are_refused():
    with pytest.raises(ValueError, match="no_such_rule"):
        GuardRules.model_validate({"no_such_rule": True})
