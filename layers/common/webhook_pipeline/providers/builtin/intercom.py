"""Intercom: ``X-Hub-Signature: sha1=<hex>``, HMAC-SHA1 of the raw body with the client secret.

Source of the scheme: Intercom Developer Hub "Webhooks" (developers.intercom.com/docs/webhooks:
"each notification is signed ... X-Hub-Signature ... sha1=<hex> HMAC-SHA1 of the body, keyed
with your app's client_secret") and "Webhook notifications" (the notification envelope; topics
paused after 1000 consecutive errors in 15 minutes; private apps' subscriptions suspended after
seven days of errors). No official Python SDK verifies notifications.

What is signed: the body only. The delivery id is the body's ``id`` (``notif_...``), inside the
signed body; no timestamp is signed, so a captured notification can be replayed at any time:
it is a duplicate while its done claim (the retry horizon) or its delivery record (the retention)
lasts, and after that only the resource watermark can refuse it (``stale`` when a newer event of
the resource was applied); nothing stops the first replay of a notification whose record
expired. The envelope's ``delivery_attempts``, ``delivered_at`` and ``delivery_status``
describe the delivery, not the event, and change between attempts: they are left out of the
duplicate body hash. HMAC-SHA1 is what Intercom
sends; SHA-1's collision weakness does not give a forger an HMAC key.

Ordering: none by default. ``data.item`` is the whole object after the event, so order by
``data.item.id`` and ``data.item.updated_at`` would be the natural choice, but not every topic
carries them (``ping`` does not), and a POST missing one would be 400.
"""

from __future__ import annotations

from collections.abc import Sequence

from webhook_pipeline.errors import VerificationError
from webhook_pipeline.fields import FieldLocation
from webhook_pipeline.providers.base import Provider
from webhook_pipeline.providers.crypto import (
    decode_hex,
    hmac_digest,
    match_secrets,
    signature_header,
)
from webhook_pipeline.providers.model import DAY, Defaults, LazyVectors, Signs, Verified, samples
from webhook_pipeline.providers.registry import register
from webhook_pipeline.webhook_request import WebhookRequest

HEADER = "X-Hub-Signature"
PREFIX = "sha1="


@register
class Intercom(Provider):
    """Intercom's ``X-Hub-Signature`` (SHA-1) scheme.

    Header shape: ``X-Hub-Signature: sha1=<40 lower-case hex>``; signed bytes: the raw body;
    HMAC-SHA1 keyed with the app's client secret (UTF-8). No timestamp.
    """

    name = "intercom"
    title = "Intercom"
    reference = (
        "developers.intercom.com/docs/webhooks (signed notifications) and "
        "docs/webhooks/webhook-notifications"
    )
    signs = Signs(
        id="body id (notif_...), inside the signed body",
        timestamp=None,
        note="the body is signed (HMAC-SHA1); no timestamp: a captured notification resent is a "
        "duplicate only while its claim or record lasts, then stale if its resource moved on",
    )
    defaults = Defaults(
        delivery_id=FieldLocation(body="id"),
        event_type=FieldLocation(body="topic"),
    )
    volatile_fields = ("delivery_attempts", "delivered_at", "delivery_status")
    retry_horizon_seconds = 1 * DAY
    retry_horizon_reference = (
        "no retry schedule in Intercom's docs (UNVERIFIED); topics pause 15 min after 1000 "
        "errors, private apps are suspended after 7 days of errors: 1 day covers a retry after "
        "an outage of hours"
    )
    signature_header = HEADER
    dev_secret = "dev-intercom-client-secret-local"
    vectors = LazyVectors(
        lambda: (
            samples.Vector(
                secret="ic_secret",
                headers={HEADER: "sha1=960b86c8d40780977fddc097c938bd9e6d44d96b"},
                body=b'{"id":"evt_1","type":"test"}',
                now=0,
                origin="self",
                reference=(
                    "no published vector and no official verifier: HMAC-SHA1 hex of the body "
                    "computed with stdlib hmac (providers-wave2.md section 9)"
                ),
            ),
        )
    )

    def verify(self, request: WebhookRequest, secrets: Sequence[str], now: float) -> Verified:
        """Verify an Intercom notification (``now`` unused: nothing is timestamped).

        Raises
        ------
        VerificationError
            ``signature_missing``, ``signature_malformed`` (not ``sha1=<40 hex>``),
            ``signature_invalid``.
        """
        value = signature_header(request, HEADER)
        digest = decode_hex(value.removeprefix(PREFIX)) if value.startswith(PREFIX) else None
        if digest is None or len(digest) != 20:
            raise VerificationError("signature_malformed", f"{HEADER} is not sha1=<40 hex>")
        index = match_secrets(
            secrets,
            lambda secret: hmac_digest(secret.encode("utf-8"), request.body, "sha1"),
            [digest],
        )
        return Verified(secret_index=index)

    def sign(
        self, body: bytes, secret: str, *, timestamp: int, delivery_id: str, url: str = ""
    ) -> dict[str, str]:
        """``X-Hub-Signature: sha1=<hex>``; the notification id is in the body."""
        return {HEADER: PREFIX + hmac_digest(secret.encode("utf-8"), body, "sha1").hex()}

    def sample(
        self,
        *,
        delivery_id: str,
        resource: str,
        sequence: int,
        event_type: str | None,
        timestamp: int,
    ) -> samples.Sample:
        item = {"type": "conversation", "id": resource, "created_at": sequence}
        return samples.Sample.json(
            {
                "type": "notification_event",
                "app_id": "abc123de",
                "data": {"type": "notification_event_data", "item": item},
                "links": {},
                "id": delivery_id,
                "topic": event_type or "conversation.user.created",
                "delivery_status": "pending",
                "delivery_attempts": 1,
                "delivered_at": 0,
                "first_sent_at": timestamp,
                "created_at": timestamp,
                "self": None,
            }
        )

    def new_delivery_id(self, random_hex: str) -> str:
        return f"notif_{random_hex[:8]}-{random_hex[8:12]}-{random_hex[12:16]}-{random_hex[16:28]}"
