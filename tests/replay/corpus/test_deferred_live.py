"""Deferred replay end to end on the real engine (DESIGN §9).

Scripted tool loops run through the real gateway in `descriptor` mode (the store keeps no
text); the script plays the runtime: it plays the tools and writes each session's transcript
as it sent and received it. Then, off the serving path: the descriptors are resolved from the
transcripts (one edited after capture, one cut short, one never written: each refused with its
reason), redacted with workspace keys, checked for residual values, frozen, and replayed
against the engine. The tool `notify` takes a person's address as its only argument (an enum,
so the model can only name it), which puts the same e-mail in the request, the tool schema and
the failed action: replay then proves the pseudonyms agree, as an exact repeat. The sessions
are the demo's (`demo/deferred.py`, `worker-demo deferred`), plus three spoiled on purpose.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from core.capture_store import read_decisions
from demo.deferred import EMAIL, IBAN, PAID, PHONE, SCRIPTS, Script, forced, play, write_transcript
from serve.gateway.config import load_gateway_config
from tests.support.gateway_harness import RunningGateway, wait_for, write_config


def client_post(gw: RunningGateway):
    def post(body: dict[str, Any], headers: dict[str, str]) -> dict[str, Any]:
        response = gw.client.post("/v1/chat/completions", json=body, headers=headers)
        assert response.status_code == 200, response.text
        return response.json()["choices"][0]["message"]
    return post


@pytest.mark.engine
def test_descriptor_captures_are_resolved_redacted_and_replayed(engine, tmp_path, capsys):
    from replay.cli import main as replay_main
    from replay.suite import load_suite

    path = write_config(tmp_path / "gw", [engine.base_url], tmp_path / "adapters",
                        extra='[capture]\nmode = "descriptor"\nsample_rate = 1.0\n')
    (tmp_path / "adapters").mkdir()
    db = load_gateway_config(path).capture.db
    transcripts = tmp_path / "transcripts"
    with RunningGateway(path) as gw:
        for script in SCRIPTS:  # the demo's sessions (`worker-demo deferred`) ...
            play(client_post(gw), transcripts, script)
        edited, short, _ = (play(client_post(gw), transcripts, Script("ws-live", name, "lookup", (PAID,)))
                            for name in ("s-edited", "s-short", "s-gone"))  # ... and three to spoil afterwards
        wait_for(lambda: len(read_decisions(db)) == 13, "thirteen captures", 30)
    raw = b"".join(p.read_bytes() for p in db.parent.glob(db.name + "*"))
    assert EMAIL.encode() not in raw and b"ledger" not in raw  # descriptors: no text on the serving host

    # the runtime's corpus after the fact: one session edited, one cut short, one never written
    edited[1] = {**edited[1], "content": edited[1]["content"].replace("INV-7", "INV-8")}
    write_transcript(transcripts, "ws-live", "s-edited", edited, forced("lookup"))
    write_transcript(transcripts, "ws-live", "s-short", short[:2], forced("lookup"))
    (transcripts / "ws-live" / "s-gone.jsonl").unlink()
    before = {p: p.read_bytes() for p in transcripts.rglob("*.jsonl")}

    keys = tmp_path / "keys.toml"
    keys.write_text(f'[keys]\n"ws-live" = "{"5a" * 32}"\n"ws-other" = "{"c3" * 32}"\n')
    keys.chmod(0o600)
    suite = tmp_path / "suite"
    assert replay_main(["suite", "build", "--from-capture", str(db), "--transcripts", str(transcripts),
                        "--keys", str(keys), "--out", str(suite), "--version", "deferred-1"]) == 0
    printed = capsys.readouterr().out
    print(printed)  # the figures of the run (captured / resolved / refused / redactions / privacy)
    assert {p: p.read_bytes() for p in transcripts.rglob("*.jsonl")} == before  # the corpus is only read
    assert "descriptors: 4 resolved (4 by request hash, 0 by message hashes only); " \
           "refused: hash mismatch 1, session missing 1, turn missing 1" in printed
    assert "left out: no verdict from its outcome 6" in printed
    assert "privacy check: clean" in printed
    built = load_suite(suite)
    assert [(d.stratum, d.workspace, d.session) for d in built.decisions] == [
        ("known_failure", "ws-live", "s-remind"), ("verified_action", "ws-live", "s-remind"),
        ("known_failure", "ws-other", "s-remind"), ("clean_trajectory_action", "ws-live", "s-paid")]
    live_failed, _, other_failed, _ = built.decisions
    pseudonym = live_failed.failed_action.arguments["to"]
    assert pseudonym.startswith("<EMAIL_") and other_failed.failed_action.arguments["to"] != pseudonym
    assert pseudonym in live_failed.request.messages[1]["content"]  # the request says the same pseudonym
    assert live_failed.request.tools[0]["function"]["parameters"]["properties"]["to"]["enum"] == [pseudonym]
    text = (suite / "decisions.jsonl").read_text()
    assert all(value not in text for value in (EMAIL, PHONE, IBAN, "<memory>"))
    assert replay_main(["suite", "check-privacy", str(suite)]) == 0
    assert replay_main(["suite", "freeze", str(suite)]) == 0

    run_toml = tmp_path / "run.toml"
    run_toml.write_text(f'[endpoint]\nbase_url = "{engine.base_url}/v1"\n[decoding]\nmax_tokens = 48\n'
                        '[[arms]]\nname = "base"\nmodel = "worker-base"\n')
    run = tmp_path / "run"
    assert replay_main(["run", "--suite", str(suite), "--config", str(run_toml), "--out", str(run),
                        "--ledger", str(tmp_path / "ledger.sqlite")]) == 0, capsys.readouterr().err
    results = {r["decision_id"]: r for r in map(json.loads, (run / "results.jsonl").read_text().splitlines())}
    assert set(results) == {d.id for d in built.decisions}
    for decision in built.decisions:
        score = results[decision.id]["score"]
        if decision.stratum == "known_failure":
            # the forced call can only name the pseudonymised address: the same one as the failed action's
            assert score["tool_repeat"] and score["exact_repeat"], results[decision.id]
        else:
            assert score["tool_correct"] and score["joint_correct"], results[decision.id]


# --- the same loop on the Anthropic Messages API (what the Claude Agent SDK speaks) -----------------

MSG_TOOL = {"name": "lookup", "description": "Look up one invoice by its id.", "strict": True,
            "input_schema": {"type": "object", "additionalProperties": False, "required": ["id"],
                             "properties": {"id": {"type": "string", "enum": ["INV-7", "INV-8"]}}}}
MSG_SYSTEM = [{"type": "text", "text": "You keep the ledger."}]
RULE = "- Look invoices up by their id. <!-- lc:lookup-by-id evidence:user-explicit -->"


def messages_loop(sdk: Any, sent: list[dict[str, Any]], transcripts: Path, session: str, ask: str,
                  results: list[tuple[str, bool]]) -> None:
    """One tool loop through the gateway's /v1/messages, the tool forced (`any`), each result played;
    then its transcript as the runtime keeps it: the header from the body it sent, the messages as
    sent, the last answer."""
    from replay.corpus.transcripts import TranscriptHeader, transcript_lines

    history: list[dict[str, Any]] = [{"role": "user", "content": ask}]
    for result in [*results, None]:
        answer = sdk.messages.create(model="worker", max_tokens=48, system=MSG_SYSTEM, messages=history,
                                     tools=[MSG_TOOL], tool_choice={"type": "any"}, extra_body={"temperature": 0},
                                     extra_headers={"X-Session-Id": session})
        call = next(block for block in answer.content if block.type == "tool_use")
        history.append({"role": "assistant", "content": [b.model_dump(exclude_none=True) for b in answer.content]})
        if result is not None:
            content, failed = result
            history.append({"role": "user", "content": [{"type": "tool_result", "tool_use_id": call.id,
                                                         "content": content, **({"is_error": True} if failed else {})}]})
    body = sent[-1]
    assert body["messages"] == history[:-1]  # what the SDK sent is what the loop built
    header = TranscriptHeader(workspace="ws-msg", session=session, api="messages", system=body["system"],
                              tools=body["tools"], tool_choice=body["tool_choice"],
                              params={k: v for k, v in body.items()
                                      if k not in ("model", "messages", "system", "tools", "tool_choice")})
    path = transcripts / "ws-msg" / f"{session}.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(transcript_lines(header, history), encoding="utf-8")


@pytest.mark.engine
def test_messages_captures_are_resolved_and_replayed_through_the_messages_api(engine, tmp_path, capsys):
    """The anthropic SDK runs two short Messages tool loops through the gateway (descriptor capture);
    the suite built from them keeps the Messages shape and is replayed by `worker-replay run` through the
    gateway's /v1/messages, memory withheld and injected (the footer in `system`)."""
    import anthropic

    from core.canonical import request_digest
    from replay.cli import main as replay_main
    from replay.run.decisions import plan, request_body
    from replay.run.run_config import load_run_config
    from replay.suite import load_suite

    path = write_config(tmp_path / "gw", [engine.base_url], tmp_path / "adapters",
                        extra='[capture]\nmode = "descriptor"\nsample_rate = 1.0\n')
    (tmp_path / "adapters").mkdir()
    db = load_gateway_config(path).capture.db
    transcripts, sent = tmp_path / "transcripts", []
    record = lambda request: sent.append(json.loads(request.content))  # noqa: E731 (the runtime keeps what it sent)
    with RunningGateway(path) as gw, anthropic.DefaultHttpxClient(event_hooks={"request": [record]}) as http:
        sdk = anthropic.Anthropic(base_url=gw.url, api_key="not-checked", max_retries=0, http_client=http,
                                  default_headers={"X-Workspace-Id": "ws-msg"})
        messages_loop(sdk, sent, transcripts, "s-timeout", "Look up invoice INV-7.",
                      [("the invoice service timed out", True), ('{"paid": true}', False)])
        messages_loop(sdk, sent, transcripts, "s-clean", "Look up invoice INV-8.", [('{"paid": false}', False)])
        wait_for(lambda: len(read_decisions(db)) == 5, "five captures", 30)
        captured = read_decisions(db)
        assert {d.api for d in captured} == {"messages"} and {d.tool_choice for d in captured} == {"required"}

        keys = tmp_path / "keys.toml"
        keys.write_text(f'[keys]\n"ws-msg" = "{"5a" * 32}"\n')
        keys.chmod(0o600)
        suite = tmp_path / "suite"
        assert replay_main(["suite", "build", "--from-capture", str(db), "--transcripts", str(transcripts),
                            "--keys", str(keys), "--out", str(suite)]) == 0
        printed = capsys.readouterr().out
        assert "descriptors: 3 resolved (3 by request hash, 0 by message hashes only); refused: none" in printed
        built = load_suite(suite)
        assert [(d.stratum, d.session, d.api) for d in built.decisions] == [
            ("known_failure", "s-timeout", "messages"), ("verified_action", "s-timeout", "messages"),
            ("clean_trajectory_action", "s-clean", "messages")]
        assert built.decisions[0].request.system == MSG_SYSTEM and built.decisions[0].request.tools == [MSG_TOOL]
        assert replay_main(["suite", "freeze", str(suite)]) == 0

        rules = tmp_path / "memory" / "ws-msg" / "rules" / "learned-corrections.md"
        rules.parent.mkdir(parents=True)
        rules.write_text(f"# Learned Corrections\n\n## Rules\n{RULE}\n")
        run_toml = tmp_path / "run.toml"
        run_toml.write_text(f'[endpoint]\nbase_url = "{gw.url}/v1"\n[decoding]\nmax_tokens = 48\n'
                            '[memory]\nroot = "memory"\n[[arms]]\nname = "withheld"\nmodel = "worker"\n'
                            '[[arms]]\nname = "rules"\nmodel = "worker"\nmemory = "workspace"\n')
        before = len(read_decisions(db))
        run = tmp_path / "run"
        assert replay_main(["run", "--suite", str(suite), "--config", str(run_toml), "--out", str(run),
                            "--ledger", str(tmp_path / "ledger.sqlite")]) == 0, capsys.readouterr().err
        wait_for(lambda: len(read_decisions(db)) == before + 6, "the replayed requests' captures", 30)
        seen = {d.request_sha256: d for d in read_decisions(db)[before:]}
    assert {d.api for d in seen.values()} == {"messages"}  # replay went through /v1/messages
    results = [json.loads(line) for line in (run / "results.jsonl").read_text().splitlines()]
    assert sorted((r["arm"], r["decision_id"]) for r in results) == sorted(
        (arm, d.id) for arm in ("withheld", "rules") for d in built.decisions)
    for result in results:
        assert result["parsed"]["outcome"] == "ok" and result["parsed"]["calls"][0]["tool"] == "lookup", result
        scored = "tool_repeat" if result["stratum"] == "known_failure" else "joint_correct"
        assert result["score"][scored] is not None, result  # key-set scores computed
        assert result["injected_rule_ids"] == (["lc:lookup-by-id"] if result["arm"] == "rules" else [])
        assert result["usage"]["prompt_tokens"] > 0 and result["usage"]["completion_tokens"] > 0
    # what the gateway hashed is the body replay sent, with the footer in `system`
    config = load_run_config(run_toml)
    for item in plan(built, config, set()):
        body = request_body(config, item)
        assert request_digest("messages", body) in seen, item.decision.id
        assert ("lc:lookup-by-id" in body["system"][0]["text"]) == (item.arm.name == "rules")
