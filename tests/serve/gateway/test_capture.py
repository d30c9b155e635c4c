"""Capture through the real gateway over HTTP.

Without an engine: fail-closed start-up; with a stand-in upstream that only answers, a slow or
failing capture neither slows nor fails a request (the fault is in the capture worker).

With the real engine: no message text nor answer text in descriptor mode (the store's bytes and
its WAL are searched), guard labels attached to the decision that made the call, a client's
request id kept but not the key, the store surviving a restart; full mode keeping an allowlisted
request and the engine's call as they were; sample rate 0 for capture and shadow; and a scripted
tool loop under a shadow and then a canary of a real adapter, built into a suite, replayed
against that candidate, and gated on the exported evidence.
"""

from __future__ import annotations

import json
import threading
import uuid
from pathlib import Path

import pytest

from core.capture_store import read_decisions
from serve.engine.launcher import ConfigError
from serve.gateway.capture import CaptureJob
from serve.gateway.config import load_gateway_config
from tests.support.gateway_harness import RunningGateway, sample, wait_for, write_config
from tests.support.live import engine_value


def tool(name: str) -> dict:
    return {"type": "function", "function": {"name": name, "parameters": {"type": "object"}}}


SECRET = "Zebrafinch-Quittung"  # a word of the user's message
RESULT_WORD = "Marmelade-Konto"  # a word of a tool result


def config(tmp_path: Path, upstream_url: str, capture: str) -> Path:
    root = tmp_path / "adapters"
    root.mkdir(exist_ok=True)
    return write_config(tmp_path / "gw", [upstream_url], root, extra=f"[capture]\n{capture}\n")


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


def job(key: str, body: dict, answer: dict, workspace: str = "ws-a", request_id: str | None = None) -> CaptureJob:
    """An answered request as the capture worker gets it, from session `s` of `workspace`."""
    return CaptureJob(key=key, request_id=request_id or key, workspace=workspace, session="s", route="worker",
                      adapter="base", kind="base", body=body, answer=answer, duration_s=0.1,
                      captured_at="2026-07-01T10:00:00Z")


def drained(gw: RunningGateway) -> bool:
    capture = gw.gateway.capture
    return capture.queue.empty() and capture.queue.unfinished_tasks == 0


def test_unknown_mode_and_full_without_allowlist_fail_closed_at_start_up(tmp_path, no_upstream):
    with pytest.raises(ConfigError) as unknown:
        load_gateway_config(config(tmp_path, no_upstream.url, 'mode = "everything"'))
    assert "gateway.toml:" in str(unknown.value) and "capture.mode" in str(unknown.value)
    with pytest.raises(ConfigError, match="needs capture.workspaces, the allowlist"):
        load_gateway_config(config(tmp_path, no_upstream.url, 'mode = "full"\nsample_rate = 1.0'))
    with pytest.raises(ConfigError, match="sample_rate"):
        load_gateway_config(config(tmp_path, no_upstream.url, 'mode = "descriptor"\nsample_rate = 2'))
    default = load_gateway_config(config(tmp_path, no_upstream.url, ""))
    assert (default.capture.mode, default.capture.sample_rate, default.capture.workspaces) == ("off", 0.0, [])


def test_a_slow_or_failing_capture_never_slows_or_fails_a_request(tmp_path, fault):
    """The fault is injected into the capture worker; the stand-in upstream only answers, and
    nothing about its answers is asserted (the real engine's are, in the engine tests below)."""
    path = config(tmp_path, fault.url, 'mode = "descriptor"\nsample_rate = 1.0\nqueue_size = 1')
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
    from replay.analysis.gates import read_verdict
    from replay.cli import main as replay_main
    from replay.suite import load_suite
    from serve.cli import main as serve_main
    from serve.gateway.capture import now_iso

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


SYSTEM_WORD = "Quokka-Hauptbuch"  # a word of the system prompt


def chat(gw: RunningGateway, history: list, force: str | None, workspace: str = "ws-a", session: str = "s-1",
         max_tokens: int = 48, request_id: str | None = None) -> dict:
    """One real request: `force` names the tool the model must call; None asks for text,
    `max_tokens` long whatever the model would say (ignore_eos), so the answer is distinctive."""
    choice = {"type": "function", "function": {"name": force}} if force else "none"
    headers = {"X-Workspace-Id": workspace, "X-Session-Id": session}
    if request_id:
        headers["X-Request-Id"] = request_id
    response = gw.client.post("/v1/chat/completions", json={
        "model": "worker", "messages": history, "tools": LIVE_TOOLS, "tool_choice": choice,
        "max_tokens": max_tokens, "temperature": 0, "ignore_eos": force is None}, headers=headers)
    assert response.status_code == 200, response.text
    assert response.headers["x-worker-kind"] == "production" and response.json()["model"] == "worker-base"
    if request_id:
        assert response.headers["x-request-id"] == request_id
    message = response.json()["choices"][0]["message"]
    if force:
        assert message["tool_calls"][0]["function"]["name"] == force, message
    return {k: v for k, v in message.items() if k in ("role", "content", "tool_calls")}


