"""The runtime's own APIs through the gateway, on the real engine (CPU vLLM, SmolLM2-135M), with the
real clients: the `anthropic` SDK on the Messages API (create, a stream with a forced tool, count_tokens,
an unknown model, the runtime's 32000-token default), the `openai` SDK and the OpenAI Agents SDK on
the Responses API; capture, the guard and shadow on Messages traffic. Generation is a few tokens."""

from __future__ import annotations

import asyncio
import json
import uuid

import anthropic
import httpx
import pytest
from openai import OpenAI

from core.capture_store import read_decisions
from core.keyset import sorted_key_set
from tests.support.gateway_harness import RunningGateway, sample, wait_for, write_config

pytestmark = pytest.mark.engine

RUN = uuid.uuid4().hex[:6]
# strict: vLLM holds a forced call to the schema only for a strict tool
TOOL = {"name": "lookup", "description": "Look up one invoice by its id.", "strict": True,
        "input_schema": {"type": "object", "additionalProperties": False, "required": ["id"],
                         "properties": {"id": {"type": "string", "enum": ["INV-7", "INV-8"]}}}}
ASK = [{"role": "user", "content": "Look up invoice INV-7."}]
FORCED = {"type": "tool", "name": "lookup"}
GREEDY = {"temperature": 0}  # the anthropic SDK has no `temperature` argument any more; vLLM reads the field


@pytest.fixture(scope="module")
def gw(engine, seeded_adapters, tmp_path_factory):
    """A gateway with capture (descriptor, every session) and one adapter loaded, for shadow."""
    config = write_config(tmp_path_factory.mktemp("apis"), [engine.base_url], seeded_adapters[1].parent,
                          gateway='model_aliases = { "claude-*" = "worker" }',
                          extra='[capture]\nmode = "descriptor"\nsample_rate = 1.0\n')
    with RunningGateway(config) as gateway:
        gateway.ok("POST", "/adapters", {"name": f"msg-a-{RUN}", "path": seeded_adapters[1].name})
        gateway.ok("POST", f"/adapters/msg-a-{RUN}/load")
        yield gateway


def client(gw: RunningGateway, **headers: str) -> anthropic.Anthropic:
    return anthropic.Anthropic(base_url=gw.url, api_key="not-checked", max_retries=0, default_headers=headers)


def drained(gw: RunningGateway) -> bool:
    capture = gw.gateway.capture
    return capture.queue.empty() and capture.queue.unfinished_tasks == 0


def test_the_anthropic_sdk_creates_streams_a_forced_tool_and_counts_tokens(gw, engine):
    sdk = client(gw, **{"X-Workspace-Id": "ws-msg", "anthropic-beta": "fine-grained-tool-streaming-2025-05-14"})
    raw = sdk.messages.with_raw_response.create(model="claude-haiku-4-5", max_tokens=8, messages=ASK,
                                                system=[{"type": "text", "text": "You are terse."}],
                                                extra_body=GREEDY, metadata={"user_id": json.dumps(
                                                    {"session_id": "sess-meta-1"})})
    message = raw.parse()
    assert raw.headers["x-worker-route"] == "worker" and raw.headers["x-worker-kind"] == "production"
    assert message.type == "message" and message.content[0].type == "text" and message.usage.output_tokens > 0

    with sdk.messages.stream(model="worker", max_tokens=48, messages=ASK, tools=[TOOL], tool_choice=FORCED,
                             extra_body=GREEDY) as stream:
        events = [event.type for event in stream]
        final = stream.get_final_message()
    assert events[0] == "message_start" and "content_block_delta" in events and events[-1] == "message_stop"
    call = next(block for block in final.content if block.type == "tool_use")
    assert call.name == "lookup" and call.input["id"] in ("INV-7", "INV-8") and set(call.input) == {"id"}

    counted = sdk.messages.count_tokens(model="worker", messages=ASK, tools=[TOOL])
    direct = httpx.post(f"{engine.base_url}/v1/messages/count_tokens", json={
        "model": "worker-base", "messages": ASK, "tools": [TOOL]}, timeout=60).json()
    assert counted.input_tokens == direct["input_tokens"] > 0

    with pytest.raises(anthropic.NotFoundError) as missing:
        sdk.messages.create(model="no-such-version", max_tokens=4, messages=ASK)
    assert missing.value.body["type"] == "error" and missing.value.body["error"]["type"] == "not_found_error"

    wait_for(lambda: drained(gw) and len(read_decisions(gw.config.capture.db)) >= 2, "the captures", 30)
    by_session = {d.session: d for d in read_decisions(gw.config.capture.db)}
    assert by_session["sess-meta-1"].api == "messages" and by_session["sess-meta-1"].workspace == "ws-msg"
    streamed = next(d for d in by_session.values() if d.chosen_tool == "lookup")
    assert (streamed.api, streamed.chosen_keys, streamed.tools_offered) == ("messages", ["id"], ["lookup"])
    assert streamed.tool_choice == "function:lookup" and streamed.roles == ["user"]
    assert sample(gw, "worker_gateway_requests_total", api="count_tokens", status="200") == 1


