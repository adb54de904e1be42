"""Zoom: ``x-zm-signature: v0=<hex>`` over ``v0:{timestamp}:{body}``; the URL validation handshake.

Source of the scheme: Zoom Developer "Using webhooks", sections "Verify webhook events" and
"Validate your webhook endpoint" (developers.zoom.us/docs/api/webhooks/), and "Webhook delays"
(devsupport.zoom.us: answer 200 or 204 within 3 seconds; retries 5, 20 and 60 minutes after the
previous attempt, then the event is dropped). No official Python SDK verifies events, and no
published vector exists: the vectors here are computed from the documented recipe (SELF).

What is signed: the timestamp header and the raw body. Zoom sends no delivery id: the default
delivery id is the SHA-256 of the (signed) body, on the assumption that a retry resends the same
body (UNVERIFIED) and that two different events never share one (``event_ts`` is in
milliseconds). The signature covers no event id of its own.

Handshake: ``endpoint.url_validation`` (signed like any event) is answered 200 with
``{"plainToken": <same>, "encryptedToken": hex HMAC-SHA256(secret token, plainToken)}``. Zoom
re-validates endpoints periodically, so the answer must keep working, not only at setup;
each one counts ``HandshakeAnswered``. The encrypted token uses the current secret.
"""

from __future__ import annotations

from typing import Any

from webhook_pipeline.errors import VerificationError
from webhook_pipeline.fields import FieldLocation
from webhook_pipeline.providers.crypto import utf8_hmac
from webhook_pipeline.providers.json_body import json_object
from webhook_pipeline.providers.model import (
    Answer,
    Defaults,
    Handshake,
    LazyVectors,
    Signs,
    samples,
)
from webhook_pipeline.providers.registry import register
from webhook_pipeline.providers.schemes import V0HmacProvider
from webhook_pipeline.source_secrets import SourceSecret
from webhook_pipeline.webhook_request import WebhookRequest

HEADER = "x-zm-signature"
TIMESTAMP_HEADER = "x-zm-request-timestamp"
VALIDATION_EVENT = "endpoint.url_validation"


def encrypted_token(secret: str, plain_token: str) -> str:
    """What Zoom expects back for ``plain_token``: hex HMAC-SHA256 keyed with the secret token."""
    return utf8_hmac(secret, plain_token.encode("utf-8")).hex()


def _validation(body: bytes) -> dict[str, Any] | None:
    if VALIDATION_EVENT.encode() not in body:
        return None
    doc = json_object(body)
    if doc is None or doc.get("event") != VALIDATION_EVENT:
        return None
    payload = doc.get("payload")
    if not isinstance(payload, dict) or not isinstance(payload.get("plainToken"), str):
        return None
    return payload


class UrlValidation(Handshake):
    """``endpoint.url_validation``: answered with the plain token and its HMAC."""

    name = "endpoint.url_validation"
    method = "POST"
    signed = True

    def matches(self, request: WebhookRequest) -> bool:
        return _validation(request.body) is not None

    def answer(self, request: WebhookRequest, secret: SourceSecret) -> Answer:
        """``{"plainToken": ..., "encryptedToken": ...}`` as JSON.

        Raises
        ------
        VerificationError
            ``handshake_invalid``: an empty plain token.
        """
        payload = _validation(request.body) or {}
        plain = payload.get("plainToken")
        if not plain:
            raise VerificationError("handshake_invalid", "empty plainToken")
        return Answer(
            200, {"plainToken": plain, "encryptedToken": encrypted_token(secret.signing[0], plain)}
        )

    def sample(self, secret: SourceSecret) -> samples.HandshakeSample:
        body = {
            "payload": {"plainToken": "qgg8vlvZRS6UYooatFL8Aw"},
            "event_ts": 1654503849680,
            "event": VALIDATION_EVENT,
        }
        return samples.HandshakeSample.json(
            body, **{"content-type": "application/json; charset=utf-8"}
        )


@register
class Zoom(V0HmacProvider):
    """Zoom's ``v0`` webhook signature.

    Header shapes: ``x-zm-signature: v0=<64 hex>``, ``x-zm-request-timestamp: <seconds>``.
    Signed bytes: ``v0:{timestamp}:{body}``. HMAC-SHA256, hex. Key: the app's secret token.
    Timestamp: Unix **seconds**, a plain integer; tolerance 300 s both ways, the window of
    Zoom's own sample code: Zoom answers a failure by retrying after 5 minutes or more, each
    retry assumed to be signed afresh (UNVERIFIED; a source can widen ``tolerance_seconds``).
    """

    name = "zoom"
    title = "Zoom"
    reference = (
        "developers.zoom.us/docs/api/webhooks (verify webhook events, validate your endpoint); "
        "devsupport.zoom.us Webhook delays"
    )
    signs = Signs(
        id=None,
        timestamp="x-zm-request-timestamp header, seconds",
        note="timestamp and body are signed; Zoom sends no delivery id (default: body digest)",
    )
    defaults = Defaults(
        delivery_id=FieldLocation(digest="sha256"),
        event_type=FieldLocation(body="event"),
    )
    default_tolerance_seconds = 300
    retry_horizon_seconds = 90 * 60
    retry_horizon_reference = (
        "devsupport.zoom.us Webhook delays: retries after 5, 20 and 60 more minutes (~85 min)"
    )
    handshakes = (UrlValidation(),)
    signature_header = HEADER
    timestamp_header = TIMESTAMP_HEADER
    v0_digest_bytes = 32
    dev_secret = "dev-zoom-secret-token-local"
    vectors = LazyVectors(
        lambda: (
            samples.Vector(
                secret="zoom_secret",
                headers={
                    HEADER: "v0=dd93233096ab380524b5169ae310f2fbcfbc59b88920fda9ddcf11142b9d487b",
                    TIMESTAMP_HEADER: "1700000000",
                },
                body=b'{"id":"evt_1","type":"test"}',
                now=1_700_000_000,
                origin="self",
                reference=(
                    "no published vector and no official verifier: HMAC-SHA256 of the documented "
                    "v0:{ts}:{body} computed with stdlib hmac (providers-wave2.md section 8)"
                ),
            ),
        )
    )

    def sample(
        self,
        *,
        delivery_id: str,
        resource: str,
        sequence: int,
        event_type: str | None,
        timestamp: int,
    ) -> samples.Sample:
        return samples.Sample.json(
            {
                "event": event_type or "meeting.started",
                "event_ts": timestamp * 1000,
                "payload": {
                    "account_id": "AAAAAABBBB",
                    "object": {
                        "id": resource,
                        "uuid": delivery_id,
                        "host_id": "x1yCzABCDEfg23HiJKl4mN",
                        "topic": "Stand-up",
                        "start_time": f"{timestamp}",
                    },
                },
            }
        )

    def new_delivery_id(self, random_hex: str) -> str:
        return random_hex[:22]
