"""A local stand-in for the HTTP API: HTTP requests -> API Gateway proxy events, on uvicorn.

Each request on a route of the template (``POST /webhooks/{source}``) becomes the event the
deployed function receives (:mod:`.api_events`: payload 2.0, or 1.0 for a route that declares
it), the raw body passed exactly, a chunked body reassembled. The function's ``{statusCode,
headers, body}`` answer is mapped back to HTTP as API Gateway does (a result without
``statusCode`` is sent as a JSON 200; a handler exception is a 500).

The HTTP server is uvicorn (its h11 protocol, :mod:`.gateway_protocol`), the request and answer
objects Starlette's; the server runs its event loop on a thread of its own and hands each
invocation to a worker thread, so a slow function never holds up other requests.

Log lines and ``on_request`` see the request target with the values of credential query
parameters (Mollie's token, Meta's ``hub.verify_token``) replaced by ``[redacted]``; uvicorn's
own access log is off.

Besides the routes: ``GET /health`` (readiness). The webhook gateway serves nothing else: the
minimal Lambda ``Invoke`` endpoint (``POST /2015-03-31/functions/{name}/invocations``, so that
boto3's ``lambda.invoke`` with ``AWS_ENDPOINT_URL_LAMBDA`` pointing at it reaches the local
functions) is a separate gateway (``serve_invoke=True``) the stack starts only with
``--for-containers``, on its own loopback port; it serves no webhook route.

Requests a real front door refuses are refused here: a ``Content-Length`` that is not a
non-negative integer, a malformed chunk size, a chunk not followed by CRLF, or both
``Content-Length`` and ``Transfer-Encoding`` is a 400; a request whose line and headers are not
all in within :data:`HEADER_TIMEOUT_SECONDS` (one deadline for the whole head, however the bytes
trickle in) or a connection idle for :data:`IDLE_TIMEOUT_SECONDS` is closed; a body not all in
within :data:`BODY_TIMEOUT_SECONDS` is a 408; a body over :data:`MAX_PAYLOAD_BYTES` a 413. A
request target that is not a canonical path (a doubled slash, a ``.`` or ``..`` segment, an
encoded ``/`` or ``\\``) matches no route: 404, as from API Gateway, which routes on the path as
sent. Every answer carries ``X-Content-Type-Options: nosniff`` (the ingest function sets it
itself, for the deployed API). A client that goes away before its answer is written is logged
with the status it was answered and the disconnect.
"""

from __future__ import annotations

import asyncio
import functools
import json
import logging
import re
import socket
import threading
import time
import traceback
import uuid
from collections.abc import Callable, Mapping
from typing import Any
from urllib.parse import unquote

import anyio
import anyio.to_thread
import uvicorn
from starlette.requests import ClientDisconnect, Request
from starlette.responses import Response
from starlette.types import Receive, Scope, Send
from webhook_pipeline.redaction import redact_target

from webhook_pipeline_ops.credentials import query_credentials
from webhook_pipeline_ops.local.api_events import (
    Route,
    build_event,
    build_rest_event,
    canonical_path,
    is_text,
    response_from_result,
)
from webhook_pipeline_ops.local.gateway_protocol import Deadlines, protocol_class
from webhook_pipeline_ops.local.runtime import FunctionUnavailable, LocalFunction

__all__ = [
    "Gateway",
    "Route",
    "build_event",
    "build_rest_event",
    "canonical_path",
    "is_loopback",
    "is_text",
    "response_from_result",
]

log = logging.getLogger(__name__)

MAX_PAYLOAD_BYTES = 10 * 1024 * 1024  # HTTP API payload limit
#: Seconds for a request's whole line and headers to arrive, and for its whole body.
HEADER_TIMEOUT_SECONDS = 10.0
BODY_TIMEOUT_SECONDS = 10.0
#: Seconds a connection may stay idle before the gateway closes it.
IDLE_TIMEOUT_SECONDS = 30.0
#: Invocations waiting or running at once (each holds a thread while it waits for a worker).
MAX_CONCURRENT_INVOCATIONS = 256
#: Seconds requests still in flight at ``stop`` get to be answered (their functions are stopped
#: next, which answers the ones waiting for a worker with 503).
STOP_GRACE_SECONDS = 35
_LOOPBACK = ("127.", "::1", "localhost", "[::1]")
#: Seconds a sender is told to wait after a 503 for want of a function worker.
RETRY_AFTER = "1"
_INVOKE_PATH = re.compile(r"^/2015-03-31/functions/(?P<name>[^/]+)/invocations$")
_JSON = ("content-type", "application/json")


class BadRequest(Exception):
    """The request cannot be framed (both Content-Length and Transfer-Encoding)."""


class _TooLarge(Exception):
    """The body exceeds :data:`MAX_PAYLOAD_BYTES`."""


def is_loopback(host: str) -> bool:
    """Whether binding ``host`` keeps a server on this machine (``127.x``, ``::1``,
    ``localhost``)."""
    return host.startswith(_LOOPBACK) or host == "localhost"


