"""Property-based fuzzing of the gateway's HTTP API from its own OpenAPI schema (schemathesis), against
the real app under uvicorn in front of the named fault injector, and hostile values (header values,
text that is not valid Unicode) in every field of the bodies the gateway reads.

For every route, admin routes with and without the token, valid and invalid inputs: no 5xx, no
traceback, every response matching the schema (status, content type, body). Bounded: a few
examples per route and generation mode.
"""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest
import schemathesis
from hypothesis import HealthCheck, Phase, example, given, settings
from hypothesis import strategies as st
from hypothesis.errors import Unsatisfiable
from schemathesis.checks import not_a_server_error
from schemathesis.generation import GenerationMode
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from tests.support.gateway_harness import TOKEN, RunningGateway, fake_adapter, start_gateway

EXAMPLES = 12  # per route and generation mode: about a minute on two cores for every route
CHECKS = [not_a_server_error, status_code_conformance, content_type_conformance, response_schema_conformance]
FUZZ = settings(max_examples=EXAMPLES, deadline=None, database=None, phases=[Phase.generate],
                suppress_health_check=list(HealthCheck))


@pytest.fixture
def gateway(tmp_path, root, fault):
    extra = '[capture]\nmode = "descriptor"\nsample_rate = 1.0\n'
    with start_gateway(tmp_path, root, [fault], extra=extra) as gw:
        fake_adapter(root, "a-v1")
        gw.ok("POST", "/adapters", {"name": "a-v1", "path": "a-v1"})
        gw.ok("POST", "/adapters/a-v1/load")
        yield gw


def _no_traceback(response: Any) -> None:
    assert "Traceback" not in response.text and "internal gateway error" not in response.text, response.text[:500]


def test_every_route_answers_its_schema_for_any_input(gateway: RunningGateway):
    schema = schemathesis.openapi.from_dict(gateway.app.openapi())
    operations = [result.ok() for result in schema.get_all_operations()]
    assert any(op.path == "/admin/trials" for op in operations)  # the trials routes are fuzzed too
    calls: dict[str, int] = {}
    for operation in operations:
        for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE):

            @FUZZ
            @given(case=operation.as_strategy(generation_mode=mode))
            def run(case: Any) -> None:
                for headers in ({"Authorization": f"Bearer {TOKEN}"}, {}):
                    response = case.call(base_url=gateway.url, headers=headers, timeout=60)
                    case.validate_response(response, checks=CHECKS, headers=headers)
                    _no_traceback(response)
                    calls[case.operation.label] = calls.get(case.operation.label, 0) + 1

            try:
                run()
            except Unsatisfiable:  # a route without inputs has no invalid ones
                assert mode is GenerationMode.NEGATIVE
    assert set(calls) == {op.label for op in operations} and sum(calls.values()) > 20 * len(operations), calls


# --- hostile values in every field and header ----------------------------------------------------

HOSTILE_TEXT = st.one_of(
    st.text(),
    st.text(alphabet=st.characters(min_codepoint=0xD800, max_codepoint=0xDFFF), min_size=1),
    st.sampled_from(["\ud800", "a\udfffb", "\x00", "../..", "a" * 5000, "\u202e", "😀"]),
)
HOSTILE_HEADER = st.one_of(
    st.binary(max_size=300).map(lambda b: bytes(c for c in b if c not in b"\r\n\x00")),
    st.sampled_from([b"a" * 100_000, "caf\u00e9".encode("latin-1"), b"\xff\xfe", b"../x", b" padded "]),
)
FIELDS = ("model", "role", "content", "tool_call_id", "tool_name", "key", "user")
PAIR = "\ud83d\ude00"  # a high and a low surrogate: 😀 as JSON escapes, no text as UTF-8 bytes


def _body(field: str, value: str) -> dict[str, Any]:
    messages = [{"role": "user", "content": "hi"}]
    body: dict[str, Any] = {"model": "worker", "messages": messages}
    if field in ("role", "content", "tool_call_id"):
        messages.append({"role": "tool", "tool_call_id": "c1", "content": "ok", field: value})
    elif field == "tool_name":
        body["tools"] = [{"type": "function", "function": {"name": value, "parameters": {"type": "object"}}}]
    elif field == "key":
        body[value] = 1
    else:
        body[field] = value
    return body


