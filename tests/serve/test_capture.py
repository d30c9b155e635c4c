"""Capture through the real gateway over HTTP (the scripted fault upstream plays the engine: it
calls the first tool offered with `{"id": "1"}`, so the test chooses the call by ordering the tools).

Proves: fail-closed start-up, no message text in descriptor mode (the store's bytes are
searched for the request's words), guard labels attached to the decision that made the call,
the allowlist and sample rate, the store surviving a restart, and that a slow or failing
capture neither slows nor fails a request.
"""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from fault_upstream import FaultUpstream
from gateway_harness import RunningGateway, wait_for, write_config
from serve.capture import read_decisions
from serve.config import load_gateway_config
from serve.engine import ConfigError


def tool(name: str) -> dict:
    return {"type": "function", "function": {"name": name, "parameters": {"type": "object"}}}


SECRET = "Zebrafinch-Quittung"  # a word of the user's message
RESULT_WORD = "Marmelade-Konto"  # a word of a tool result


def config(tmp_path: Path, fault: FaultUpstream, capture: str) -> Path:
    root = tmp_path / "adapters"
    root.mkdir(exist_ok=True)
    return write_config(tmp_path / "gw", [fault.url], root, extra=f"[capture]\n{capture}\n")


def sample(gw: RunningGateway, name: str, **labels: str) -> float:
    for family in text_string_to_metric_families(gw.metrics()):
        for s in family.samples:
            if s.name == name and all(s.labels.get(k) == v for k, v in labels.items()):
                return s.value
    return 0.0


def turn(gw: RunningGateway, messages: list, tools: list[str], workspace: str = "ws-a",
         session: str = "s-1", stream: bool = False) -> dict:
    """One request of the loop; returns the assistant message (to append to the history)."""
    body = {"model": "worker", "messages": messages, "max_tokens": 8, "stream": stream}
    if tools:
        body["tools"] = [tool(t) for t in tools]
    response = gw.client.post("/v1/chat/completions", json=body,
                              headers={"X-Workspace-Id": workspace, "X-Session-Id": session})
    assert response.status_code == 200, response.text
    if stream:
        return {"role": "assistant", "content": None}
    return response.json()["choices"][0]["message"]


def result(message: dict, content: object) -> dict:
    call = message["tool_calls"][0]
    return {"role": "tool", "tool_call_id": call["id"], "content": json.dumps(content)}


def drained(gw: RunningGateway) -> bool:
    capture = gw.gateway.capture
    return capture.queue.empty() and capture.queue._unfinished_tasks == 0  # noqa: SLF001


def stored(path: Path, count: int) -> list:
    return wait_for(lambda: len(read_decisions(path)) >= count and read_decisions(path), f"{count} captures", 10)


def test_unknown_mode_and_full_without_allowlist_fail_closed_at_start_up(tmp_path, fault):
    with pytest.raises(ConfigError) as unknown:
        load_gateway_config(config(tmp_path, fault, 'mode = "everything"'))
    assert "gateway.toml:" in str(unknown.value) and "capture.mode" in str(unknown.value)
    with pytest.raises(ConfigError, match="needs capture.workspaces, the allowlist"):
        load_gateway_config(config(tmp_path, fault, 'mode = "full"\nsample_rate = 1.0'))
    with pytest.raises(ConfigError, match="sample_rate"):
        load_gateway_config(config(tmp_path, fault, 'mode = "descriptor"\nsample_rate = 2'))
    default = load_gateway_config(config(tmp_path, fault, ""))
    assert (default.capture.mode, default.capture.sample_rate, default.capture.workspaces) == ("off", 0.0, [])


def test_descriptors_hold_no_text_get_guard_labels_and_survive_a_restart(tmp_path, fault):
    path = config(tmp_path, fault, 'mode = "descriptor"\nsample_rate = 1.0')
    db = load_gateway_config(path).capture.db
    history: list = [{"role": "system", "content": "You keep the ledger."},
                     {"role": "user", "content": f"Find the {SECRET} for ACME."}]
    with RunningGateway(path) as gw:
        first = turn(gw, history, ["search", "lookup"])  # calls search
        history += [first, result(first, {"error": f"Permission denied for {RESULT_WORD}"})]
        second = turn(gw, history, ["lookup", "search"])  # the guard labels the first call: blocked
        history += [second, result(second, {"invoices": [{"id": "inv-1", "note": RESULT_WORD}]})]
        stored(db, 2)
        assert sample(gw, "worker_guard_anomalies_total", workspace="ws-a", tool="search", kind="blocked") == 1
    with RunningGateway(path) as gw:  # a restarted gateway: the store and the session go on
        turn(gw, history, [])
        history += [{"role": "assistant", "content": "Done."}]
        wait_for(lambda: len(read_decisions(db)) == 3 and read_decisions(db)[1].outcome, "the third capture", 10)
        assert sample(gw, "worker_capture_descriptors_total", mode="descriptor", workspace="ws-a") == 1
    decisions = read_decisions(db)
    assert [(d.chosen_tool, d.chosen_keys, d.outcome) for d in decisions] == [
        ("search", ["id"], "blocked"), ("lookup", ["id"], "ok"), (None, [], None)]
    assert [d.tools_offered for d in decisions] == [["lookup", "search"], ["lookup", "search"], []]
    assert decisions[0].roles == ["system", "user"] and decisions[2].roles[-1] == "tool"
    assert all(d.request is None and d.chosen_arguments is None and d.session == "s-1" for d in decisions)
    assert all(d.route == "worker" and d.adapter == "worker-base" and d.duration_s > 0 for d in decisions)
    raw = b"".join(p.read_bytes() for p in db.parent.glob(db.name + "*"))
    for word in (SECRET, RESULT_WORD, "ledger", "ACME"):
        assert word.encode() not in raw, word


