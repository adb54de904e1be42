"""API Gateway's routes, proxy events and answers, as the local gateway matches, builds and maps
them.

Two event shapes, as a route declares (``PayloadFormatVersion``): the HTTP API's payload 2.0
(:func:`build_event`: header names lower-cased, a repeated header's values joined with ``","``,
cookies in ``cookies``) and the REST API's payload 1.0 (:func:`build_rest_event`: the last value
of each header in ``headers``, every value in ``multiValueHeaders``, the same for the query
string; locally the names arrive lower-cased, as ASGI hands them over, where API Gateway keeps
the sender's case). Both carry the body exactly: as text when it is UTF-8 with a textual content
type, otherwise base64 with ``isBase64Encoded``. Sources: the API Gateway developer guide, "Working
with AWS Lambda proxy integrations for HTTP APIs" (payload format versions) and "Input format of
a Lambda function for proxy integration" (REST).
"""

from __future__ import annotations

import base64
import json
import re
import uuid
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any
from urllib.parse import parse_qsl, unquote, urlsplit

from starlette.requests import Request

from webhook_pipeline_ops.local.resources import HttpRoute
from webhook_pipeline_ops.local.runtime import LocalFunction

_TEXT_TYPES = re.compile(
    r"^(text/|application/(json|[\w.+-]+\+json|xml|[\w.+-]+\+xml|x-www-form-urlencoded|javascript"
    r"|graphql))",
    re.IGNORECASE,
)
_ENCODED_SEPARATOR = re.compile(r"%(2f|5c)", re.IGNORECASE)


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


def _put_body(event: dict[str, Any], content_type: str | None, body: bytes) -> None:
    if is_text(content_type, body):
        event["body"] = body.decode("utf-8")
    else:
        event["body"] = base64.b64encode(body).decode("ascii")
        event["isBase64Encoded"] = True


def _request_id() -> str:
    return base64.b32encode(uuid.uuid4().bytes)[:16].decode()


def _joined_headers(headers: list[tuple[str, str]]) -> tuple[dict[str, str], list[str]]:
    """(lower-cased name -> values joined with ",", the cookies), as payload 2.0 has them."""
    folded: dict[str, str] = {}
    cookies: list[str] = []
    for name, value in headers:
        key = name.lower()
        if key == "cookie":
            cookies.extend(c.strip() for c in value.split(";") if c.strip())
            continue
        folded[key] = f"{folded[key]},{value}" if key in folded else value
    return folded, cookies


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
    folded, cookies = _joined_headers(headers)
    query: dict[str, str] = {}
    for k, v in parse_qsl(split.query, keep_blank_values=True):
        query[k] = f"{query[k]},{v}" if k in query else v
    http = {
        "method": method,
        "path": split.path,
        "protocol": "HTTP/1.1",
        "sourceIp": source_ip,
        "userAgent": folded.get("user-agent", ""),
    }
    event: dict[str, Any] = {
        "version": "2.0",
        "routeKey": route_key,
        "rawPath": split.path,
        "rawQueryString": split.query,
        "headers": folded,
        "requestContext": _request_context(host, route_key, http),
        "isBase64Encoded": False,
    }
    if cookies:
        event["cookies"] = cookies
    if query:
        event["queryStringParameters"] = query
    if path_parameters:
        event["pathParameters"] = dict(path_parameters)
    if body:
        _put_body(event, folded.get("content-type"), body)
    return event


def _request_context(host: str, route_key: str, http: dict[str, str]) -> dict[str, Any]:
    """The 2.0 event's ``requestContext``: this request's id and time, the local API's names."""
    now = datetime.now(UTC)
    return {
        "accountId": "123456789012",
        "apiId": "local",
        "domainName": host,
        "domainPrefix": host.split(".")[0].split(":")[0],
        "http": http,
        "requestId": _request_id(),
        "routeKey": route_key,
        "stage": "$default",
        "time": now.strftime("%d/%b/%Y:%H:%M:%S +0000"),
        "timeEpoch": int(now.timestamp() * 1000),
    }


def _multi(pairs: list[tuple[str, str]]) -> tuple[dict[str, str], dict[str, list[str]]]:
    """(last value per name, every value per name), names as first sent."""
    multi: dict[str, list[str]] = {}
    names: dict[str, str] = {}
    for name, value in pairs:
        multi.setdefault(names.setdefault(name.lower(), name), []).append(value)
    return {k: v[-1] for k, v in multi.items()}, multi


