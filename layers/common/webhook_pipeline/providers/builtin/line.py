"""LINE Messaging API: ``x-line-signature``, base64 HMAC-SHA256 of the body with the channel secret.

Source of the scheme: LINE Developers "Receiving messages (webhook)" and "Verify webhook
signature" (developers.line.biz/en/docs/messaging-api/receiving-messages/,
.../verify-webhook-signature/) and the official SDK, ``line/line-bot-sdk-python``
``linebot/v3/webhooks/..`` / ``linebot/v3/webhook.py`` (``SignatureValidator``), whose
``tests/test_signature.py`` holds the published vector.

What is signed: the body only (no timestamp header; events carry ``timestamp`` in
milliseconds). One POST carries an ``events`` array; each event is its own delivery with its
``webhookEventId`` (inside the signed body). Redelivered events (an opt-in of the channel) carry
``deliveryContext.isRedelivery: true``: that flag changes between attempts and is left out of
the duplicate body hash.

The console's "Verify" button POSTs a signed body whose ``events`` is empty: it is a handshake
here (:class:`LineVerify`), answered 200 without touching the gate, and counted.

Ordering: none by default: events are a stream of messages, not states of one resource.
"""

from __future__ import annotations

from webhook_pipeline.fields import FieldLocation
from webhook_pipeline.providers.json_body import json_object
from webhook_pipeline.providers.model import (
    DAY,
    Answer,
    Defaults,
    Handshake,
    LazyVectors,
    Signs,
    samples,
)
from webhook_pipeline.providers.registry import register
from webhook_pipeline.providers.schemes import BodyHmacProvider
from webhook_pipeline.source_secrets import SourceSecret
from webhook_pipeline.webhook_request import WebhookRequest

HEADER = "x-line-signature"


class LineVerify(Handshake):
    """The console's "Verify" request: a signed POST with ``"events": []``, answered 200.

    Source: LINE Developers console, Messaging API settings, Webhook URL "Verify" (sends a
    webhook with no events; recalled, UNVERIFIED in the docs).
    """

    name = "verify"
    method = "POST"
    signed = True

    def matches(self, request: WebhookRequest) -> bool:
        if b'"events"' not in request.body:
            return False
        doc = json_object(request.body)
        return doc is not None and doc.get("events") == []

    def answer(self, request: WebhookRequest, secret: SourceSecret) -> Answer:
        return Answer(200, {"status": "verified"})

    def sample(self, secret: SourceSecret) -> samples.HandshakeSample:
        body = {"destination": "Uxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx", "events": []}
        return samples.HandshakeSample.json(
            body, **{"content-type": "application/json; charset=utf-8"}
        )


@register
class Line(BodyHmacProvider):
    """LINE's ``x-line-signature`` scheme.

    Header shape: ``x-line-signature: <base64 of 32 bytes>``; signed bytes: the raw body;
    HMAC-SHA256 keyed with the channel secret (UTF-8). No timestamp.
    """

    name = "line"
    title = "LINE Messaging API"
    reference = (
        "developers.line.biz messaging-api verify-webhook-signature; "
        "line/line-bot-sdk-python linebot/v3/webhook.py (SignatureValidator)"
    )
    signs = Signs(
        id="per event webhookEventId, inside the signed body",
        timestamp=None,
        note="the body is signed; no timestamp header (events carry milliseconds in the body)",
    )
    defaults = Defaults(
        delivery_id=FieldLocation(body="webhookEventId"),
        event_type=FieldLocation(body="type"),
    )
    body_formats = frozenset({"json"})
    # No documented maximum of events per POST; bounded by MAX_BODY_BYTES.
    batch_path = "events"
    volatile_fields = ("deliveryContext.isRedelivery",)
    retry_horizon_seconds = 1 * DAY
    retry_horizon_reference = (
        "redelivery is an opt-in of the channel and LINE publishes no window (UNVERIFIED); "
        "1 day covers redeliveries after an outage of hours"
    )
    handshakes = (LineVerify(),)
    signature_header = HEADER
    hmac_encoding = "base64"
    hmac_digest_bytes = 32
    dev_secret = "0123456789abcdef0123456789abcdef"
    vectors = LazyVectors(
        lambda: (
            samples.Vector(
                secret="channel_secret",
                headers={HEADER: "/gg9a+LvFevTH1sd7XCQycD7tsWclCsInj7MhBHxN7k="},
                body=b"bodybodybodybody",
                now=0,
                origin="published",
                reference="line/line-bot-sdk-python tests/test_signature.py",
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
        event = {
            "type": event_type or "message",
            "message": {"type": "text", "id": str(sequence), "quoteToken": "q1", "text": "hi"},
            "webhookEventId": delivery_id,
            "deliveryContext": {"isRedelivery": False},
            "timestamp": timestamp * 1000,
            "source": {"type": "user", "userId": f"U{resource}"},
            "replyToken": "b60d432864f44d079f6d8efe86cf404b",
            "mode": "active",
        }
        return samples.Sample.json(
            {"destination": "Uxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx", "events": [event]}
        )

    def new_delivery_id(self, random_hex: str) -> str:
        """A ULID-shaped id, as LINE's ``webhookEventId`` (26 upper-case characters)."""
        return ("01" + random_hex.upper())[:26]