def test_full_mode_stores_requests_of_allowlisted_workspaces_only(tmp_path, fault):
    path = config(tmp_path, fault, 'mode = "full"\nworkspaces = ["ws-a"]\nsample_rate = 1.0')
    db = load_gateway_config(path).capture.db
    messages = [{"role": "user", "content": f"Find the {SECRET}."}]
    with RunningGateway(path) as gw:
        turn(gw, messages, ["search"], workspace="ws-a")
        answer = turn(gw, messages, ["search"], workspace="ws-b", session="s-2")
        turn(gw, [*messages, answer, result(answer, [])], ["search"], workspace="ws-b", session="s-2")
        turn(gw, messages, ["search"], workspace="ws-a", stream=True, session="s-3")
        wait_for(lambda: drained(gw) and len(read_decisions(db)) == 2, "two captures", 10)
        # the guard counts every workspace's tool results; capture keeps only the allowlisted ones
        assert sample(gw, "worker_guard_anomalies_total", workspace="ws-b", tool="search", kind="empty_result") == 1
    plain, streamed = read_decisions(db)
    assert plain.workspace == streamed.workspace == "ws-a"
    assert plain.request == {"messages": messages, "tools": [tool("search")]}
    assert plain.chosen_arguments == {"id": "1"} and streamed.chosen_tool == "search"


def test_sample_rate_zero_captures_nothing_but_the_guard_still_counts(tmp_path, fault):
    path = config(tmp_path, fault, 'mode = "descriptor"')
    with RunningGateway(path) as gw:
        answer = turn(gw, [{"role": "user", "content": "x"}], ["search"])
        turn(gw, [{"role": "user", "content": "x"}, answer, result(answer, {"status": "pending"})], ["search"])
        wait_for(lambda: drained(gw) and sample(gw, "worker_guard_anomalies_total", kind="pending") == 1, "guard", 10)
        assert sample(gw, "worker_capture_descriptors_total") == 0
    assert read_decisions(load_gateway_config(path).capture.db) == []


def test_a_slow_or_failing_capture_never_slows_or_fails_a_request(tmp_path, fault):
    path = config(tmp_path, fault, 'mode = "descriptor"\nsample_rate = 1.0\nqueue_size = 1')
    release = threading.Event()
    with RunningGateway(path) as gw:
        capture = gw.gateway.capture

        def stuck(_job: object) -> None:
            release.wait(30)
            raise RuntimeError("the capture store is broken")

        capture.process = stuck
        timings = []
        for _ in range(4):
            started = time.perf_counter()
            turn(gw, [{"role": "user", "content": "x"}], ["search"])
            timings.append(time.perf_counter() - started)
        assert max(timings) < 1.0, timings  # a capture stuck for 30 s costs the requests nothing
        wait_for(lambda: sample(gw, "worker_capture_errors_total", reason="queue_full") >= 2, "drops", 10)
        release.set()
        wait_for(lambda: sample(gw, "worker_capture_errors_total", reason="process") >= 1, "counted errors", 10)
        assert turn(gw, [{"role": "user", "content": "x"}], ["search"])["tool_calls"]


# --- the real engine: a scripted tool loop, captured, built into a suite, replayed ---------

LIVE_TOOLS = [
    {"type": "function", "function": {
        "name": "lookup", "description": "Look up one invoice by its id.", "strict": True,
        "parameters": {"type": "object", "additionalProperties": False, "required": ["id"],
                       "properties": {"id": {"type": "string", "enum": ["INV-7", "INV-8"]}}}}},
    {"type": "function", "function": {
        "name": "search", "description": "Search the invoices of one customer.", "strict": True,
        "parameters": {"type": "object", "additionalProperties": False, "required": ["customer"],
                       "properties": {"customer": {"type": "string", "enum": ["ACME", "INITECH"]}}}}},
]


