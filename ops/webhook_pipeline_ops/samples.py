"""Sample deliveries for every example source: realistic payloads, signed with development
secrets, as the API Gateway events the ingest function receives.

Used by ``events/`` (``webhook-pipeline events``), the tests, the sender simulator and the local
stack. ``DEV_SECRETS`` are for local use only: the local stack seeds them into its Secrets
Manager emulator; never use them in a deployed stack.
"""

from __future__ import annotations

import base64
import hashlib
import json
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from webhook_pipeline.signatures import build_scheme
from webhook_pipeline.sources import Source, load_sources

# Development signing secrets of the example sources in layers/common/sources.toml.
DEV_SECRETS: dict[str, str] = {
    "stripe": "whsec_dev_stripe_local_only",
    "github": "dev-github-secret-local-only",
    "standard-webhooks": "whsec_" + base64.b64encode(b"dev-standard-webhooks-secret-32b").decode(),
    "slack": "dev-slack-signing-secret-local",
    "shopify": "dev-shopify-client-secret-local",
    "generic-hmac": "dev-generic-hmac-secret-local",
    "meta": "dev-meta-app-secret-local",
}

# Verify tokens of sources whose scheme answers a GET subscription handshake (Meta).
DEV_VERIFY_TOKENS: dict[str, str] = {"meta": "dev-meta-verify-token"}


def dev_secret_value(source: str) -> str:
    """The Secrets Manager value of ``source``'s development secret: the signing secret, or
    JSON ``{"current", "verify_token"}`` for sources with a subscription handshake."""
    if source in DEV_VERIFY_TOKENS:
        return json.dumps(
            {"current": DEV_SECRETS[source], "verify_token": DEV_VERIFY_TOKENS[source]}
        )
    return DEV_SECRETS[source]


@dataclass(frozen=True)
class SampleDelivery:
    """A signed delivery ready to send.

    Attributes
    ----------
    source : str
        Source name (the ``{source}`` path segment).
    delivery_id : str
        The delivery id the ingest function will read from it.
    body : bytes
        Raw body bytes (what was signed).
    headers : dict[str, str]
        Provider headers including the signature.
    """

    source: str
    delivery_id: str
    body: bytes
    headers: dict[str, str] = field(default_factory=dict)


def _iso(ts: int) -> str:
    return datetime.fromtimestamp(ts, UTC).isoformat().replace("+00:00", "Z")


def payload(
    source: str,
    *,
    delivery_id: str,
    resource: str = "res_1",
    sequence: int = 1,
    event_type: str | None = None,
    created: int | None = None,
) -> tuple[bytes, dict[str, str]]:
    """Build a provider-shaped body and its non-signature headers for ``source``.

    ``sequence`` becomes the provider's ordering value (Stripe ``created``, Shopify/Standard
    Webhooks timestamps as seconds since the epoch, generic ``resource.version``).
    """
    created = created if created is not None else int(time.time())
    headers: dict[str, str] = {"content-type": "application/json"}
    doc: dict[str, Any]
    if source == "stripe":
        doc = {
            "id": delivery_id,
            "object": "event",
            "type": event_type or "customer.updated",
            "created": sequence,
            "data": {"object": {"id": resource, "object": "customer"}},
        }
    elif source == "github":
        doc = {"action": "opened", "repository": {"full_name": "octo/hello"}, "sequence": sequence}
        headers |= {
            "X-GitHub-Delivery": delivery_id,
            "X-GitHub-Event": event_type or "issues",
            "X-GitHub-Hook-ID": "123456",
        }
    elif source == "standard-webhooks":
        doc = {
            "type": event_type or "invoice.paid",
            "timestamp": _iso(sequence),
            "data": {"id": resource},
        }
    elif source == "slack":
        doc = {
            "type": "event_callback",
            "event_id": delivery_id,
            "event_time": created,
            "event": {"type": event_type or "message", "text": "hi", "channel": "C1"},
        }
    elif source == "shopify":
        doc = {
            "id": 450789469,
            "admin_graphql_api_id": f"gid://shopify/Order/{resource}",
            "updated_at": _iso(sequence),
        }
        headers |= {
            "X-Shopify-Webhook-Id": delivery_id,
            "X-Shopify-Topic": event_type or "orders/updated",
            "X-Shopify-Shop-Domain": "dev-shop.myshopify.com",
            "X-Shopify-Triggered-At": _iso(created),
        }
    elif source == "meta":
        doc = {
            "object": event_type or "whatsapp_business_account",
            "entry": [
                {
                    "id": resource,
                    "changes": [
                        {
                            "field": "messages",
                            "value": {
                                "messages": [
                                    {"id": f"wamid.{delivery_id}", "timestamp": str(created)}
                                ]
                            },
                        }
                    ],
                }
            ],
        }
    else:  # generic-hmac and any source configured like it
        doc = {
            "type": event_type or "resource.updated",
            "resource": {"id": resource, "version": sequence},
        }
        headers |= {"X-Delivery-Id": delivery_id}
    return json.dumps(doc, separators=(",", ":")).encode(), headers