def build_rest_event(
    *,
    method: str,
    target: str,
    headers: list[tuple[str, str]],
    body: bytes,
    resource: str,
    path_parameters: Mapping[str, str],
    source_ip: str,
    host: str,
) -> dict[str, Any]:
    """The API Gateway REST API (payload format 1.0) proxy event for one request: ``headers``
    holds each header's last value, ``multiValueHeaders`` every value in arrival order (names as
    sent); the query string likewise (``None`` when there is none). Parameters as
    :func:`build_event`; ``resource`` is the route's path template."""
    split = urlsplit(target)
    single, multi = _multi(headers)
    query, multi_query = _multi(parse_qsl(split.query, keep_blank_values=True))
    now = datetime.now(UTC)
    content_type = next((v for k, v in single.items() if k.lower() == "content-type"), None)
    event: dict[str, Any] = {
        "version": "1.0",
        "resource": resource,
        "path": split.path,
        "httpMethod": method,
        "headers": single,
        "multiValueHeaders": multi,
        "queryStringParameters": query or None,
        "multiValueQueryStringParameters": multi_query or None,
        "pathParameters": dict(path_parameters) or None,
        "stageVariables": None,
        "requestContext": {
            "accountId": "123456789012",
            "apiId": "local",
            "domainName": host,
            "httpMethod": method,
            "path": split.path,
            "protocol": "HTTP/1.1",
            "requestId": _request_id(),
            "requestTimeEpoch": int(now.timestamp() * 1000),
            "resourcePath": resource,
            "stage": "$default",
            "identity": {"sourceIp": source_ip, "userAgent": single.get("User-Agent", "")},
        },
        "body": None,
        "isBase64Encoded": False,
    }
    if body:
        _put_body(event, content_type, body)
    return event


def canonical_path(path: str) -> bool:
    """Whether ``path`` (as sent, before any decoding) is one API Gateway would route as such:
    no empty segment (``//``), no ``.`` or ``..`` segment (plain or percent-encoded), no encoded
    ``/`` or ``\\``."""
    if not path.startswith("/") or _ENCODED_SEPARATOR.search(path):
        return False
    return all(s and unquote(s) not in (".", "..") for s in path[1:].split("/"))


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
    """One ``METHOD /path/{param}`` route of the API and the function behind it.

    ``payload_format``: ``"2.0"`` (HTTP API) or ``"1.0"`` (REST API, or an HTTP API route
    declaring ``PayloadFormatVersion: "1.0"``); default the route's own ``payload_format`` if
    it has one, else ``"2.0"``."""

    def __init__(
        self, route: HttpRoute, function: LocalFunction, payload_format: str | None = None
    ) -> None:
        self.method = route.method
        self.path = route.path
        self.function = function
        self.regex = _route_regex(route.path)
        self.timeout_seconds = route.timeout_ms / 1000  # API Gateway's integration timeout
        self.payload_format = payload_format or str(getattr(route, "payload_format", "2.0"))
        if self.payload_format not in ("1.0", "2.0"):
            raise ValueError(f"unknown payload format {self.payload_format!r} for {self.path}")

    @property
    def route_key(self) -> str:
        return f"{self.method} {self.path}"

    def match(self, method: str, path: str) -> dict[str, str] | None:
        if self.method not in ("ANY", method):
            return None
        m = self.regex.match(path)
        return {k: unquote(v) for k, v in m.groupdict().items()} if m else None

    def event(self, request: Request, target: str, body: bytes, params: Mapping[str, str]) -> Any:
        """This route's event for ``request`` (shape per :attr:`payload_format`)."""
        headers = [(k.decode("latin-1"), v.decode("latin-1")) for k, v in request.headers.raw]
        common: dict[str, Any] = {
            "method": request.method,
            "target": target,
            "headers": headers,
            "body": body,
            "path_parameters": params,
            "source_ip": request.client.host if request.client else "",
            "host": request.headers.get("host") or "127.0.0.1",
        }
        if self.payload_format == "1.0":
            return build_rest_event(resource=self.path, **common)
        return build_event(route_key=self.route_key, **common)


def response_from_result(result: Any) -> tuple[int, list[tuple[str, str]], bytes]:
    """Map a handler result to (status, headers, body) as HTTP API payload 2.0 does (a result
    without ``statusCode`` is a JSON 200; ``multiValueHeaders`` and ``cookies`` are honoured)."""
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
