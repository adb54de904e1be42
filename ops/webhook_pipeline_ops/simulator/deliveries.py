"""Sample deliveries for every provider: realistic payloads, signed with development secrets, as
the API Gateway events the ingest function receives.

Everything here is driven from the provider registry: each source's provider supplies its sample
body (``Provider.sample``), its signature (``Provider.sign``) and its development secret
(``Provider.dev_secret``); the example sources are ``layers/common/sources.toml`` plus, as the
local stack serves them (``SOURCES_CATALOGUE``), one source per provider no source uses. Used by
``events/`` (``webhook-pipeline events``), the tests, the sender simulator and the local stack.
The development secrets are for local use only: never use them in a deployed stack.
"""

from __future__ import annotations

import base64
import functools
import os
import time
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlsplit

from webhook_pipeline.errors import IngestError
from webhook_pipeline.ingest.events import read_events
from webhook_pipeline.source_secrets import parse_secret
from webhook_pipeline.sources import ResolvedSource, load_sources
from webhook_pipeline.webhook_request import WebhookRequest


def example_sources(
    sources_file: str | Path | None = None, provider_modules: Iterable[str] | None = None
) -> dict[str, ResolvedSource]:
    """The sources the local stack serves: the sources file's and one per unused provider.

    ``provider_modules`` defaults to ``$PROVIDER_MODULES`` (comma-separated), as the ingest
    function reads it.
    """
    if provider_modules is None:
        provider_modules = [m for m in os.environ.get("PROVIDER_MODULES", "").split(",") if m]
    return load_sources(sources_file, tuple(provider_modules), catalogue=True)


@functools.cache
def _dev_secrets() -> dict[str, str]:
    return {name: src.provider.dev_secret for name, src in example_sources().items()}


class _DevSecrets(Mapping[str, str]):
    """Source name -> development signing secret of the example sources (read lazily)."""

    def __getitem__(self, key: str) -> str:
        return _dev_secrets()[key]

    def __iter__(self):  # type: ignore[no-untyped-def]
        return iter(_dev_secrets())

    def __len__(self) -> int:
        return len(_dev_secrets())


#: Development signing secrets of the example sources, by source name.
DEV_SECRETS: Mapping[str, str] = _DevSecrets()


def dev_secret_value(source: str | ResolvedSource) -> str:
    """The Secrets Manager value of a source's development secret (plain, or JSON when a
    handshake needs more, such as Meta's verify token)."""
    return _resolved(source).provider.dev_secret_value()


def dev_verify_token(source: str | ResolvedSource) -> str | None:
    """The development verify token of a source whose handshake needs one (Meta)."""
    return parse_secret(dev_secret_value(source)).verify_token


@dataclass(frozen=True)
class SampleDelivery:
    """A signed delivery ready to send.

    Attributes
    ----------
    source : str
        Source name (the ``{source}`` path segment).
    delivery_id : str
        The delivery id the ingest function will read from it (the first, for a batch).
    body : bytes
        Raw body bytes (what was signed).
    headers : dict[str, str]
        Provider headers including the signature.
    delivery_ids : tuple[str, ...]
        Every delivery id the ingest function will read (several for a batched body).
    query_string : str
        The query string of the URL the sender calls, exactly (a credential some providers
        carry there, Twilio's ``bodySHA256``); empty for most.
    request_id : str
        The API Gateway request id the event is given, when the source's delivery id is the
        request's own (``delivery_id = { request = "id" }``); else derived from the id.
    """

    source: str
    delivery_id: str
    body: bytes
    headers: dict[str, str] = field(default_factory=dict)
    delivery_ids: tuple[str, ...] = ()
    query_string: str = ""
    request_id: str = ""


def _resolved(source: str | ResolvedSource) -> ResolvedSource:
    return example_sources()[source] if isinstance(source, str) else source


def new_id(source: str | ResolvedSource) -> str:
    """A fresh delivery id in the provider's style."""
    return _resolved(source).provider.new_delivery_id(uuid.uuid4().hex)


def payload(
    source: str | ResolvedSource,
    *,
    delivery_id: str,
    resource: str = "res_1",
    sequence: int = 1,
    event_type: str | None = None,
    created: int | None = None,
) -> tuple[bytes, dict[str, str]]:
    """A provider-shaped body and its non-signature headers for ``source``.

    ``sequence`` becomes the provider's ordering value (Stripe ``created``, Shopify/Standard
    Webhooks timestamps as seconds since the epoch, generic ``resource.version``...).
    """
    sample = _resolved(source).provider.sample(
        delivery_id=delivery_id,
        resource=resource,
        sequence=sequence,
        event_type=event_type,
        timestamp=created if created is not None else int(time.time()),
    )
    return sample.body, dict(sample.headers)


