"""Capture through the real gateway over HTTP.

With the scripted fault upstream playing the engine (it calls the first tool offered with
`{"id": "1"}`, so the test chooses the call by ordering the tools): fail-closed start-up, no
message text in descriptor mode (the store's bytes are searched for the request's words), guard
labels attached to the decision that made the call, the allowlist and sample rate, the store
surviving a restart, and that a slow or failing capture neither slows nor fails a request.

With the real engine: a scripted tool loop under a shadow and then a canary of a real adapter,
built into a suite, replayed against that candidate, and gated on the exported evidence.
"""

from __future__ import annotations

import json
import threading
import uuid
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.support.fault_upstream import FaultUpstream
from tests.support.gateway_harness import RunningGateway, wait_for, write_config
from core.capture import read_decisions
from serve.gateway.config import load_gateway_config
from serve.engine.launcher import ConfigError


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

        entered, finished = threading.Event(), threading.Event()

        def stuck(_job: object) -> None:
            entered.set()
            release.wait(120)
            finished.set()
            raise RuntimeError("the capture store is broken")

        capture.process = stuck
        for _ in range(4):
            turn(gw, [{"role": "user", "content": "x"}], ["search"])
        assert not finished.is_set()  # all four were answered while the capture worker was stuck on the first job
        wait_for(entered.is_set, "the capture worker to take the first job", 10)
        wait_for(lambda: sample(gw, "worker_capture_errors_total", reason="queue_full") >= 2, "drops", 10)
        release.set()
        wait_for(lambda: sample(gw, "worker_capture_errors_total", reason="process") >= 1, "counted errors", 10)
        assert turn(gw, [{"role": "user", "content": "x"}], ["search"])["tool_calls"]


# --- the real engine: a scripted tool loop, captured, built into a suite, replayed against a ---
# --- candidate adapter, and the production-candidate gate run on the exported evidence --------

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
CANARY_WORKSPACES = [f"ws-c{i}" for i in range(16)]
POLICY = Path(__file__).resolve().parents[3] / "configs" / "gates" / "production-candidate.toml"


def live_turn(gw: RunningGateway, history: list, session: str, force: str | None, workspace: str = "ws-live") -> dict:
    """One turn: `force` names the tool the model must call (None: it must answer in text)."""
    choice = {"type": "function", "function": {"name": force}} if force else "none"
    response = gw.client.post("/v1/chat/completions", json={
        "model": "worker", "messages": history, "tools": LIVE_TOOLS, "tool_choice": choice,
        "max_tokens": 48 if force else 4, "temperature": 0},
        headers={"X-Workspace-Id": workspace, "X-Session-Id": session})
    assert response.status_code == 200, response.text
    message = response.json()["choices"][0]["message"]
    if force:
        assert message["tool_calls"][0]["function"]["name"] == force, message
    return {k: v for k, v in message.items() if k in ("role", "content", "tool_calls")}


def play(gw: RunningGateway, script: list, workspace: str = "ws-live") -> None:
    """The test plays the tools: each forced call gets the scripted result in the next request."""
    for history, session, force, tool_result in script:
        message = live_turn(gw, history, session, force, workspace)
        if force:
            history += [message, {"role": "tool", "tool_call_id": message["tool_calls"][0]["id"],
                                  "content": json.dumps(tool_result)}]


def small_policy(path: Path, captured_after: str) -> Path:
    """The shipped production-candidate policy, sized for a test: fresh after the test's start,
    and minimums a handful of live requests can meet."""
    text = POLICY.read_text()
    for old, new in (("captured_after = 2026-09-20T00:00:00Z", f"captured_after = {captured_after}"),
                     ("min_items = 100", "min_items = 3"), ("min_requests = 100", "min_requests = 2")):
        assert text.count(old) == 1, old
        text = text.replace(old, new)
    path.write_text(text)
    return path