def sign(
    source: Source, body: bytes, secret: str, *, timestamp: int, delivery_id: str
) -> dict[str, str]:
    """Signature headers of ``source``'s scheme for ``body`` (``timestamp`` in Unix seconds)."""
    scheme = build_scheme(source.scheme, source.scheme_options, source.tolerance_seconds)
    return scheme.sign(body, secret, timestamp=timestamp, delivery_id=delivery_id)


def signed_delivery(
    source: Source,
    *,
    delivery_id: str | None = None,
    secret: str | None = None,
    timestamp: int | None = None,
    resource: str = "res_1",
    sequence: int = 1,
    event_type: str | None = None,
    body: bytes | None = None,
    extra_headers: Mapping[str, str] | None = None,
) -> SampleDelivery:
    """A realistic delivery for ``source``, signed with ``secret`` (default: its dev secret).

    The delivery id is generated in the provider's style when not given.
    """
    timestamp = timestamp if timestamp is not None else int(time.time())
    delivery_id = delivery_id or _new_id(source.name)
    default_body, headers = payload(
        source.name,
        delivery_id=delivery_id,
        resource=resource,
        sequence=sequence,
        event_type=event_type,
        created=timestamp,
    )
    if body is not None:
        default_body = body
    headers |= dict(extra_headers or {})
    key = secret if secret is not None else DEV_SECRETS[source.name]
    headers |= sign(source, default_body, key, timestamp=timestamp, delivery_id=delivery_id)
    return SampleDelivery(
        source.name, recorded_id(source, delivery_id, default_body), default_body, headers
    )


def recorded_id(source: Source, delivery_id: str, body: bytes) -> str:
    """The delivery id the ingest function will read: ``delivery_id`` as put in the payload, or
    the body's SHA-256 for sources that deduplicate on ``{ digest = "sha256" }`` (Meta)."""
    return hashlib.sha256(body).hexdigest() if source.delivery_id.digest else delivery_id


def _new_id(source: str) -> str:
    raw = uuid.uuid4().hex
    return {
        "stripe": f"evt_{raw[:24]}",
        "slack": f"Ev{raw[:10].upper()}",
        "standard-webhooks": f"msg_{raw[:24]}",
    }.get(source, str(uuid.UUID(raw)))


def http_api_event(
    delivery: SampleDelivery,
    *,
    base64_body: bool = False,
    path_source: str | None = None,
    time_epoch_ms: int | None = None,
) -> dict[str, Any]:
    """The API Gateway HTTP API (payload 2.0) event for ``delivery``.

    Header names are lower-cased as HTTP API delivers them; ``base64_body`` sends the body with
    ``isBase64Encoded: true`` as API Gateway does for binary media types.
    """
    source = path_source or delivery.source
    event = _http_api_envelope("POST", source, delivery.delivery_id, time_epoch_ms)
    event["headers"] = {k.lower(): v for k, v in delivery.headers.items()}
    event["body"] = (
        base64.b64encode(delivery.body).decode() if base64_body else delivery.body.decode()
    )
    event["isBase64Encoded"] = base64_body
    return event


def subscription_get_event(
    source: str, query: Mapping[str, str], time_epoch_ms: int | None = None
) -> dict[str, Any]:
    """An HTTP API (2.0) ``GET /webhooks/{source}?...`` event (Meta's ``hub.challenge``)."""
    from urllib.parse import urlencode

    event = _http_api_envelope("GET", source, urlencode(query), time_epoch_ms)
    event["rawQueryString"] = urlencode(query)
    event["queryStringParameters"] = dict(query)
    event["headers"] = {"user-agent": "facebookplatform/1.0"}
    event["isBase64Encoded"] = False
    return event


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


def example_sources() -> dict[str, Source]:
    """The sources of ``layers/common/sources.toml``."""
    return load_sources()