def sign(
    source: ResolvedSource,
    body: bytes,
    secret: str,
    *,
    timestamp: int,
    delivery_id: str,
    url: str = "",
) -> dict[str, str]:
    """Signature headers of ``source``'s provider for ``body`` (``timestamp`` in Unix seconds);
    ``Provider.sign_request`` also covers providers that carry it in the body or the URL."""
    return source.provider.sign(body, secret, timestamp=timestamp, delivery_id=delivery_id, url=url)


def signed_delivery(
    source: ResolvedSource,
    *,
    delivery_id: str | None = None,
    secret: str | None = None,
    timestamp: int | None = None,
    resource: str = "res_1",
    sequence: int = 1,
    event_type: str | None = None,
    body: bytes | None = None,
    extra_headers: Mapping[str, str] | None = None,
    url: str = "",
) -> SampleDelivery:
    """A realistic delivery for ``source``, signed with ``secret`` (default: its dev secret).

    The delivery id is generated in the provider's style when not given; the ids the ingest
    function will read are found by running the provider's own verification and the ingest's
    event reader on the signed request. ``url`` is the URL the sender calls (providers that
    sign it sign this one); default ``https://localhost/webhooks/<source>``, what
    :func:`http_api_event` sends to by default.
    """
    timestamp = timestamp if timestamp is not None else int(time.time())
    delivery_id = delivery_id or new_id(source)
    url = url or f"https://{DEFAULT_DOMAIN}/webhooks/{source.name}"
    default_body, headers = payload(
        source,
        delivery_id=delivery_id,
        resource=resource,
        sequence=sequence,
        event_type=event_type,
        created=timestamp,
    )
    if body is not None:
        default_body = body
    headers |= dict(extra_headers or {})
    key = secret if secret is not None else source.provider.dev_secret
    signed = source.provider.sign_request(
        default_body, key, timestamp=timestamp, delivery_id=delivery_id, url=url
    )
    headers |= signed.headers
    request_id = (
        uuid.uuid5(uuid.NAMESPACE_URL, f"{source.name}/{delivery_id}").hex
        if source.delivery_id.request
        else ""
    )
    ids = recorded_ids(
        source, signed.body, headers, key, timestamp, signed.url, request_id=request_id
    ) or (delivery_id,)
    return SampleDelivery(
        source.name,
        ids[0],
        signed.body,
        headers,
        ids,
        query_string=urlsplit(signed.url).query,
        request_id=request_id,
    )


def recorded_ids(
    source: ResolvedSource,
    body: bytes,
    headers: Mapping[str, str],
    secret: str,
    timestamp: int,
    url: str = "",
    *,
    request_id: str = "",
) -> tuple[str, ...]:
    """The delivery ids the ingest function reads from this request sent to ``url`` (empty when
    it would not verify or carries no usable id); ``request_id`` is the API Gateway request id
    it will have, for sources whose delivery id is the request's own."""
    parts = urlsplit(url)
    request = WebhookRequest(
        method="POST",
        source=source.name,
        headers={k.lower(): v for k, v in headers.items()},
        body=body,
        query=dict(parse_qsl(parts.query, keep_blank_values=True)),
        path=parts.path,
        raw_query=parts.query,
        host=parts.netloc,
        public_url=url,
        request_id=request_id,
    )
    try:
        stored = source.provider.verification_secret(secret)  # the public key, if asymmetric
        verified = source.provider.verify(request, [stored], float(timestamp))
        return tuple(e.delivery_id for e in read_events(source, request, verified))
    except IngestError:
        return ()


#: The domain name sample events claim to be sent to (URL-signing providers sign it).
EXAMPLE_HOST = "webhooks.example.com"
#: The domain name of :func:`http_api_event` unless told otherwise.
DEFAULT_DOMAIN = "localhost"


