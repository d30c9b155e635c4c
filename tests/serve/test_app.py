"""The gateway app's body limit, over real sockets: a client that sends a body over the limit reads its 413 in
its API's shape every time, never a connection reset (the gateway reads and drops the rest of the body before
it answers, as nginx's lingering close does); a body far over it, or one the client has not sent yet
(`Expect: 100-continue`), is answered at once and its connection closed."""

from __future__ import annotations

import http.client
import json
import socket
from collections.abc import Iterator
from typing import Any

import pytest

from serve.app import LINGER_BYTES
from tests.support.gateway_harness import RunningGateway, start_gateway

LIMIT = 1 << 20
BODY = json.dumps({"model": "worker", "max_tokens": 4, "input": "x",
                   "messages": [{"role": "user", "content": "x" * (2 * LIMIT)}]}).encode()
ENDPOINTS = ["/v1/chat/completions", "/v1/messages", "/v1/messages/count_tokens", "/v1/responses"]


@pytest.fixture(scope="module")
def gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[RunningGateway, Any]]:
    from tests.support.fault_upstream import FaultUpstream

    tmp = tmp_path_factory.mktemp("body-limit")
    (tmp / "adapters").mkdir()
    with FaultUpstream() as fault, start_gateway(tmp, tmp / "adapters", [fault],
                                                 gateway=f"max_body_bytes = {LIMIT}") as gw:
        yield gw, fault


def too_large(path: str, status: int, body: bytes) -> bool:
    """Whether an answer is the body limit's 413 in the shape of the API at `path`."""
    error = json.loads(body)
    if path.startswith("/v1/messages"):
        return status == 413 and error["type"] == "error" and error["error"]["type"] == "request_too_large"
    return status == 413 and error["error"]["code"] == "body_too_large"


def post(port: int, path: str, chunked: bool) -> tuple[int, bytes]:
    """One request on a fresh connection that the client closes after it (`Connection: close`: the gateway closes
    too, the case in which an unread body turns into a reset), the whole body sent."""
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    try:
        body: Any = iter([BODY[i:i + 65536] for i in range(0, len(BODY), 65536)]) if chunked else BODY
        connection.request("POST", path, body=body, encode_chunked=chunked,
                           headers={"Content-Type": "application/json", "Connection": "close"})
        response = connection.getresponse()
        return response.status, response.read()
    finally:
        connection.close()


@pytest.mark.parametrize("path", ENDPOINTS)
def test_a_body_over_the_limit_always_reads_its_413_never_a_reset(gateway: tuple[RunningGateway, Any],
                                                                   path: str) -> None:
    gw, fault = gateway
    port = gw.config.gateway.port
    outcomes: dict[str, int] = {}
    for attempt in range(120):
        chunked = attempt >= 100  # 100 with Content-Length, then 20 chunked
        try:
            status, body = post(port, path, chunked)
            outcome = "413" if too_large(path, status, body) else f"{status} {body[:200]!r}"
        except OSError as exc:  # ConnectionResetError, BrokenPipeError: the answer was lost
            outcome = type(exc).__name__
        outcomes[outcome] = outcomes.get(outcome, 0) + 1
    assert outcomes == {"413": 120}
    assert fault.requests == []


def raw_answer(port: int, head: bytes) -> bytes:
    """What the gateway sends back to a request's head alone (no body sent), until it closes the connection."""
    with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
        sock.sendall(head)
        received = b""
        while chunk := sock.recv(65536):
            received += chunk
    return received


@pytest.mark.parametrize(("length", "expect"), [(LIMIT + LINGER_BYTES + 1, b""), (2 * LIMIT, b"Expect: 100-continue\r\n")])
def test_a_body_far_over_the_limit_or_not_sent_yet_is_answered_at_once_and_closed(
        gateway: tuple[RunningGateway, Any], length: int, expect: bytes) -> None:
    gw, _ = gateway
    head = (f"POST /v1/messages HTTP/1.1\r\nHost: gw\r\nContent-Type: application/json\r\n"
            f"Content-Length: {length}\r\n").encode() + expect + b"\r\n"
    answer = raw_answer(gw.config.gateway.port, head)
    status_line, _, rest = answer.partition(b"\r\n")
    assert status_line == b"HTTP/1.1 413 Request Entity Too Large"  # never a `100 Continue` first
    head_lines, _, body = rest.partition(b"\r\n\r\n")
    assert b"connection: close" in head_lines.lower()
    assert too_large("/v1/messages", 413, body)
