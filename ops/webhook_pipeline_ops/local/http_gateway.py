"""A local stand-in for the HTTP API: HTTP requests -> API Gateway payload 2.0 events.

Each request on a route of the template (``POST /webhooks/{source}``) becomes the event the
deployed function receives: raw body preserved (``isBase64Encoded`` for anything that is not
UTF-8 text), header names lower-cased and repeated headers joined with ``","``, cookies moved to
``cookies``, ``pathParameters``, ``rawPath``, ``rawQueryString``, ``queryStringParameters``
(repeated values joined with ``","``) and ``requestContext.http``. The function's
``{statusCode, headers, body}`` answer is mapped back to HTTP as API Gateway does (a result
without ``statusCode`` is sent as a JSON 200; a handler exception is a 500).

Log lines and ``on_request`` see the request target with the values of credential query
parameters (Mollie's token, Meta's ``hub.verify_token``) replaced by ``[redacted]``.

Besides the routes: ``GET /health`` (readiness). The webhook gateway serves nothing else: the
minimal Lambda ``Invoke`` endpoint (``POST /2015-03-31/functions/{name}/invocations``, so that
boto3's ``lambda.invoke`` with ``AWS_ENDPOINT_URL_LAMBDA`` pointing at it reaches the local
functions) is a separate gateway (``serve_invoke=True``) the stack starts only with
``--for-containers``, on its own loopback port; it serves no webhook route.

Requests a real front door refuses are refused here: a ``Content-Length`` that is not a
non-negative integer, a malformed chunk size or a chunked body without its final chunk is a
400; a request whose line and headers are not all in within :data:`HEADER_TIMEOUT_SECONDS` (a
deadline for the whole request head, however the bytes trickle in) or a kept-alive connection
idle for :data:`IDLE_TIMEOUT_SECONDS` is closed; a body not all in within
:data:`BODY_TIMEOUT_SECONDS` is a 408. A request target that is not a canonical path (a doubled
slash, a ``.`` or ``..`` segment, an encoded ``/`` or ``\\``) matches no route: 404, as from API
Gateway, which routes on the path as sent. Every answer carries ``X-Content-Type-Options:
nosniff`` (the ingest function sets it itself, for the deployed API). A client that goes away
before its answer is written is logged with the status it was answered and the disconnect.
"""

from __future__ import annotations

import base64
import io
import json
import logging
import re
import threading
import time
import traceback
import uuid
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, cast
from urllib.parse import parse_qsl, unquote, urlsplit

from webhook_pipeline.redaction import redact_target

from webhook_pipeline_ops.credentials import query_credentials
from webhook_pipeline_ops.local.provision import HttpRoute
from webhook_pipeline_ops.local.runtime import FunctionUnavailable, LocalFunction

log = logging.getLogger(__name__)

MAX_PAYLOAD_BYTES = 10 * 1024 * 1024  # HTTP API payload limit
_TEXT_TYPES = re.compile(
    r"^(text/|application/(json|[\w.+-]+\+json|xml|[\w.+-]+\+xml|x-www-form-urlencoded|javascript"
    r"|graphql))",
    re.IGNORECASE,
)
_CHUNK_SIZE = re.compile(rb"^[0-9A-Fa-f]{1,8}$")
_CONTENT_LENGTH = re.compile(r"^[0-9]{1,12}$")
#: Seconds for a request's whole line and headers to arrive, and for its whole body.
HEADER_TIMEOUT_SECONDS = 10.0
BODY_TIMEOUT_SECONDS = 10.0
#: Seconds a kept-alive connection may stay idle before the gateway closes it.
IDLE_TIMEOUT_SECONDS = 30.0
_LOOPBACK = ("127.", "::1", "localhost", "[::1]")
#: Seconds a sender is told to wait after a 503 for want of a function worker.
RETRY_AFTER = "1"
_INVOKE_PATH = re.compile(r"^/2015-03-31/functions/(?P<name>[^/]+)/invocations$")
_ENCODED_SEPARATOR = re.compile(r"%(2f|5c)", re.IGNORECASE)
_DISCONNECTED = (BrokenPipeError, ConnectionResetError, ConnectionAbortedError)


