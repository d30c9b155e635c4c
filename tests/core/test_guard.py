"""The tool-outcome guard: each of the eight anomaly kinds of 001 S11, `ok`, and configurable rules."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from core.guard import ANOMALIES, FAILURES, GuardRules, classify
from tests.support.cli import ROOT

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


def test_patterns_are_re2_matched_in_linear_time_and_refused_when_re2_cannot_compile():
    # In its own process: with a backtracking matcher this would never return (a regression hangs
    # only that process, and the timeout fails the test).
    program = ("from core.guard import GuardRules, classify\n"
               "rules = GuardRules(expect_json=False, blocked_patterns=[r'(x+x+)+y'], error_patterns=[r'^(a+)+$'])\n"
               "print(classify('x' * 50_000, rules), classify('a' * 40 + '!', rules))")
    done = subprocess.run([sys.executable, "-c", program], cwd=ROOT, capture_output=True, text=True, timeout=120,
                          check=False)
    assert done.stdout.split() == ["ok", "ok"], done.stderr
    with pytest.raises(ValueError, match=r"blocked_patterns\.0\n.*does not compile in RE2"):
        GuardRules.model_validate({"blocked_patterns": [r"(?<!not )allowed"]})


def test_a_deeply_nested_result_is_text_not_a_crash():
    assert classify("[" * 50_000 + "]" * 50_000, GuardRules(expect_json=False)) == "ok"
    assert classify("[" * 50_000, RULES) == "invalid_envelope"


def test_unknown_rule_keys_are_refused():
    with pytest.raises(ValueError, match="no_such_rule"):
        GuardRules.model_validate({"no_such_rule": True})