def store_bytes(db: Path) -> bytes:
    """The capture store's whole file and its WAL (and shared-memory index) as they are on disk."""
    return b"".join(p.read_bytes() for p in sorted(db.parent.glob(db.name + "*")))


@pytest.mark.engine
def test_descriptors_of_a_real_tool_loop_hold_no_text_get_guard_labels_and_survive_a_restart(engine, tmp_path):
    """The descriptor-mode guarantee on the real serving path: the store's bytes hold none of
    the system, user or tool text, nor the engine's answer; a client's request id is kept but is
    not the capture key."""
    (tmp_path / "adapters").mkdir()
    path = write_config(tmp_path / "gw", [engine.base_url], tmp_path / "adapters",
                        extra='[capture]\nmode = "descriptor"\nsample_rate = 1.0\n')
    db = load_gateway_config(path).capture.db
    history: list = [{"role": "system", "content": f"You keep the {SYSTEM_WORD} for ACME."},
                     {"role": "user", "content": f"Is the {SECRET} invoice INV-7 paid?"}]
    with RunningGateway(path) as gw:
        call = chat(gw, history, "lookup")
        history += [call, {"role": "tool", "tool_call_id": call["tool_calls"][0]["id"],
                           "content": json.dumps({"error": f"Permission denied for {RESULT_WORD}"})}]
        answer = chat(gw, history, None, max_tokens=24)["content"]
        assert isinstance(answer, str) and len(answer.strip()) >= 20, answer
        wait_for(lambda: drained(gw) and len(read_decisions(db)) == 2, "two captures", 30)
        assert sample(gw, "worker_guard_anomalies_total", workspace="ws-a", tool="lookup", kind="blocked") == 1
        while_running = store_bytes(db)
    with RunningGateway(path) as gw:  # a restarted gateway: the store goes on
        for n in range(3):
            chat(gw, [{"role": "user", "content": f"Step {n}: is INV-8 paid?"}], "lookup", session="s-2",
                 request_id="same")
        wait_for(lambda: drained(gw) and len(read_decisions(db)) == 5, "five captures", 30)
        assert sample(gw, "worker_capture_descriptors_total", mode="descriptor", workspace="ws-a") == 3
    decisions = read_decisions(db)
    assert [(d.session, d.chosen_tool, d.chosen_keys, d.outcome) for d in decisions] == [
        ("s-1", "lookup", ["id"], "blocked"), ("s-1", None, [], None)] + [("s-2", "lookup", ["id"], None)] * 3
    assert decisions[0].roles == ["system", "user"] and decisions[1].roles == ["system", "user", "assistant", "tool"]
    assert all(d.request is None and d.chosen_arguments is None for d in decisions)
    assert all(d.route == "worker" and d.adapter == "worker-base" and d.duration_s > 0 for d in decisions)
    assert [d.request_id for d in decisions[2:]] == ["same"] * 3 and len({d.id for d in decisions}) == 5
    for raw in (while_running, store_bytes(db)):
        for text in (SECRET, SYSTEM_WORD, RESULT_WORD, "ACME", "Permission denied", answer.strip()):
            assert text.encode() not in raw, text


@pytest.mark.engine
def test_full_mode_keeps_allowlisted_requests_and_sample_rate_zero_captures_and_shadows_nothing(
        engine, seeded_adapters, tmp_path):
    """On the real engine: full mode stores an allowlisted workspace's request and the engine's
    call as they were, and nothing of another workspace, whose tool results the guard still
    counts; a shadow at sample rate 0 sends the engine nothing; capture at sample rate 0 stores
    nothing while the guard goes on counting."""
    quiet = f"quiet-{uuid.uuid4().hex[:6]}"  # adapter names are never reused on an engine
    root = seeded_adapters[1].parent
    full = write_config(tmp_path / "full", [engine.base_url], root,
                        extra='[capture]\nmode = "full"\nworkspaces = ["ws-a"]\nsample_rate = 1.0\n')
    ask: list = [{"role": "user", "content": "Is invoice INV-7 paid?"}]
    with RunningGateway(full) as gw:
        gw.ok("POST", "/adapters", {"name": quiet, "path": seeded_adapters[1].name})
        gw.ok("POST", f"/adapters/{quiet}/load")
        gw.ok("POST", "/routes/worker/shadow", {"candidate": quiet, "sample_rate": 0.0})
        served = engine_value(engine.base_url, "vllm:request_success_total")
        kept = chat(gw, ask, "lookup")
        other = chat(gw, ask, "lookup", workspace="ws-b", session="s-b")
        chat(gw, [*ask, other, {"role": "tool", "tool_call_id": other["tool_calls"][0]["id"], "content": "[]"}],
             None, workspace="ws-b", session="s-b", max_tokens=2)
        wait_for(lambda: drained(gw) and sample(gw, "worker_guard_anomalies_total", workspace="ws-b",
                                                kind="empty_result") == 1, "the guard", 10)
        assert gw.ok("GET", "/shadow")["results"] == []
        assert engine_value(engine.base_url, "vllm:request_success_total") - served == 3  # no shadow request
    [decision] = read_decisions(load_gateway_config(full).capture.db)
    assert (decision.workspace, decision.chosen_tool) == ("ws-a", "lookup")
    assert decision.request == {"messages": ask, "tools": LIVE_TOOLS,
                                "tool_choice": {"type": "function", "function": {"name": "lookup"}}}
    assert decision.chosen_arguments == json.loads(kept["tool_calls"][0]["function"]["arguments"])

    unsampled = write_config(tmp_path / "unsampled", [engine.base_url], root, extra='[capture]\nmode = "descriptor"\n')
    with RunningGateway(unsampled) as gw:
        call = chat(gw, ask, "lookup")
        chat(gw, [*ask, call, {"role": "tool", "tool_call_id": call["tool_calls"][0]["id"],
                               "content": json.dumps({"status": "pending"})}], None, max_tokens=2)
        wait_for(lambda: drained(gw) and sample(gw, "worker_guard_anomalies_total", kind="pending") == 1, "guard", 10)
        assert sample(gw, "worker_capture_descriptors_total") == 0
    assert read_decisions(load_gateway_config(unsampled).capture.db) == []