def _target(scope: Scope) -> str:
    """The request target as sent (uvicorn splits it into ``raw_path`` and ``query_string``)."""
    path = bytes(scope.get("raw_path") or scope["path"].encode()).decode("latin-1")
    query = bytes(scope.get("query_string") or b"").decode("latin-1")
    return f"{path}?{query}" if query else path


async def _read_body(request: Request) -> bytes:
    """The whole body, chunks reassembled (raises :class:`BadRequest`, :class:`_TooLarge`,
    ``ClientDisconnect``)."""
    if "transfer-encoding" in request.headers and "content-length" in request.headers:
        raise BadRequest("both Content-Length and Transfer-Encoding")
    if int(request.headers.get("content-length") or 0) > MAX_PAYLOAD_BYTES:
        raise _TooLarge
    chunks: list[bytes] = []
    total = 0
    async for chunk in request.stream():
        total += len(chunk)
        if total > MAX_PAYLOAD_BYTES:
            raise _TooLarge
        chunks.append(chunk)
    return b"".join(chunks)


def _response(status: int, headers: list[tuple[str, str]], body: bytes) -> Response:
    """The HTTP answer: the function's headers (framing ones dropped), a JSON content type for a
    body without one, ``nosniff`` unless set, an ``apigw-requestid``."""
    response = Response(body, status_code=status)
    names = {k.lower() for k, _ in headers}
    raw = [
        (k.lower().encode("latin-1"), v.encode("latin-1"))
        for k, v in headers
        if k.lower() not in ("content-length", "transfer-encoding", "connection")
    ]
    if "content-type" not in names and body:
        raw.append((b"content-type", b"application/json"))
    if "x-content-type-options" not in names:
        raw.append((b"x-content-type-options", b"nosniff"))
    raw.append((b"apigw-requestid", uuid.uuid4().hex[:16].encode()))
    raw.append((b"server", b"webhook-pipeline-local"))
    raw.append((b"content-length", str(len(body)).encode()))
    response.raw_headers = raw
    return response


def _json(status: int, doc: Any, *, close: bool = False) -> Response:
    response = _response(status, [_JSON], json.dumps(doc).encode())
    if close:  # the body was not read to its end: the connection cannot serve another request
        response.raw_headers.append((b"connection", b"close"))
    return response


class Gateway:
    """The HTTP server (uvicorn, on a thread of its own) in front of the local functions.

    Binding happens here, so a port in use raises ``OSError`` before :meth:`start`."""

    def __init__(
        self,
        host: str,
        port: int,
        routes: list[Route],
        functions: Mapping[str, LocalFunction],
        on_request: Callable[[str, str, int, float], None] | None = None,
        serve_invoke: bool = False,
        credential_params: frozenset[str] | None = None,
        *,
        header_timeout: float | None = None,
        body_timeout: float | None = None,
        idle_timeout: float | None = None,
    ) -> None:
        """``header_timeout``, ``body_timeout``, ``idle_timeout``: seconds (default the module's
        ``HEADER_TIMEOUT_SECONDS``, ``BODY_TIMEOUT_SECONDS``, ``IDLE_TIMEOUT_SECONDS``, read
        at each connection)."""
        self.header_timeout = header_timeout
        self.body_timeout = body_timeout
        self.idle_timeout = idle_timeout
        self.routes = routes
        #: Query parameters whose values never reach a log line or ``on_request`` (default:
        #: every credential parameter of the sources served, :mod:`..credentials`).
        self.credential_params = (
            query_credentials() if credential_params is None else credential_params
        )
        self.functions = dict(functions)  # by physical and logical name, for Invoke
        self.on_request = on_request
        self.serve_invoke = serve_invoke
        self.socket = socket.create_server(
            (host, port),
            family=socket.AF_INET6 if ":" in host else socket.AF_INET,
            backlog=256,  # a burst of senders must not see refused connections
        )
        deadlines = Deadlines(
            head=lambda: self.header_timeout or HEADER_TIMEOUT_SECONDS,
            body=lambda: self.body_timeout or BODY_TIMEOUT_SECONDS,
            idle=lambda: self.idle_timeout or IDLE_TIMEOUT_SECONDS,
        )
        self.deadlines = deadlines
        config = uvicorn.Config(
            _App(self),
            http=protocol_class(deadlines),
            ws="none",
            lifespan="off",
            interface="asgi3",
            log_config=None,
            log_level="warning",
            access_log=False,  # its line would show credential query values; ours redacts
            server_header=False,
            timeout_graceful_shutdown=STOP_GRACE_SECONDS,
        )
        self.server = uvicorn.Server(config)
        self._thread: threading.Thread | None = None

    @property
    def port(self) -> int:
        return int(self.socket.getsockname()[1])

    def start(self) -> None:
        self._thread = threading.Thread(
            target=self.server.run, kwargs={"sockets": [self.socket]}, name="http-gateway",
            daemon=True,
        )  # fmt: skip
        self._thread.start()

    def stop(self) -> None:
        """Stop accepting connections at once; requests in flight are still answered (for
        :data:`STOP_GRACE_SECONDS`) on the server's thread, which ends after them."""
        if self._thread is None:
            self.socket.close()
            return
        self.server.should_exit = True
        until = time.monotonic() + 10
        while self.socket.fileno() != -1 and self._thread.is_alive() and time.monotonic() < until:
            time.sleep(0.01)  # uvicorn closes its listening socket first when it shuts down
        if not self.server.server_state.tasks:
            self._thread.join(timeout=10)