class BadRequest(Exception):
    """The request cannot be framed (bad Content-Length, malformed chunk)."""


class _DeadlineReader(io.RawIOBase):
    """A socket's reads under one deadline: each ``recv`` waits only for what is left of it,
    so a client trickling one byte at a time cannot extend it (raises :class:`TimeoutError`)."""

    def __init__(self, sock: Any) -> None:
        self.sock = sock
        self.deadline = time.monotonic() + IDLE_TIMEOUT_SECONDS

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        left = self.deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError("deadline passed")
        self.sock.settimeout(left)
        return int(self.sock.recv_into(buffer))


def canonical_path(path: str) -> bool:
    """Whether ``path`` (as sent, before any decoding) is one API Gateway would route as such:
    no empty segment (``//``), no ``.`` or ``..`` segment (plain or percent-encoded), no encoded
    ``/`` or ``\\``."""
    if not path.startswith("/") or _ENCODED_SEPARATOR.search(path):
        return False
    return all(s and unquote(s) not in (".", "..") for s in path[1:].split("/"))


def is_loopback(host: str) -> bool:
    """Whether binding ``host`` keeps a server on this machine (``127.x``, ``::1``,
    ``localhost``)."""
    return host.startswith(_LOOPBACK) or host == "localhost"


def _route_regex(path: str) -> re.Pattern[str]:
    pattern = ""
    for part in re.split(r"(\{[^}]+\})", path):
        if part.startswith("{") and part.endswith("}"):
            name = part[1:-1]
            pattern += f"(?P<{name[:-1]}>.+)" if name.endswith("+") else f"(?P<{name}>[^/]+)"
        else:
            pattern += re.escape(part)
    return re.compile(f"^{pattern}$")


class Route:
    """One ``METHOD /path/{param}`` route of the API and the function behind it."""

    def __init__(self, route: HttpRoute, function: LocalFunction) -> None:
        self.method = route.method
        self.path = route.path
        self.function = function
        self.regex = _route_regex(route.path)
        self.timeout_seconds = route.timeout_ms / 1000  # API Gateway's integration timeout

    @property
    def route_key(self) -> str:
        return f"{self.method} {self.path}" if self.method != "ANY" else f"ANY {self.path}"

    def match(self, method: str, path: str) -> dict[str, str] | None:
        if self.method not in ("ANY", method):
            return None
        m = self.regex.match(path)
        return {k: unquote(v) for k, v in m.groupdict().items()} if m else None


def is_text(content_type: str | None, body: bytes) -> bool:
    """Whether API Gateway would pass ``body`` as text (else base64 with isBase64Encoded)."""
    if not body:
        return True
    if content_type and not _TEXT_TYPES.match(content_type.strip()):
        return False
    try:
        body.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def build_event(
    *,
    method: str,
    target: str,
    headers: list[tuple[str, str]],
    body: bytes,
    route_key: str,
    path_parameters: Mapping[str, str],
    source_ip: str,
    host: str,
) -> dict[str, Any]:
    """The API Gateway HTTP API (payload format 2.0) event for one request.

    Parameters
    ----------
    target : str
        The request target (path and query string, as received).
    headers : list[tuple[str, str]]
        Header pairs in arrival order (repeated names kept).
    body : bytes
        The exact received body.
    """
    split = urlsplit(target)
    folded: dict[str, str] = {}
    cookies: list[str] = []
    for name, value in headers:
        key = name.lower()
        if key == "cookie":
            cookies.extend(c.strip() for c in value.split(";") if c.strip())
            continue
        folded[key] = f"{folded[key]},{value}" if key in folded else value
    query: dict[str, str] = {}
    for k, v in parse_qsl(split.query, keep_blank_values=True):
        query[k] = f"{query[k]},{v}" if k in query else v
    now = datetime.now(UTC)
    event: dict[str, Any] = {
        "version": "2.0",
        "routeKey": route_key,
        "rawPath": split.path,
        "rawQueryString": split.query,
        "headers": folded,
        "requestContext": {
            "accountId": "123456789012",
            "apiId": "local",
            "domainName": host,
            "domainPrefix": host.split(".")[0].split(":")[0],
            "http": {
                "method": method,
                "path": split.path,
                "protocol": "HTTP/1.1",
                "sourceIp": source_ip,
                "userAgent": folded.get("user-agent", ""),
            },
            "requestId": base64.b32encode(uuid.uuid4().bytes)[:16].decode(),
            "routeKey": route_key,
            "stage": "$default",
            "time": now.strftime("%d/%b/%Y:%H:%M:%S +0000"),
            "timeEpoch": int(now.timestamp() * 1000),
        },
        "isBase64Encoded": False,
    }
    if cookies:
        event["cookies"] = cookies
    if query:
        event["queryStringParameters"] = query
    if path_parameters:
        event["pathParameters"] = dict(path_parameters)
    if body:
        if is_text(folded.get("content-type"), body):
            event["body"] = body.decode("utf-8")
        else:
            event["body"] = base64.b64encode(body).decode("ascii")
            event["isBase64Encoded"] = True
    return event


