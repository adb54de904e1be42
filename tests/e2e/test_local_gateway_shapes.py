"""The local gateway on uvicorn: both API Gateway event shapes, exact bodies however framed, the
payload limit, and its own refusals carrying nosniff (over real HTTP, a recording function)."""

from __future__ import annotations

import base64
import socket
from pathlib import Path
from typing import Any

import pytest
from webhook_pipeline_ops.local import http_gateway
from webhook_pipeline_ops.local.http_gateway import Gateway, Route
from webhook_pipeline_ops.local.resources import FunctionSpec, HttpRoute

pytestmark = pytest.mark.e2e

BINARY = b"\xff\x00\r\n0\r\n\r\n\xfe"  # looks like the end of a chunked body, inside the data


class Recording:
    def __init__(self) -> None:
        self.events: list[dict[str, Any]] = []
        self.spec = FunctionSpec("Fake", "fake", Path("."), "app.h", 3, 128, {}, [], [], [])

    def invoke(self, event: dict[str, Any], deadline: float | None = None) -> Any:
        self.events.append(event)
        return {"statusCode": 202, "body": "{}"}


@pytest.fixture(params=["2.0", "1.0"])
def served(request: pytest.FixtureRequest) -> Any:
    fn = Recording()
    route = Route(HttpRoute("POST", "/webhooks/{source}"), fn, payload_format=request.param)  # type: ignore[arg-type]
    gw = Gateway("127.0.0.1", 0, [route], {})
    gw.start()
    yield gw, fn, request.param
    gw.stop()


def _exchange(port: int, data: bytes) -> bytes:
    """Send ``data`` (a request with ``Connection: close``); everything answered until close."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(data)
        received = b""
        while chunk := sock.recv(65536):
            received += chunk
    return received


def _chunked(body: bytes, sizes: list[int]) -> bytes:
    out, at = b"", 0
    for size in sizes:
        out += f"{size:x}\r\n".encode() + body[at : at + size] + b"\r\n"
        at += size
    return out + b"0\r\n\r\n"


def _body(event: dict[str, Any]) -> bytes:
    raw = event["body"]
    return base64.b64decode(raw) if event["isBase64Encoded"] else raw.encode()


def test_repeated_headers_and_query_values_arrive_as_the_routes_payload_format_shows_them(
    served: Any,
) -> None:
    gw, fn, payload_format = served
    head = (
        b"POST /webhooks/github?a=1&b=x&a=2 HTTP/1.1\r\nHost: x\r\nConnection: close\r\n"
        b"X-Id: first\r\nContent-Type: application/octet-stream\r\nx-id: second\r\n"
        b"Content-Length: " + str(len(BINARY)).encode() + b"\r\n\r\n"
    )
    answer = _exchange(gw.port, head + BINARY)
    assert answer.startswith(b"HTTP/1.1 202")
    (event,) = fn.events
    assert _body(event) == BINARY and event["isBase64Encoded"] is True
    if payload_format == "2.0":
        assert event["version"] == "2.0" and event["headers"]["x-id"] == "first,second"
        assert event["rawQueryString"] == "a=1&b=x&a=2"
        assert event["queryStringParameters"] == {"a": "1,2", "b": "x"}
    else:
        assert event["version"] == "1.0" and event["resource"] == "/webhooks/{source}"
        # ASGI hands header names over lower-cased (API Gateway's REST API keeps the sender's case)
        assert event["multiValueHeaders"]["x-id"] == ["first", "second"]
        assert event["headers"]["x-id"] == "second"  # REST keeps the last value in headers
        assert event["multiValueQueryStringParameters"] == {"a": ["1", "2"], "b": ["x"]}
        assert event["queryStringParameters"] == {"a": "2", "b": "x"}
        assert event["pathParameters"] == {"source": "github"} and event["httpMethod"] == "POST"


def test_a_chunked_body_is_reassembled_to_the_exact_bytes(served: Any) -> None:
    gw, fn, _ = served
    head = (
        b"POST /webhooks/stripe HTTP/1.1\r\nHost: x\r\nConnection: close\r\n"
        b"Content-Type: application/octet-stream\r\nTransfer-Encoding: chunked\r\n\r\n"
    )
    answer = _exchange(gw.port, head + _chunked(BINARY, [1, 4, len(BINARY) - 5]))
    assert answer.startswith(b"HTTP/1.1 202")
    assert _body(fn.events[0]) == BINARY


@pytest.mark.parametrize("framing", ["content-length", "chunked"])
def test_a_body_over_the_payload_limit_is_a_413_never_invoked(
    monkeypatch: pytest.MonkeyPatch, framing: str
) -> None:
    monkeypatch.setattr(http_gateway, "MAX_PAYLOAD_BYTES", 10)
    fn = Recording()
    gw = Gateway("127.0.0.1", 0, [Route(HttpRoute("POST", "/webhooks/{source}"), fn)], {})  # type: ignore[arg-type]
    gw.start()
    body = b"x" * 11
    head = b"POST /webhooks/stripe HTTP/1.1\r\nHost: x\r\n"
    if framing == "chunked":
        data = head + b"Transfer-Encoding: chunked\r\n\r\n" + _chunked(body, [6, 5])
    else:
        data = head + b"Content-Length: 11\r\n\r\n" + body
    try:
        answer = _exchange(gw.port, data)
        fitting = _exchange(
            gw.port, head + b"Connection: close\r\nContent-Length: 10\r\n\r\n" + body[:10]
        )
    finally:
        gw.stop()
    assert answer.startswith(b"HTTP/1.1 413") and b"nosniff" in answer.lower()
    assert fitting.startswith(b"HTTP/1.1 202") and len(fn.events) == 1


@pytest.mark.parametrize(
    "framing",
    [
        b"Content-Length: 2\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\n\r\n",
        b"Content-Length: 1e3\r\n\r\n{}",
        b"Transfer-Encoding: chunked\r\n\r\n2\r\n{}XX0\r\n\r\n",  # chunk not followed by CRLF
        b"Transfer-Encoding: chunked\r\n\r\n123456789\r\n{}\r\n0\r\n\r\n",
    ],
)
def test_the_servers_own_refusals_are_400_with_nosniff(served: Any, framing: bytes) -> None:
    gw, fn, _ = served
    answer = _exchange(gw.port, b"POST /webhooks/stripe HTTP/1.1\r\nHost: x\r\n" + framing)
    head = answer.split(b"\r\n\r\n", 1)[0].lower()
    assert answer.startswith(b"HTTP/1.1 400") and b"x-content-type-options: nosniff" in head
    assert fn.events == []


def test_a_kept_alive_connection_is_not_held_up_by_nagles_algorithm(served: Any) -> None:
    # An answer's head and body are two writes: with Nagle's algorithm on the server's socket,
    # the body waits for the client's delayed ACK (about 40 ms on Linux) at every request.
    import statistics
    import time

    gw, _, _ = served
    took = []
    with socket.create_connection(("127.0.0.1", gw.port), timeout=10) as sock:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        for _ in range(15):
            started = time.perf_counter()
            sock.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
            received = b""
            while not received.endswith(b'{"status": "ok"}'):
                received += sock.recv(65536)
            took.append(time.perf_counter() - started)
    assert statistics.median(took) < 0.03, f"median {statistics.median(took) * 1000:.1f} ms"