@pytest.mark.engine
def test_a_captured_session_is_replayed_against_a_candidate_and_gated_on_live_evidence(
        engine, seeded_adapters, tmp_path, capsys):
    from replay.cli import main as replay_main
    from replay.analysis.gates import read_verdict
    from replay.suite import load_suite
    from serve.gateway.capture import now_iso
    from serve.cli import main as serve_main

    started = now_iso()
    candidate = f"cand-{uuid.uuid4().hex[:6]}"  # adapter names are never reused on an engine
    root = seeded_adapters[1].parent
    allow = json.dumps(["ws-live", *CANARY_WORKSPACES])
    path = write_config(tmp_path / "gw", [engine.base_url], root,
                        extra=f'[capture]\nmode = "full"\nworkspaces = {allow}\nsample_rate = 1.0\n')
    db = load_gateway_config(path).capture.db
    system = {"role": "system", "content": "You keep the ledger.\n\n<memory>\nACME pays late.\n</memory>"}
    one = [system, {"role": "user", "content": "Is invoice INV-7 of ACME paid?"}]
    two = [system, {"role": "user", "content": "Is invoice INV-8 paid?"}]
    # a rejection, a success, an empty result; then a clean session
    script = [(one, "s-live-1", "lookup", {"error": "Permission denied: the ledger is locked"}),
              (one, "s-live-1", "search", {"invoices": [{"id": "INV-7", "paid": True}]}),
              (one, "s-live-1", "lookup", []),
              (one, "s-live-1", None, None),
              (two, "s-live-2", "lookup", {"id": "INV-8", "paid": False}),
              (two, "s-live-2", None, None)]
    with RunningGateway(path) as gw:
        gw.ok("POST", "/adapters", {"name": candidate, "path": seeded_adapters[1].name})
        gw.ok("POST", f"/adapters/{candidate}/load")
        gw.ok("POST", "/routes/worker/shadow", {"candidate": candidate, "sample_rate": 1.0})
        play(gw, script)
        wait_for(lambda: drained(gw) and len(read_decisions(db)) == 6, "six captures", 30)
        wait_for(lambda: len(gw.ok("GET", "/shadow")["results"]) == 6, "six shadow comparisons", 300)
        assert sample(gw, "worker_guard_anomalies_total", workspace="ws-live", tool="lookup", kind="blocked") == 1
        assert sample(gw, "worker_guard_anomalies_total", workspace="ws-live", tool="lookup", kind="empty_result") == 1

        # a canary cohort (its lookup comes back empty) beside a control cohort (its lookup succeeds)
        gw.ok("DELETE", "/routes/worker/shadow")
        gw.ok("POST", "/routes/worker/canary", {"candidate": candidate, "percent": 50, "sticky_by": "workspace"})
        kinds = {w: gw.ok("GET", "/resolve", workspace=w)["kind"] for w in CANARY_WORKSPACES}
        cohorts = {kind: next(w for w, k in kinds.items() if k == kind) for kind in ("canary", "production")}
        for kind, tool_result in (("canary", []), ("production", {"id": "INV-8", "paid": True})):
            history = [{"role": "user", "content": "Is invoice INV-8 paid?"}]
            play(gw, [(history, f"s-{kind}", "lookup", tool_result), (history, f"s-{kind}", None, None)],
                 cohorts[kind])
        wait_for(lambda: drained(gw) and len(read_decisions(db)) == 10, "ten captures", 30)
    decisions = read_decisions(db)
    assert [(d.session, d.chosen_tool, d.outcome, d.kind) for d in decisions] == [
        ("s-live-1", "lookup", "blocked", "production"), ("s-live-1", "search", "ok", "production"),
        ("s-live-1", "lookup", "empty_result", "production"), ("s-live-1", None, None, "production"),
        ("s-live-2", "lookup", "ok", "production"), ("s-live-2", None, None, "production"),
        ("s-canary", "lookup", "empty_result", "canary"), ("s-canary", None, None, "canary"),
        ("s-production", "lookup", "ok", "production"), ("s-production", None, None, "production")]

    # the captured sessions become a suite, replayed against the base model and the candidate
    suite = tmp_path / "suite"
    assert replay_main(["suite", "build", "--from-capture", str(db), "--out", str(suite), "--version", "live-1"]) == 0
    built = load_suite(suite)
    assert [(d.stratum, d.session) for d in built.decisions] == [
        ("known_failure", "s-live-1"), ("verified_recovery", "s-live-1"), ("clean_trajectory_action", "s-live-2"),
        ("clean_trajectory_action", "s-production")]
    assert all("<memory>" not in json.dumps(d.request.messages) for d in built.decisions)
    run_toml = tmp_path / "run.toml"
    run_toml.write_text(f'[endpoint]\nbase_url = "{engine.base_url}/v1"\n[decoding]\nmax_tokens = 48\n'
                        f'[[arms]]\nname = "base"\nmodel = "worker-base"\n'
                        f'[[arms]]\nname = "{candidate}"\nmodel = "{candidate}"\n')
    run = tmp_path / "run"
    assert replay_main(["run", "--suite", str(suite), "--config", str(run_toml), "--out", str(run),
                        "--ledger", str(tmp_path / "ledger.sqlite")]) == 0, capsys.readouterr().err
    results = [json.loads(line) for line in (run / "results.jsonl").read_text().splitlines()]
    assert sorted((r["arm"], r["decision_id"]) for r in results) == sorted(
        (arm, d.id) for arm in ("base", candidate) for d in built.decisions)
    for r in results:
        decision = next(d for d in built.decisions if d.id == r["decision_id"])
        # the recorded requests force their tool, so each arm's call repeats the recorded one
        assert r["score"]["tool_repeat" if decision.stratum == "known_failure" else "tool_correct"] is True, r

    # the gateway's stores become the gate's evidence; the gate explains every condition
    evidence = tmp_path / "evidence"
    assert serve_main(["evidence", "--config", str(path), "--candidate", candidate, "--since", started,
                       "--out", str(evidence)]) == 0
    capsys.readouterr()
    shadow = json.loads((evidence / "shadow.json").read_text())["items"]
    # verdicts: the blocked lookup, the successful search and the clean session's lookup
    assert [item["baseline"] for item in shadow] == [False, True, True]
    canary = json.loads((evidence / "canary.json").read_text())
    # control: six shadow-phase requests and two of its own; anomalies: blocked + empty of five results
    assert canary["control"] == {"requests": 8, "errors": 0, "anomalies": 2, "outcomes": 5}
    assert canary["canary"] == {"requests": 2, "errors": 0, "anomalies": 1, "outcomes": 1}
    policy = small_policy(tmp_path / "policy.toml", started)
    code = replay_main(["gate", str(run), "--policy", str(policy), "--baseline", "base", "--candidate", candidate,
                        "--evidence", f"fresh={run}", "--evidence", f"fresh_suite={suite}",
                        *(f"--evidence={key}={evidence / key}.json" for key in ("shadow", "canary", "registry"))])
    printed = capsys.readouterr().out
    verdict = read_verdict(run / f"gate-production-candidate-{candidate}.json")
    statuses = {c.id: c.status.value for c in verdict.conditions}
    base_joint = sum(bool(r["score"].get("joint_correct")) for r in results if r["arm"] == "base")
    cand_joint = sum(bool(r["score"].get("joint_correct")) for r in results if r["arm"] == candidate)
    shadow_gain = sum(i["candidate"] for i in shadow) > sum(i["baseline"] for i in shadow)
    assert statuses == {
        "quantisation-survives": "not_run", "isolated-live-replay": "not_run",
        "fresh-chronological": "pass" if cand_joint > base_joint else "fail",
        "shadow-improves": "pass" if shadow_gain else "fail",
        "canary-no-regression": "fail",  # anomalies 40% → 100%
        "rollback-ready": "pass"}  # the base model, production today, stays loaded
    assert code == 1 and not verdict.passed
    assert "no evidence 'quantised' given" in printed and "anomalies 40.00% → 100.00%" in printed
    assert "rollback target 'worker-base' is loaded" in printed


