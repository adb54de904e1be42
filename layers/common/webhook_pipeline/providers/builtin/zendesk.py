"""Zendesk: ``X-Zendesk-Webhook-Signature: <base64>`` over the ISO-8601 timestamp + body.

Source of the scheme: developer.zendesk.com "Verifying webhook authenticity"
(documentation/webhooks/verifying): HMAC-SHA256 of ``X-Zendesk-Webhook-Signature-Timestamp`` +
raw body (concatenated, no separator) keyed with the webhook's signing secret, base64. Zendesk
publishes no numeric vector and no signer: the vector below is computed from that recipe
(self-consistency only).

What is signed: the timestamp header and the body. Freshness: the timestamp is signed, so it is
checked, both ways, with a 300 s tolerance (Zendesk names none; the ingest function verifies on
arrival). It is ISO-8601 as Zendesk writes it (``2024-01-01T00:00:00Z``); it is parsed strictly as
RFC 3339 (a ``T``, a zone, ASCII digits), and because it must end with its zone and the body
starts after it, the unseparated signed string cannot be re-split. NOT signed: the delivery id
``X-Zendesk-Webhook-Invocation-Id`` (name recalled, UNVERIFIED) and ``X-Zendesk-Webhook-Id``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from webhook_pipeline.fields import FieldLocation
from webhook_pipeline.providers.base import Provider
from webhook_pipeline.providers.crypto import encode_digest, header_digest, match_hmac, utf8_hmac
from webhook_pipeline.providers.model import (
    DAY,
    Defaults,
    LazyVectors,
    Signs,
    Verified,
    iso_utc,
    samples,
)
from webhook_pipeline.providers.registry import register
from webhook_pipeline.providers.schemes import format_rfc3339, parse_rfc3339
from webhook_pipeline.providers.vectors import recipe_vector
from webhook_pipeline.webhook_request import WebhookRequest

HEADER = "X-Zendesk-Webhook-Signature"
TIMESTAMP_HEADER = "X-Zendesk-Webhook-Signature-Timestamp"
DELIVERY_HEADER = "X-Zendesk-Webhook-Invocation-Id"


@register
class Zendesk(Provider):
    """Zendesk's webhook signature.

    Header shapes: ``X-Zendesk-Webhook-Signature: <44 characters of padded base64>``,
    ``X-Zendesk-Webhook-Signature-Timestamp: 2024-01-01T00:00:00Z``. Signed bytes: timestamp
    (exactly as sent) + raw body. HMAC-SHA256, **base64**. Key: the signing secret as UTF-8 (not
    base64-decoded, although it looks like base64).
    """

    name = "zendesk"
    title = "Zendesk"
    reference = "developer.zendesk.com documentation/webhooks/verifying"
    signs = Signs(
        id=None,
        timestamp="X-Zendesk-Webhook-Signature-Timestamp header, RFC 3339",
        note="X-Zendesk-Webhook-Invocation-Id and X-Zendesk-Webhook-Id are not signed",
    )
    defaults = Defaults(
        delivery_id=FieldLocation(header=DELIVERY_HEADER),
        event_type=FieldLocation(body="type"),
        forward_headers=("x-zendesk-webhook-id",),
    )
    default_tolerance_seconds = 300
    timestamp_unit = "rfc3339"
    retry_horizon_seconds = 1 * DAY
    retry_horizon_reference = (
        "Zendesk retries a few times within minutes (409, or 429/503 with a short Retry-After; "
        "recalled, UNVERIFIED): one day"
    )
    signature_header = HEADER
    timestamp_header = TIMESTAMP_HEADER
    dev_secret = "ZGV2LXplbmRlc2stc2lnbmluZy1zZWNyZXQtbG9jYWw="
    vectors = LazyVectors(
        lambda: (
            recipe_vector(
                "zd_secret",
                {
                    HEADER: "0baS1hiySsgxyKhjmppRTpTrg5GBWCv1B5hL59qfCtg=",
                    TIMESTAMP_HEADER: "2024-01-01T00:00:00Z",
                },
                publisher="Zendesk",
                now=1_704_067_200,
            ),
        )
    )

    def verify(self, request: WebhookRequest, secrets: Sequence[str], now: float) -> Verified:
        """Verify a Zendesk delivery.

        Raises
        ------
        VerificationError
            ``signature_missing``, ``signature_malformed`` (not base64), ``signature_invalid``.
        TimestampError
            ``timestamp_missing``, ``timestamp_invalid`` (not strict RFC 3339),
            ``timestamp_stale`` / ``timestamp_future``.
        """
        digest = header_digest(request, HEADER, encoding="base64")
        raw_ts = request.header(TIMESTAMP_HEADER)
        seconds = parse_rfc3339(raw_ts)  # raises for an absent or empty value
        index = match_hmac(secrets, str(raw_ts).encode("ascii") + request.body, [digest])
        self.check_fresh(seconds, now)
        return Verified(
            secret_index=index,
            timestamp=math.floor(seconds),
            signed_headers=self.signed_header_names(),
            raw_timestamp=raw_ts,
        )

    def sign(
        self, body: bytes, secret: str, *, timestamp: int, delivery_id: str, url: str = ""
    ) -> dict[str, str]:
        """The signature, its timestamp and the (unsigned) invocation id headers."""
        ts = format_rfc3339(int(timestamp))
        digest = utf8_hmac(secret, ts.encode("ascii") + body)
        return {
            HEADER: encode_digest(digest, "base64"),
            TIMESTAMP_HEADER: ts,
            DELIVERY_HEADER: delivery_id,
        }

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
                "type": event_type or "zen:event-type:ticket.status_changed",
                "account_id": 10001,
                "id": delivery_id,
                "time": iso_utc(timestamp),
                "zendesk_event_version": "2022-11-06",
                "subject": f"zen:ticket:{resource}",
                "detail": {"id": resource, "updated_at": iso_utc(sequence), "status": "OPEN"},
                "event": {"current": "OPEN", "previous": "NEW"},
            },
            **{"X-Zendesk-Webhook-Id": "01GZ5Z1Z8ZQ7K6E9J7Z6W4Y2XR"},
        )