def http_api_event(
    delivery: SampleDelivery,
    *,
    base64_body: bool = False,
    path_source: str | None = None,
    time_epoch_ms: int | None = None,
    domain: str = "localhost",
) -> dict[str, Any]:
    """The API Gateway HTTP API (payload 2.0) event for ``delivery``.

    Header names are lower-cased as HTTP API delivers them; ``base64_body`` sends the body with
    ``isBase64Encoded: true`` as API Gateway does for binary media types.
    """
    return request_event(
        path_source or delivery.source,
        "POST",
        delivery.body,
        delivery.headers,
        dict(parse_qsl(delivery.query_string, keep_blank_values=True)) or None,
        request_key=delivery.delivery_id,
        base64_body=base64_body,
        time_epoch_ms=time_epoch_ms,
        domain=domain,
        raw_query=delivery.query_string or None,
        request_id=delivery.request_id or None,
    )


def request_event(
    source: str,
    method: str,
    body: bytes,
    headers: Mapping[str, str],
    query: Mapping[str, str] | None = None,
    *,
    request_key: str | None = None,
    base64_body: bool = False,
    time_epoch_ms: int | None = None,
    domain: str = "localhost",
    raw_query: str | None = None,
    request_id: str | None = None,
) -> dict[str, Any]:
    """An HTTP API (2.0) event of any method, query and body (a body that is not UTF-8 is sent
    base64-encoded, as API Gateway does); ``raw_query`` is the query string exactly as sent
    (default: ``query`` encoded), ``request_id`` the ``requestContext.requestId`` (default:
    derived from the source and ``request_key``)."""
    from urllib.parse import urlencode

    raw_query = raw_query if raw_query is not None else urlencode(dict(query or {}))
    event = _http_api_envelope(method, source, request_key or raw_query or method, time_epoch_ms)
    if request_id is not None:
        event["requestContext"]["requestId"] = request_id
    event["requestContext"]["domainName"] = domain
    event["rawQueryString"] = raw_query
    if query:
        event["queryStringParameters"] = dict(query)
    event["headers"] = {k.lower(): v for k, v in headers.items()}
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError:
        base64_body = True
    if body or method != "GET":
        event["body"] = base64.b64encode(body).decode() if base64_body else text
    event["isBase64Encoded"] = base64_body
    return event


def subscription_get_event(
    source: str, query: Mapping[str, str], time_epoch_ms: int | None = None
) -> dict[str, Any]:
    """An HTTP API (2.0) ``GET /webhooks/{source}?...`` event (Meta's ``hub.challenge``)."""
    return request_event(
        source,
        "GET",
        b"",
        {"user-agent": "facebookplatform/1.0"},
        query,
        time_epoch_ms=time_epoch_ms,
    )


def _http_api_envelope(
    method: str, source: str, request_key: str, time_epoch_ms: int | None
) -> dict[str, Any]:
    now_ms = time_epoch_ms if time_epoch_ms is not None else int(time.time() * 1000)
    route = f"{method} /webhooks/{{source}}"
    return {
        "version": "2.0",
        "routeKey": route,
        "rawPath": f"/webhooks/{source}",
        "rawQueryString": "",
        "requestContext": {
            "accountId": "123456789012",
            "apiId": "local",
            "domainName": "localhost",
            "http": {
                "method": method,
                "path": f"/webhooks/{source}",
                "protocol": "HTTP/1.1",
                "sourceIp": "127.0.0.1",
                "userAgent": "sample",
            },
            "requestId": uuid.uuid5(uuid.NAMESPACE_URL, f"{source}/{request_key}").hex,
            "routeKey": route,
            "stage": "$default",
            "timeEpoch": now_ms,
        },
        "pathParameters": {"source": source},
    }


def rest_api_event(delivery: SampleDelivery, *, base64_body: bool = False) -> dict[str, Any]:
    """The API Gateway REST API (payload 1.0) proxy event for ``delivery``."""
    return {
        "resource": "/webhooks/{source}",
        "path": f"/webhooks/{delivery.source}",
        "httpMethod": "POST",
        "headers": dict(delivery.headers),
        "multiValueHeaders": {k: [v] for k, v in delivery.headers.items()},
        "queryStringParameters": None,
        "multiValueQueryStringParameters": None,
        "pathParameters": {"source": delivery.source},
        "stageVariables": None,
        "requestContext": {
            "httpMethod": "POST",
            "path": f"/prod/webhooks/{delivery.source}",
            "requestId": uuid.uuid5(uuid.NAMESPACE_URL, delivery.delivery_id).hex,
            "stage": "prod",
            "resourcePath": "/webhooks/{source}",
            "identity": {"sourceIp": "127.0.0.1"},
        },
        "body": base64.b64encode(delivery.body).decode() if base64_body else delivery.body.decode(),
        "isBase64Encoded": base64_body,
    }
