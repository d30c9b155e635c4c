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
from typing import Any

import pytest

from core.capture import read_decisions
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
