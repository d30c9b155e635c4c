"""Redundant repeats on the recorded lookup session: its second call retries the lookup that timed out (a
retry, kept), its third looks INV-7 up again after the second was answered `paid` (a repeat of an answer held)."""

from __future__ import annotations

from pathlib import Path

from core.guard import GuardRules
from core.keyset import canonical_json
from replay.corpus.claude_code import ClaudeCodeDir
from replay.corpus.corpus_suite import CorpusRead
from replay.curation.pool import read_pool
from replay.curation.repeats import answered_calls, redundant
from tests.support.curation import LOOKUP, copy_workspace

TOOL = "mcp__inv__lookup"


def test_a_repeat_of_an_answered_call_is_redundant_and_a_retry_after_a_failure_is_not(tmp_path: Path) -> None:
    copy_workspace(tmp_path, "ws-w")
    rules = GuardRules()
    [session] = [s for s in read_pool(ClaudeCodeDir(tmp_path), rules, CorpusRead()) if s[0].row.session == LOOKUP]
    requests = {d.row.id.rpartition(".")[2]: d.row.request or {} for d in session}
    inv7 = (TOOL, canonical_json({"id": "INV-7"}))
    assert [answered_calls(requests[n], rules) for n in "012"] == [set(), set(), {inv7}]
    assert not redundant(requests["1"], TOOL, {"id": "INV-7"}, rules)  # the prompt holds only the timeout
    assert redundant(requests["2"], TOOL, {"id": "INV-7"}, rules)
    assert not redundant(requests["2"], TOOL, {"id": "INV-8"}, rules)  # another value: a new question
    assert not redundant(requests["2"], "other_tool", {"id": "INV-7"}, rules)
    assert not redundant(requests["2"], None, {}, rules)  # an answer is never a repeat