def _raw(body: dict[str, Any], utf8_bytes: bool) -> bytes:
    """The body as JSON escapes (`\\ud800`), or as UTF-8 bytes with surrogates encoded (`\\xed\\xa0\\x80`)."""
    if utf8_bytes:
        return json.dumps(body, ensure_ascii=False).encode("utf-8", "surrogatepass")
    return json.dumps(body).encode()


def _valid_body(raw: bytes) -> bool:
    """Whether a body is text as a JSON parser reads it (the gateway's edge reads it so): strict UTF-8, and no
    lone surrogate once its escapes are decoded. The drawn value's Python string cannot say: a high and a low
    surrogate sent as JSON escapes (`"\\ud83d\\ude00"`) are one valid character, 😀; the same two encoded as UTF-8
    bytes are no UTF-8."""
    try:
        json.dumps(json.loads(raw.decode("utf-8")), ensure_ascii=False).encode("utf-8")
    except UnicodeError:
        return False
    return True


def test_hostile_values_in_any_field_or_header_never_hurt_the_gateway(gateway: RunningGateway):
    answered: list[str] = []

    @settings(max_examples=150, deadline=None, database=None, suppress_health_check=list(HealthCheck))
    @example(field="content", value=PAIR, utf8_bytes=False, header="X-Request-Id", header_value=b"r-1", stream=False,
             path="/v1/chat/completions")  # a surrogate pair as JSON escapes: one valid character
    @example(field="key", value=PAIR, utf8_bytes=True, header="X-Request-Id", header_value=b"r-1", stream=False,
             path="/v1/chat/completions")  # the same pair as UTF-8-encoded surrogates: no UTF-8
    @given(field=st.sampled_from(FIELDS), value=HOSTILE_TEXT, utf8_bytes=st.booleans(),
           header=st.sampled_from(["X-Request-Id", "X-Workspace-Id", "X-Session-Id", "Authorization"]),
           header_value=HOSTILE_HEADER, stream=st.booleans(), path=st.sampled_from(
               ["/v1/chat/completions", "/admin/routes/worker/canary", "/admin/adapters", "/admin/trials"]))
    def run(field: str, value: str, utf8_bytes: bool, header: str, header_value: bytes, stream: bool,
            path: str) -> None:
        body = _body(field, value) | ({"stream": True} if stream else {})
        raw = _raw(body, utf8_bytes)
        headers = {"Content-Type": "application/json", header: header_value}
        if path.startswith("/admin") and header != "Authorization":
            headers["Authorization"] = f"Bearer {TOKEN}".encode()
        try:
            response = gateway.client.post(path, content=raw, headers=headers)
        except httpx.ProtocolError:  # a header value HTTP cannot carry (refused by the client or the server)
            return
        assert response.status_code < 500, response.text[:500]
        _no_traceback(response)
        content_type = response.headers.get("content-type", "")
        if not content_type.startswith(("application/json", "text/event-stream")):
            assert response.status_code == 400  # the HTTP server refused a header before the app saw it
            return
        answered.append(path)
        error = response.json().get("error") if content_type.startswith("application/json") else None
        if not _valid_body(raw) and path == "/v1/chat/completions":
            assert response.status_code == 400 and error is not None
        if _valid_body(raw):  # valid text is never refused as if it were not
            assert error is None or error["code"] != "invalid_unicode", response.text[:500]
        if error is not None:
            assert set(error) == {"message", "type", "code"} and len(error["message"]) < 3000
        assert len(response.headers.get("x-request-id", "")) <= 200

    run()
    assert len(set(answered)) == 4  # every path was reached with hostile values, not only refused by HTTP
    gateway.on_loop(gateway.gateway.registry.flush)  # every row of every request is written or dropped alone
    assert gateway.admin("GET", "/requests").status_code == 200
    assert gateway.chat().status_code == 200