def test_descriptor_key_set_of_a_text_call_is_typed_by_the_requests_schema():
    from serve.gateway.capture import CaptureJob, describe

    body = {"messages": [{"role": "user", "content": "x"}], "tools": [{"type": "function", "function": {
        "name": "lookup", "parameters": {"type": "object", "properties": {"filter": {"type": "object"}}}}}]}
    answer = {"role": "assistant", "content": "<function=lookup><parameter=filter>{'s': 1}</parameter></function>"}
    job = CaptureJob(key="k", request_id="r", workspace="ws-a", session="s", route="worker", adapter="base", kind="base",
                     body=body, answer=answer, duration_s=0.1, captured_at="2026-07-01T10:00:00Z")
    assert describe(job, "descriptor").chosen_keys == ["filter", "filter.s"]


def test_a_clients_request_id_is_not_the_capture_key(tmp_path, fault):
    """Issue 14 item 14: three requests with one X-Request-Id are three captures, each keeping it."""
    path = config(tmp_path, fault, 'mode = "descriptor"\nsample_rate = 1.0')
    db = load_gateway_config(path).capture.db
    with RunningGateway(path) as gw:
        for n in range(3):
            body = {"model": "worker", "messages": [{"role": "user", "content": f"step {n}"}], "max_tokens": 8,
                    "tools": [tool("search")]}
            response = gw.client.post("/v1/chat/completions", json=body,
                                      headers={"X-Workspace-Id": "ws-a", "X-Session-Id": "s-1", "X-Request-Id": "same"})
            assert response.status_code == 200 and response.headers["x-request-id"] == "same"
        decisions = wait_for(lambda: drained(gw) and len(read_decisions(db)) == 3 and read_decisions(db),
                             "three captures", 10)
        assert sample(gw, "worker_capture_descriptors_total", mode="descriptor", workspace="ws-a") == 3
    assert [d.request_id for d in decisions] == ["same"] * 3
    assert len({d.id for d in decisions}) == 3


def test_a_store_written_before_request_ids_were_kept_still_opens_and_stores(tmp_path):
    import sqlite3

    from core.capture import SCHEMA, CaptureStore

    path = tmp_path / "old.sqlite"
    old = sqlite3.connect(path)
    old.executescript(SCHEMA.replace(",\n    request_id TEXT\n", "\n"))
    old.close()
    store = CaptureStore(path)
    from serve.gateway.capture import CaptureJob, describe

    job = CaptureJob(key="k1", request_id="same", workspace="ws-a", session="s", route="worker", adapter="base",
                     kind="base", body={"messages": []}, answer={"role": "assistant", "content": "hi"},
                     duration_s=0.1, captured_at="2026-07-01T10:00:00Z")
    store.insert(describe(job, "descriptor"))
    store.insert(describe(CaptureJob(**{**job.__dict__, "key": "k2"}), "descriptor"))
    store.close()
    assert [(d.id, d.request_id) for d in read_decisions(path)] == [("k1", "same"), ("k2", "same")]