class _App:
    """The ASGI application: /health, the routes (or the Invoke API), 404 for the rest."""

    def __init__(self, gateway: Gateway) -> None:
        self.gateway = gateway
        self.limiter: anyio.CapacityLimiter | None = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return
        gateway = self.gateway
        started = time.perf_counter()
        request = Request(scope, receive)
        target = _target(scope)
        shown = redact_target(target, gateway.credential_params)
        response = await self._answer(request, target)
        status = response.status_code
        await asyncio.sleep(0)  # a reset connection is noticed before the answer is written
        if await request.is_disconnected():
            log.info(
                "%s %s answered %s: the client disconnected before the answer was written",
                request.method, shown, status,
            )  # fmt: skip
        else:
            await response(scope, receive, send)
        elapsed_ms = (time.perf_counter() - started) * 1000
        log.debug('%s - "%s %s" %s', request.client.host if request.client else "-",
                  request.method, shown, status)  # fmt: skip
        if gateway.on_request is not None:
            gateway.on_request(request.method, shown, status, elapsed_ms)

    async def _answer(self, request: Request, target: str) -> Response:
        gateway = self.gateway
        path = target.split("?", 1)[0] if target.startswith("/") else ""
        if path == "/health" and request.method in ("GET", "HEAD"):
            return _json(200, {"status": "ok"})
        try:
            body = await asyncio.wait_for(_read_body(request), gateway.deadlines.body())
        except BadRequest as exc:
            return _json(400, {"message": f"Bad Request: {exc}"}, close=True)
        except TimeoutError:
            return _json(408, {"message": "Request Timeout"}, close=True)
        except _TooLarge:
            return _json(413, {"message": "Request Entity Too Large"}, close=True)
        except ClientDisconnect:
            return _json(400, {"message": "Bad Request: the body ended early"}, close=True)
        if gateway.serve_invoke:
            invoke = _INVOKE_PATH.match(path)
            if invoke and request.method == "POST":
                return await self._invoke(unquote(invoke.group("name")), body)
            return _json(404, {"message": "Not Found"})
        for route in gateway.routes:
            params = route.match(request.method, path) if canonical_path(path) else None
            if params is not None:
                return await self._call(route, route.event(request, target, body, params))
        return _json(404, {"message": "Not Found"})

    async def _in_thread(self, call: Callable[[], Any]) -> Any:
        if self.limiter is None:
            self.limiter = anyio.CapacityLimiter(MAX_CONCURRENT_INVOCATIONS)
        return await anyio.to_thread.run_sync(call, limiter=self.limiter, abandon_on_cancel=True)

    async def _call(self, route: Route, event: Any) -> Response:
        deadline = time.monotonic() + route.timeout_seconds  # counts from the request's arrival
        try:
            result = await self._in_thread(
                functools.partial(route.function.invoke, event, deadline=deadline)
            )
        except FunctionUnavailable:  # API Gateway's integration timeout: 503
            return _response(
                503, [_JSON, ("retry-after", RETRY_AFTER)], b'{"message":"Service Unavailable"}'
            )
        except Exception as exc:
            log.error(
                "%s raised:\n%s",
                route.function.spec.logical_id,
                getattr(exc, "trace", "") or traceback.format_exc(),
            )
            return _json(500, {"message": "Internal Server Error"})
        return _response(*response_from_result(result))

    async def _invoke(self, name: str, body: bytes) -> Response:
        """Lambda's ``Invoke`` (RequestResponse): the result, or the error document with
        ``X-Amz-Function-Error: Unhandled``; 404 ``ResourceNotFoundException`` for no such
        function."""
        fn = self.gateway.functions.get(name.rsplit(":", 1)[-1])
        if fn is None:
            missing = {"Type": "User", "Message": f"Function not found: {name}"}
            error_type = ("x-amzn-errortype", "ResourceNotFoundException")
            return _response(404, [error_type], json.dumps(missing).encode())
        executed = ("x-amz-executed-version", "$LATEST")
        try:
            result = await self._in_thread(lambda: fn.invoke(json.loads(body) if body else {}))
        except Exception as exc:
            trace = getattr(exc, "trace", "") or traceback.format_exc()
            log.error("%s raised:\n%s", fn.spec.logical_id, trace)
            doc: dict[str, Any] = {
                "errorMessage": getattr(exc, "message", str(exc)),
                "errorType": getattr(exc, "error_type", type(exc).__name__),
                "stackTrace": trace.splitlines(),
            }
            unhandled = ("x-amz-function-error", "Unhandled")
            return _response(200, [unhandled, executed], json.dumps(doc).encode())
        return _response(200, [executed], json.dumps(result).encode())