def live_turn(gw: RunningGateway, history: list, session: str, force: str | None) -> dict:
    """One turn: `force` names the tool the model must call (None: it must answer in text)."""
    choice = {"type": "function", "function": {"name": force}} if force else "none"
    response = gw.client.post("/v1/chat/completions", json={
        "model": "worker", "messages": history, "tools": LIVE_TOOLS, "tool_choice": choice,
        "max_tokens": 48 if force else 4, "temperature": 0},
        headers={"X-Workspace-Id": "ws-live", "X-Session-Id": session})
    assert response.status_code == 200, response.text
    message = response.json()["choices"][0]["message"]
    if force:
        assert message["tool_calls"][0]["function"]["name"] == force, message
    return {k: v for k, v in message.items() if k in ("role", "content", "tool_calls")}


@pytest.mark.engine
def test_a_live_tool_loop_is_captured_labelled_built_into_a_suite_and_replayed(engine, tmp_path, capsys):
    from replay.cli import main
    from replay.suite import load_suite

    root = tmp_path / "adapters"
    root.mkdir()
    path = write_config(tmp_path / "gw", [engine.base_url], root,
                        extra='[capture]\nmode = "full"\nworkspaces = ["ws-live"]\nsample_rate = 1.0\n')
    db = load_gateway_config(path).capture.db
    system = {"role": "system", "content": "You keep the ledger.\n\n<memory>\nACME pays late.\n</memory>"}
    one = [system, {"role": "user", "content": "Is invoice INV-7 of ACME paid?"}]
    two = [system, {"role": "user", "content": "Is invoice INV-8 paid?"}]
    # the test plays the tools: a rejection, a success, an empty result; then a clean session
    script = [(one, "s-live-1", "lookup", {"error": "Permission denied: the ledger is locked"}),
              (one, "s-live-1", "search", {"invoices": [{"id": "INV-7", "paid": True}]}),
              (one, "s-live-1", "lookup", []),
              (one, "s-live-1", None, None),
              (two, "s-live-2", "lookup", {"id": "INV-8", "paid": False}),
              (two, "s-live-2", None, None)]
    with RunningGateway(path) as gw:
        for history, session, force, tool_result in script:
            message = live_turn(gw, history, session, force)
            if force:
                history += [message, {"role": "tool", "tool_call_id": message["tool_calls"][0]["id"],
                                      "content": json.dumps(tool_result)}]
        wait_for(lambda: drained(gw) and len(read_decisions(db)) == 6, "six captures", 30)
        assert sample(gw, "worker_guard_anomalies_total", workspace="ws-live", tool="lookup", kind="blocked") == 1
        assert sample(gw, "worker_guard_anomalies_total", workspace="ws-live", tool="lookup", kind="empty_result") == 1
    decisions = read_decisions(db)
    assert [(d.session, d.chosen_tool, d.outcome) for d in decisions] == [
        ("s-live-1", "lookup", "blocked"), ("s-live-1", "search", "ok"), ("s-live-1", "lookup", "empty_result"),
        ("s-live-1", None, None), ("s-live-2", "lookup", "ok"), ("s-live-2", None, None)]

    suite = tmp_path / "suite"
    assert main(["suite", "build", "--from-capture", str(db), "--out", str(suite), "--version", "live-1"]) == 0
    built = load_suite(suite)
    assert [(d.stratum, d.session) for d in built.decisions] == [
        ("known_failure", "s-live-1"), ("verified_recovery", "s-live-1"), ("clean_trajectory_action", "s-live-2")]
    assert all("<memory>" not in json.dumps(d.request.messages) for d in built.decisions)

    run_toml = tmp_path / "run.toml"
    run_toml.write_text(f'[endpoint]\nbase_url = "{engine.base_url}/v1"\n[decoding]\nmax_tokens = 48\n'
                        '[[arms]]\nname = "base"\nmodel = "worker-base"\n')
    assert main(["run", "--suite", str(suite), "--config", str(run_toml), "--out", str(tmp_path / "run"),
                 "--ledger", str(tmp_path / "ledger.sqlite")]) == 0, capsys.readouterr().err
    lines = (tmp_path / "run" / "results.jsonl").read_text().splitlines()
    results = {r["decision_id"]: r for r in map(json.loads, lines)}
    assert len(results) == 3
    for decision in built.decisions:
        score = results[decision.id]["score"]
        # the recorded requests force their tool, so the replayed call repeats the recorded one
        if decision.stratum == "known_failure":
            assert score["tool_repeat"] is True, results[decision.id]
        else:
            assert score["tool_correct"] is True, results[decision.id]
