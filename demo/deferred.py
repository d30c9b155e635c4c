"""`worker-demo deferred`: the deferred-replay loop (DESIGN §9) on the embedded default.

Scripted tool loops run through the real gateway with capture in `descriptor` mode, so the
capture store holds hashes and no text. The demo plays the runtime: it plays the tools and
writes every session's transcript (`<workspace>/<session>.jsonl`) exactly as it sent and
received it. Then — on a real platform, on a replay host, never the serving host — the
descriptors are resolved from the transcripts and proven by hash, redacted with per-workspace
keys (generated here into `keys.toml`, outside the suite), checked for residual values,
frozen, and replayed against the base model and the demo's `recovery` adapter.

The script's tools carry a person's address as the only value `notify` can send (an enum), so
the same e-mail sits in the request, the tool schema and the failed action; replay shows the
pseudonyms agree (an exact repeat of the failed call is still recognised).
"""

from __future__ import annotations

import json
import secrets
import time
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from core.capture_store import read_decisions
from core.errors import WorkerTierError
from core.jsonfile import loads_bounded
from demo.trained_adapters import build_demo_adapters, cached_demo_dir
from replay.analysis.compare import compare, format_comparison
from replay.corpus.capture_suite import BuildReport, build_suite
from replay.corpus.resolve import load_keys
from replay.corpus.transcripts import TranscriptDir, TranscriptHeader, transcript_lines
from replay.run.decisions import run
from replay.run.directory import load_results
from replay.run.run_config import RunConfig
from replay.suite import freeze_suite, load_suite
from serve.engine.modelbuild import cache_dir

EMAIL, PHONE, IBAN = "maria.lopez@acme-corp.com", "+49 30 1234 5678", "DE89 3704 0044 0532 0130 00"
TOOLS: list[dict[str, Any]] = [
    {"type": "function", "function": {
        "name": "notify", "description": "Send the customer a payment reminder.", "strict": True,
        "parameters": {"type": "object", "additionalProperties": False, "required": ["to"],
                       "properties": {"to": {"type": "string", "enum": [EMAIL]}}}}},
    {"type": "function", "function": {
        "name": "lookup", "description": "Look up one invoice by its id.", "strict": True,
        "parameters": {"type": "object", "additionalProperties": False, "required": ["id"],
                       "properties": {"id": {"type": "string", "enum": ["INV-7", "INV-8"]}}}}},
]
PARAMS: dict[str, Any] = {"max_tokens": 48, "temperature": 0}
ASK: list[dict[str, Any]] = [
    {"role": "system", "content": "You keep the ledger.\n\n<memory>\nACME pays late.\n</memory>"},
    {"role": "user", "content": f"Remind ACME about INV-7 (pay to {IBAN}): write to {EMAIL} or call {PHONE}."}]
BLOCKED = {"error": f"Permission denied: {EMAIL} has opted out"}
PAID = {"id": "INV-7", "paid": True, "iban": IBAN}

# A function that posts one chat body with the workspace/session headers and returns choices[0].message.
Post = Callable[[dict[str, Any], dict[str, str]], dict[str, Any]]


@dataclass(frozen=True)
class Script:
    """One session: every turn forces `force`; each call gets the next result, the last answer none."""

    workspace: str
    session: str
    force: str
    results: tuple[Any, ...]


SCRIPTS = (Script("ws-live", "s-remind", "notify", (BLOCKED, {"status": "sent"})),
           Script("ws-other", "s-remind", "notify", (BLOCKED,)),
           Script("ws-live", "s-paid", "lookup", (PAID,)))


def forced(tool: str) -> dict[str, Any]:
    return {"type": "function", "function": {"name": tool}}


def play(post: Post, transcripts: Path, script: Script) -> list[dict[str, Any]]:
    """Run one session through the gateway as the runtime would, and write its transcript: every
    message as sent, then the last answer. Returns the transcript's messages."""
    history = [dict(m) for m in ASK]
    for result in [*script.results, None]:
        body = {"model": "worker", **PARAMS, "messages": history, "tools": TOOLS, "tool_choice": forced(script.force)}
        answer = post(body, {"X-Workspace-Id": script.workspace, "X-Session-Id": script.session})
        message = {k: v for k, v in answer.items() if k in ("role", "content", "tool_calls")}
        calls = message.get("tool_calls") or []
        if not calls or calls[0]["function"]["name"] != script.force:
            raise WorkerTierError(f"the forced call to {script.force} did not come back: {message}")
        history.append(message)
        if result is not None:
            history.append({"role": "tool", "tool_call_id": calls[0]["id"], "content": json.dumps(result)})
    write_transcript(transcripts, script.workspace, script.session, history, forced(script.force))
    return history