def test_the_runtimes_default_max_tokens_is_clamped_to_the_engines_context(gw):
    """Claude Code asks for 32000 output tokens unless told otherwise; the engine's context is 8192."""
    with client(gw).messages.stream(model="worker", max_tokens=32000, messages=ASK, stop_sequences=["."],
                                    extra_body=GREEDY) as stream:
        assert stream.get_final_message().type == "message"
        header = stream.response.headers["x-worker-max-tokens"]
    asked, rest = header.split("->")
    room = int(rest.split()[0])
    assert int(asked) == 32000 and 8000 < room < 8192


def test_tool_results_are_guarded_and_label_the_captured_call(gw):
    """A tool loop on the Messages API: the forced call is captured, and the next request's `tool_result`
    (marked `is_error` by the runtime) is the guard's `failed` and labels that decision."""
    sdk = client(gw, **{"X-Workspace-Id": "ws-guard", "X-Session-Id": f"loop-{RUN}"})
    first = sdk.messages.create(model="worker", max_tokens=48, messages=ASK, tools=[TOOL], tool_choice=FORCED,
                                extra_body=GREEDY)
    call = next(block for block in first.content if block.type == "tool_use")
    turn = [*ASK, {"role": "assistant", "content": [block.model_dump(exclude_none=True) for block in first.content]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": call.id, "is_error": True,
                                          "content": "the invoice service timed out"}]}]
    sdk.messages.create(model="worker", max_tokens=4, messages=turn, tools=[TOOL], extra_body=GREEDY)
    wait_for(lambda: drained(gw) and sample(gw, "worker_guard_anomalies_total", workspace="ws-guard") == 1,
             "the guard", 30)
    assert sample(gw, "worker_guard_anomalies_total", workspace="ws-guard", tool="lookup", kind="failed") == 1
    session = [d for d in read_decisions(gw.config.capture.db) if d.session == f"loop-{RUN}"]
    assert [d.outcome for d in session] == ["failed", None] and session[0].call_id == call.id
    assert session[1].roles == ["user", "assistant", "user"]


def test_a_shadow_copy_goes_through_the_messages_api_and_compares_tool_use_by_key_set(gw):
    candidate = f"msg-a-{RUN}"
    gw.ok("POST", "/routes/worker/shadow", {"candidate": candidate, "sample_rate": 1.0})
    try:
        answer = client(gw).messages.create(model="worker", max_tokens=48, messages=ASK, tools=[TOOL],
                                            tool_choice=FORCED, extra_body=GREEDY)
        result = wait_for(lambda: gw.ok("GET", "/shadow")["results"], "the shadow comparison", limit_s=240)[0]
    finally:
        gw.ok("DELETE", "/routes/worker/shadow")
    assert (result["endpoint"], result["candidate"], result["shadow_outcome"]) == ("messages", candidate, "ok")
    production_call = next(b for b in answer.content if b.type == "tool_use")
    shadow_call = result["shadow_answer"]["tool_calls"][0]["function"]
    shadow_input = json.loads(shadow_call["arguments"])
    same_keys = sorted_key_set(shadow_input) == sorted_key_set(production_call.input)
    expected = "exact" if shadow_input == production_call.input else "same_shape" if same_keys else "same_tool"
    assert result["agreement"] == expected


def test_the_responses_api_through_the_openai_sdk_and_the_agents_sdk(gw):
    from agents import Agent, ModelSettings, OpenAIResponsesModel, Runner, set_tracing_disabled

    sdk = OpenAI(base_url=f"{gw.url}/v1", api_key="not-checked", max_retries=0)
    raw = sdk.responses.with_raw_response.create(model="worker", input="Say hi.", max_output_tokens=8,
                                                 temperature=0, extra_headers={"X-Session-Id": f"resp-{RUN}"})
    response = raw.parse()
    assert raw.headers["x-worker-kind"] == "production" and response.output_text
    with pytest.raises(Exception, match="previous_response_id"):
        sdk.responses.create(model="worker", input="again", previous_response_id=response.id, max_output_tokens=4)

    set_tracing_disabled(True)
    agent = Agent(name="worker", instructions="Answer in one word.",
                  model=OpenAIResponsesModel(model="worker", openai_client=_async_openai(gw)),
                  model_settings=ModelSettings(max_tokens=32, temperature=0, extra_body={"stop": ["\n", "."]}))
    result = asyncio.run(Runner.run(agent, "Say hi."))
    assert isinstance(result.final_output, str) and result.final_output
    assert sample(gw, "worker_gateway_requests_total", api="responses", status="200") >= 1
    wait_for(lambda: drained(gw) and any(d.session == f"resp-{RUN}" for d in read_decisions(gw.config.capture.db)),
             "the Responses capture", 30)
    captured = [d for d in read_decisions(gw.config.capture.db) if d.session == f"resp-{RUN}"]
    assert [d.api for d in captured] == ["responses"] and captured[0].roles == ["user"]


def _async_openai(gw: RunningGateway):  # type: ignore[no-untyped-def]
    from openai import AsyncOpenAI

    return AsyncOpenAI(base_url=f"{gw.url}/v1", api_key="not-checked", max_retries=0)