def test_descriptor_key_set_of_a_text_call_is_typed_by_the_requests_schema():
    from serve.gateway.capture import describe

    body = {"messages": [{"role": "user", "content": "x"}], "tools": [{"type": "function", "function": {
        "name": "lookup", "parameters": {"type": "object", "properties": {"filter": {"type": "object"}}}}}]}
    for value, keys in (('{"s": 1}', ["filter", "filter.s"]), ("{'s': 1}", ["filter"])):  # vLLM reads JSON only
        answer = {"role": "assistant", "content": f"<function=lookup><parameter=filter>{value}</parameter></function>"}
        assert describe(job("k", body, answer), "descriptor").chosen_keys == keys


def test_a_workspace_past_the_metrics_label_bound_still_has_its_tool_results_labelled(tmp_path):
    """The metrics give the 101st workspace the label `_other` (a bounded series); the store's label rule must
    still look its decisions up under the workspace's own id, in the capture worker's one write per job."""
    from serve.gateway.capture import Capture
    from serve.gateway.config import CaptureSection
    from serve.gateway.metrics import LABEL_VALUES_MAX, OTHER, GatewayMetrics

    metrics = GatewayMetrics(nvml=False)
    for i in range(LABEL_VALUES_MAX):
        metrics.bounded("workspace", f"ws-{i}")
    assert metrics.bounded("workspace", "ws-late") == OTHER
    capture = Capture(CaptureSection(mode="descriptor", sample_rate=1.0, db=tmp_path / "c.sqlite"), metrics)
    ask = [{"role": "user", "content": "Find the ticket."}]
    call = {"role": "assistant", "content": None, "tool_calls": [{"id": "c-1", "type": "function", "function": {
        "name": "lookup", "arguments": "{}"}}]}
    result = {"role": "tool", "tool_call_id": "c-1", "content": json.dumps({"status": "pending"})}
    for n, (messages, answer) in enumerate([(ask, call), ([*ask, call, result], {"role": "assistant",
                                                                                   "content": "Pending."})]):
        capture.process(job(f"k{n}", {"messages": messages, "tools": [tool("lookup")]}, answer, "ws-late"))
    capture.store.close()
    decisions = read_decisions(tmp_path / "c.sqlite")
    assert [(d.workspace, d.chosen_tool, d.outcome) for d in decisions] == [("ws-late", "lookup", "pending"),
                                                                           ("ws-late", None, None)]
    assert decisions[0].thread == decisions[1].thread is not None  # one conversation: its first message's hash


def test_the_stop_stores_every_queued_job_even_before_the_worker_started(tmp_path):
    import asyncio

    from serve.gateway.capture import Capture
    from serve.gateway.config import CaptureSection
    from serve.gateway.metrics import GatewayMetrics

    capture = Capture(CaptureSection(mode="descriptor", sample_rate=1.0, db=tmp_path / "c.sqlite"),
                      GatewayMetrics(nvml=False))
    for n in range(3):
        capture.submit(job(f"k{n}", {"messages": [{"role": "user", "content": "x"}]}, {"role": "assistant", "content": "y"}))
    asyncio.run(capture.stop())
    assert [d.id for d in read_decisions(tmp_path / "c.sqlite")] == ["k0", "k1", "k2"]


def test_a_store_written_before_request_ids_were_kept_still_opens_and_stores(tmp_path):
    import sqlite3

    from core.capture_store import SCHEMA, CaptureStore

    path = tmp_path / "old.sqlite"
    old = sqlite3.connect(path)
    old.executescript(SCHEMA.replace(",\n    request_id TEXT\n", "\n"))
    old.close()
    store = CaptureStore(path)
    from serve.gateway.capture import describe

    for key in ("k1", "k2"):
        store.insert(describe(job(key, {"messages": []}, {"role": "assistant", "content": "hi"}, request_id="same"),
                              "descriptor"))
    store.close()
    assert [(d.id, d.request_id) for d in read_decisions(path)] == [("k1", "same"), ("k2", "same")]
