"""The raw HTTP request a webhook arrives as, built from API Gateway proxy events.

Both API Gateway HTTP API (payload format 2.0) and REST API (1.0) proxy events are accepted.
Bodies are kept as the exact received bytes (base64-decoded when ``isBase64Encoded``): signatures
are computed over those bytes, never over re-serialized JSON (case C01).
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlencode

from aws_lambda_powertools.utilities.data_classes import (
    APIGatewayProxyEvent,
    APIGatewayProxyEventV2,
)

from webhook_pipeline.errors import BadDeliveryError


@dataclass(frozen=True)
class WebhookRequest:
    """A webhook request as received, independent of the API Gateway payload format.

    Attributes
    ----------
    method : str
        Upper-case HTTP method.
    source : str
        The ``{source}`` path parameter (empty when absent).
    headers : Mapping[str, str]
        Header names lower-cased; repeated headers joined with ``","`` as API Gateway HTTP API
        does (so ``Stripe-Signature`` sent twice reads ``"t=..,v1=..,t=..,v1=.."``).
    body : bytes
        The exact received body bytes.
    query : Mapping[str, str]
        Query string parameters (last value wins for repeats).
    path : str
        The request path as received (``/webhooks/twilio``), before any stage prefix is removed.
    raw_query : str
        The query string exactly as received (without ``?``), for providers that sign the URL.
    host : str
        The ``Host`` the sender called (the API's domain name when API Gateway gives no header).
    public_url : str
        The URL the sender called, as it signed it (for providers that sign the URL: Twilio,
        Square, HubSpot). Set by the ingest use case from the source's ``public_url``, the
        deployment's ``PUBLIC_BASE_URL`` or the request itself (:func:`public_url`).
    request_id : str
        The id API Gateway gave this HTTP request (``requestContext.requestId``): unique per
        request, so a sender's retry has another one (for senders that give no delivery id).
    """

    method: str
    source: str
    headers: Mapping[str, str]
    body: bytes
    query: Mapping[str, str] = field(default_factory=dict)
    path: str = ""
    raw_query: str = ""
    host: str = ""
    public_url: str = ""
    request_id: str = ""

    def header(self, name: str) -> str | None:
        """Return the header ``name`` (any case) or ``None`` when absent."""
        return self.headers.get(name.lower())


def header_value(headers: Mapping[str, str], name: str) -> str | None:
    """The one value of header ``name`` read as an identity field, or ``None`` when absent.

    API Gateway joins a repeated header's values with ``","`` (HTTP API 2.0 in ``headers``;
    :func:`request_from_event` folds REST 1.0's ``multiValueHeaders`` and the local gateway's
    pairs the same way), as RFC 9110 section 5.3 lets a recipient do. A singleton such as
    ``X-GitHub-Delivery`` sent twice therefore reads ``"x,x"``: its comma-separated elements,
    stripped of spaces and tabs, are read as its values (empty ones ignored); equal values are
    one value, so a repeat cannot make ``x,x`` a second delivery id. No provider's id, event
    type, resource or sequence header holds a comma (UUIDs, digits, ``repo:push``...), so a
    single value is never split by mistake.

    Raises
    ------
    BadDeliveryError
        ``field_ambiguous``: the header is given with different values (not signed: which one
        is meant cannot be known).
    """
    value = headers.get(name.lower())
    if value is None or "," not in value:
        return value
    values = {part.strip(" \t") for part in value.split(",")} - {""}
    if len(values) > 1:
        raise BadDeliveryError(
            "field_ambiguous", f"header {name} is given more than once with different values"
        )
    return values.pop() if values else None


def _fold_headers(pairs: list[tuple[str, str]]) -> dict[str, str]:
    folded: dict[str, str] = {}
    for name, value in pairs:
        key = name.lower()
        folded[key] = f"{folded[key]},{value}" if key in folded else value
    return folded


def _decode_body(body: str | None, is_base64: bool) -> bytes:
    if body is None:
        return b""
    if not is_base64:
        try:
            return body.encode("utf-8")
        except UnicodeEncodeError as exc:  # a lone surrogate ("\ud800") in the event's JSON
            raise BadDeliveryError("body_not_utf8", "body is not valid Unicode text") from exc
    try:
        return base64.b64decode(body, validate=True)
    except (binascii.Error, ValueError) as exc:
        raise BadDeliveryError(
            "body_not_base64", "isBase64Encoded body is not valid base64"
        ) from exc


def request_from_event(event: Mapping[str, Any]) -> WebhookRequest:
    """Build a :class:`WebhookRequest` from an API Gateway proxy event (2.0 or 1.0).

    Parameters
    ----------
    event : Mapping[str, Any]
        The Lambda event of an HTTP API (``"version": "2.0"``) or REST API (1.0) proxy
        integration.

    Returns
    -------
    WebhookRequest

    Raises
    ------
    BadDeliveryError
        When ``isBase64Encoded`` is true but the body is not valid base64.
    """
    raw = dict(event)
    if raw.get("version") == "2.0":
        v2 = APIGatewayProxyEventV2(raw)
        method = v2.request_context.http.method
        pairs = list((v2.headers or {}).items())
        # HTTP API 2.0 carries cookies outside the headers; signatures never cover them.
        query = dict(v2.query_string_parameters or {})
        is_b64 = v2.is_base64_encoded
        params = v2.path_parameters or {}
        path = str(raw.get("rawPath") or "")
        raw_query = str(raw.get("rawQueryString") or "")
        domain = str((raw.get("requestContext") or {}).get("domainName") or "")
    else:
        v1 = APIGatewayProxyEvent(raw)
        method = v1.http_method
        multi = v1.multi_value_headers or {}
        if multi:
            pairs = [(k, v) for k, values in multi.items() for v in (values or [])]
        else:
            pairs = list((v1.headers or {}).items())
        query = dict(v1.query_string_parameters or {})
        is_b64 = bool(v1.is_base64_encoded)
        params = v1.path_parameters or {}
        path = str(raw.get("path") or "")
        multi_query = raw.get("multiValueQueryStringParameters") or {}
        raw_query = urlencode(
            [(k, v) for k, values in multi_query.items() for v in (values or [])]
            or list(query.items())
        )
        domain = str((raw.get("requestContext") or {}).get("domainName") or "")
    headers = _fold_headers([(str(k), str(v)) for k, v in pairs])
    return WebhookRequest(
        method=(method or "POST").upper(),
        source=str(params.get("source", "")),
        headers=headers,
        body=_decode_body(raw.get("body"), bool(is_b64)),
        query=query,
        path=path,
        raw_query=raw_query,
        host=headers.get("host") or str(domain or ""),
        request_id=str((raw.get("requestContext") or {}).get("requestId") or ""),
    )


def public_url(request: WebhookRequest, source_url: str | None, base_url: str | None) -> str:
    """The URL the sender called, for providers that sign it.

    Parameters
    ----------
    request : WebhookRequest
        The request as received (its path, raw query and host).
    source_url : str | None
        The source's own ``public_url`` (exactly as configured at the provider), used as is
        with the request's query string appended when it has none of its own.
    base_url : str | None
        The deployment's public base URL (``https://hooks.example.com``, a custom domain or a
        proxy in front of API Gateway): the request path and query are appended.

    Returns
    -------
    str
        ``source_url``, else ``base_url`` + path + query, else ``https://<host><path>?<query>``.
    """
    query = f"?{request.raw_query}" if request.raw_query else ""
    if source_url:
        return source_url if "?" in source_url else source_url + query
    if base_url:
        return base_url.rstrip("/") + request.path + query
    return f"https://{request.host}{request.path}{query}"


def called_url(request: WebhookRequest) -> str:
    """The URL the sender called, for a provider that signs it (Twilio, Square, HubSpot):
    ``request.public_url`` as the ingest set it, else rebuilt from the request itself."""
    return request.public_url or public_url(request, None, None)