def write_transcript(root: Path, workspace: str, session: str, messages: list[dict[str, Any]],
                     tool_choice: Any) -> Path:
    header = TranscriptHeader(workspace=workspace, session=session, tools=TOOLS, tool_choice=tool_choice,
                              params=PARAMS)
    path = root / workspace / f"{session}.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(transcript_lines(header, messages), encoding="utf-8")
    return path


def write_keys(path: Path, workspaces: set[str]) -> Path:
    """A fresh key per workspace (the platform's secret: readable by its owner only, never in a suite)."""
    path.write_text("[keys]\n" + "".join(f'"{w}" = "{secrets.token_hex(32)}"\n' for w in sorted(workspaces)))
    path.chmod(0o600)
    return path


def wait_for_captures(db: Path, count: int, limit_s: float = 60.0) -> None:
    deadline = time.monotonic() + limit_s
    while not (db.is_file() and len(read_decisions(db)) >= count):
        if time.monotonic() > deadline:
            raise WorkerTierError(f"the gateway stored fewer than {count} captures in {db} within {limit_s:.0f} s")
        time.sleep(0.2)


def resolve_and_freeze(db: Path, transcripts: Path, keys: Path, suite_dir: Path) -> BuildReport:
    """Off the serving host: descriptors → resolved, redacted suite → privacy check → frozen."""
    report = build_suite(db, suite_dir, name="deferred", version="1", transcripts=TranscriptDir(transcripts),
                         keys=load_keys(keys))
    freeze_suite(suite_dir)
    return report


def http_post(gateway_url: str) -> Post:
    def post(body: dict[str, Any], headers: dict[str, str]) -> dict[str, Any]:
        request = urllib.request.Request(f"{gateway_url}/v1/chat/completions", data=json.dumps(body).encode(),
                                         headers={"Content-Type": "application/json", **headers}, method="POST")
        with urllib.request.urlopen(request, timeout=300) as resp:
            message: dict[str, Any] = loads_bounded(resp.read(), f"{gateway_url}: the answer")["choices"][0]["message"]
        return message
    return post


def run_deferred(out: Path) -> int:
    from demo.serving import fresh_out, say, serving

    fresh_out(out, "the deferred demo")
    transcripts, db = out / "transcripts", (out / "gateway" / "capture.sqlite").absolute()  # for the gateway
    say("building the demo adapters (cached after the first time)")
    adapters = build_demo_adapters(cached_demo_dir(cache_dir()), cache_dir())
    capture = f'[capture]\nmode = "descriptor"\nsample_rate = 1.0\ndb = "{db}"\n'
    with serving(out, {"recovery": adapters["recovery"]}, capture) as (gateway_url, versions):
        post = http_post(gateway_url)
        for script in SCRIPTS:
            play(post, transcripts, script)
        captured = sum(len(s.results) + 1 for s in SCRIPTS)
        wait_for_captures(db, captured)
        say(f"{captured} decisions captured as descriptors; transcripts in {transcripts}")
        keys = write_keys(out / "keys.toml", {s.workspace for s in SCRIPTS})
        report = resolve_and_freeze(db, transcripts, keys, out / "suite")
        print(report)
        suite = load_suite(out / "suite")
        config = RunConfig.model_validate({
            "endpoint": {"base_url": f"{gateway_url}/v1", "api_key_env": None},
            "decoding": {"temperature": 0.0, "seed": 0, "max_tokens": 48},
            "arms": [{"name": "base", "model": "worker"}, {"name": "recovery", "model": versions["recovery"]}]})
        run(suite, config, out / "run", label="[deferred] replay")
    print(format_comparison(compare(load_results(out / "run"), "base", "recovery")))
    return 0