def response_from_result(result: Any) -> tuple[int, list[tuple[str, str]], bytes]:
    """Map a handler result to (status, headers, body) as HTTP API payload 2.0 does."""
    if not isinstance(result, dict) or "statusCode" not in result:
        body = json.dumps(result).encode()
        return 200, [("content-type", "application/json")], body
    status = int(result["statusCode"])
    headers = [(str(k), str(v)) for k, v in (result.get("headers") or {}).items()]
    for k, values in (result.get("multiValueHeaders") or {}).items():
        headers.extend((str(k), str(v)) for v in values)
    headers.extend(("set-cookie", str(c)) for c in result.get("cookies") or [])
    raw = result.get("body")
    if raw is None:
        body = b""
    elif result.get("isBase64Encoded"):
        body = base64.b64decode(raw)
    else:
        body = raw.encode() if isinstance(raw, str) else json.dumps(raw).encode()
    return status, headers, body


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 256  # a burst of senders must not see refused connections


class Gateway:
    """The threaded HTTP server in front of the in-process functions."""

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
        ``HEADER_TIMEOUT_SECONDS``, ``BODY_TIMEOUT_SECONDS``, ``IDLE_TIMEOUT_SECONDS``)."""
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
        self.server = _Server((host, port), self._handler_class())
        self._thread: threading.Thread | None = None

    @property
    def port(self) -> int:
        return int(self.server.server_address[1])

    def start(self) -> None:
        self._thread = threading.Thread(
            target=self.server.serve_forever, name="http-gateway", daemon=True
        )
        self._thread.start()

    def stop(self) -> None:
        if self._thread is not None:
            self.server.shutdown()  # waits for serve_forever: only once it runs
        self.server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=10)

    def _handler_class(self) -> type[BaseHTTPRequestHandler]:
        gateway = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            server_version = "webhook-pipeline-local"

            timeout = IDLE_TIMEOUT_SECONDS  # socket timeout while waiting for a request

            def setup(self) -> None:
                super().setup()
                self.rfile.close()  # the socket's own file: its reads have no deadline
                self._reader = _DeadlineReader(self.connection)
                self.rfile = io.BufferedReader(self._reader)

            def _deadline(self, seconds: float | None, default: float) -> None:
                self._reader.deadline = time.monotonic() + (default if seconds is None else seconds)

            def log_message(self, format: str, *args: Any) -> None:
                message = format % args
                if getattr(self, "path", ""):
                    message = message.replace(self.path, self._shown_target())
                log.debug("%s - %s", self.address_string(), message)

            def _shown_target(self) -> str:
                """The request target with credential query values redacted, for logs."""
                return redact_target(self.path, gateway.credential_params)

            def handle_one_request(self) -> None:
                # Idle wait for the first byte, then one deadline for line and headers.
                self._answered: int | None = None
                self._deadline(gateway.idle_timeout, IDLE_TIMEOUT_SECONDS)
                try:
                    # rfile is buffered: it can peek
                    first = cast(io.BufferedReader, self.rfile).peek(1)[:1]
                except (TimeoutError, OSError):
                    self.close_connection = True
                    return
                if not first:
                    self.close_connection = True
                    return
                self._deadline(gateway.header_timeout, HEADER_TIMEOUT_SECONDS)
                try:
                    super().handle_one_request()
                except (TimeoutError, *_DISCONNECTED):
                    self.close_connection = True

            def _read_exact(self, size: int) -> bytes:
                data = self.rfile.read(size)
                if len(data) != size:
                    raise BadRequest("the body ended before its announced size")
                return data

            def _read_body(self) -> bytes | None:
                self._deadline(gateway.body_timeout, BODY_TIMEOUT_SECONDS)
                encoding = (self.headers.get("Transfer-Encoding") or "").strip().lower()
                if encoding and encoding != "chunked":
                    raise BadRequest(f"unsupported Transfer-Encoding {encoding!r}")
                if encoding == "chunked":
                    if self.headers.get("Content-Length") is not None:
                        raise BadRequest("both Content-Length and Transfer-Encoding")
                    chunks = []
                    total = 0
                    while True:
                        line = self.rfile.readline(1024)
                        if not line.endswith(b"\n"):
                            raise BadRequest("truncated chunk size line")
                        field = line.split(b";")[0].strip()
                        if not _CHUNK_SIZE.match(field):
                            raise BadRequest(f"malformed chunk size {field[:20]!r}")
                        size = int(field, 16)
                        if size == 0:
                            while True:
                                trailer = self.rfile.readline(8192)
                                if trailer in (b"\r\n", b"\n"):
                                    break
                                if not trailer.endswith(b"\n"):
                                    raise BadRequest("truncated chunked trailer")
                            break
                        total += size
                        if total > MAX_PAYLOAD_BYTES:
                            return None
                        chunks.append(self._read_exact(size))
                        if self.rfile.readline(3) not in (b"\r\n", b"\n"):
                            raise BadRequest("a chunk is not followed by CRLF")
                    return b"".join(chunks)
                values = self.headers.get_all("Content-Length") or []
                if len(set(values)) > 1:
                    raise BadRequest("conflicting Content-Length headers")
                raw = values[0].strip() if values else "0"
                if not _CONTENT_LENGTH.match(raw):
                    raise BadRequest(f"invalid Content-Length {raw[:20]!r}")
                length = int(raw)
                if length > MAX_PAYLOAD_BYTES:
                    return None
                return self._read_exact(length) if length else b""

            def _send(self, status: int, headers: list[tuple[str, str]], body: bytes) -> None:
                self._answered = status  # what the client is answered, whether it reads it or not
                self.connection.settimeout(gateway.idle_timeout or IDLE_TIMEOUT_SECONDS)
                self.send_response(status)
                names = {k.lower() for k, _ in headers}
                for k, v in headers:
                    if k.lower() not in ("content-length", "transfer-encoding", "connection"):
                        self.send_header(k, v)
                if "content-type" not in names and body:
                    self.send_header("content-type", "application/json")
                if "x-content-type-options" not in names:
                    self.send_header("X-Content-Type-Options", "nosniff")
                self.send_header("apigw-requestid", uuid.uuid4().hex[:16])
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(body)

            def _json(self, status: int, doc: Any) -> None:
                self._send(status, [("content-type", "application/json")], json.dumps(doc).encode())

            def _dispatch(self) -> None:
                started = time.perf_counter()
                status = 500
                try:
                    status = self._handle()
                except _DISCONNECTED as exc:
                    self.close_connection = True
                    status = self._answered or 500
                    log.info(
                        "%s %s answered %s: the client disconnected before the answer was "
                        "written (%s)", self.command, self._shown_target(), status,
                        type(exc).__name__,
                    )  # fmt: skip
                finally:
                    if gateway.on_request is not None:
                        elapsed_ms = (time.perf_counter() - started) * 1000
                        gateway.on_request(self.command, self._shown_target(), status, elapsed_ms)

            def _handle(self) -> int:
                # The target as sent: http.server folds a leading "//" into "/" in self.path.
                parts = self.requestline.split(" ")
                target = parts[1] if len(parts) == 3 else self.path
                path = urlsplit(target).path if target.startswith("/") else ""
                if path == "/health" and self.command in ("GET", "HEAD"):
                    self._json(200, {"status": "ok"})
                    return 200
                try:
                    body = self._read_body()
                except BadRequest as exc:
                    self.close_connection = True
                    self._json(400, {"message": f"Bad Request: {exc}"})
                    return 400
                except TimeoutError:
                    self.close_connection = True
                    self._json(408, {"message": "Request Timeout"})
                    return 408
                if body is None:
                    self.close_connection = True
                    self._json(413, {"message": "Request Entity Too Large"})
                    return 413
                if gateway.serve_invoke:
                    invoke = _INVOKE_PATH.match(path)
                    if invoke and self.command == "POST":
                        return self._invoke(unquote(invoke.group("name")), body)
                    self._json(404, {"message": "Not Found"})
                    return 404
                for route in gateway.routes:
                    params = route.match(self.command, path) if canonical_path(path) else None
                    if params is None:
                        continue
                    event = build_event(
                        method=self.command,
                        target=target,
                        headers=list(self.headers.items()),
                        body=body,
                        route_key=route.route_key,
                        path_parameters=params,
                        source_ip=self.client_address[0],
                        host=self.headers.get("Host") or "127.0.0.1",
                    )
                    try:
                        result = route.function.invoke(
                            event, deadline=time.monotonic() + route.timeout_seconds
                        )
                    except FunctionUnavailable:  # API Gateway's integration timeout: 503
                        self._send(
                            503,
                            [("content-type", "application/json"), ("retry-after", RETRY_AFTER)],
                            b'{"message":"Service Unavailable"}',
                        )
                        return 503
                    except Exception as exc:
                        log.error(
                            "%s raised:\n%s",
                            route.function.spec.logical_id,
                            getattr(exc, "trace", "") or traceback.format_exc(),
                        )
                        self._json(500, {"message": "Internal Server Error"})
                        return 500
                    status, headers, out = response_from_result(result)
                    self._send(status, headers, out)
                    return status
                self._json(404, {"message": "Not Found"})
                return 404

            def _invoke(self, name: str, body: bytes) -> int:
                fn = gateway.functions.get(name.rsplit(":", 1)[-1])
                if fn is None:
                    self._send(
                        404,
                        [("x-amzn-errortype", "ResourceNotFoundException")],
                        json.dumps(
                            {"Type": "User", "Message": f"Function not found: {name}"}
                        ).encode(),
                    )
                    return 404
                try:
                    payload = json.loads(body) if body else {}
                    result = fn.invoke(payload)
                except Exception as exc:
                    trace = getattr(exc, "trace", "") or traceback.format_exc()
                    log.error("%s raised:\n%s", fn.spec.logical_id, trace)
                    doc = {
                        "errorMessage": getattr(exc, "message", str(exc)),
                        "errorType": getattr(exc, "error_type", type(exc).__name__),
                        "stackTrace": trace.splitlines(),
                    }
                    self._send(
                        200,
                        [
                            ("x-amz-function-error", "Unhandled"),
                            ("x-amz-executed-version", "$LATEST"),
                        ],
                        json.dumps(doc).encode(),
                    )
                    return 200
                self._send(
                    200, [("x-amz-executed-version", "$LATEST")], json.dumps(result).encode()
                )
                return 200

            def do_POST(self) -> None:
                self._dispatch()

            do_GET = do_PUT = do_PATCH = do_DELETE = do_HEAD = do_OPTIONS = do_POST

        return Handler
