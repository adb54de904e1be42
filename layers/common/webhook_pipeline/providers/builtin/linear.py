"""Linear: ``Linear-Signature: <hex>`` over the raw body; the timestamp is the body's
``webhookTimestamp`` (milliseconds), 60 s.

Source of the scheme: linear.app/developers "Webhooks: Securing webhooks" and the official SDK,
``linear/linear`` ``packages/sdk/src/webhooks/client.ts`` (``LinearWebhookClient.verify``:
HMAC-SHA256 of the raw body keyed with the signing secret, hex, compared in constant time; then the
signed body's ``webhookTimestamp`` must be a finite number within 60 s of now, either way; the
``linear-timestamp`` header it can read is ignored, "only webhookTimestamp in the signed body is
trusted"). Linear publishes no vector and has no Python SDK; the tests run the npm ``@linear/sdk``
verifier with node on our signatures (tests/node).

What is signed: the body, and with it ``webhookTimestamp`` and the event (``type``, ``action``,
``data``). The delivery id ``Linear-Delivery`` is a header and NOT signed: the dedup gate and the
body-consistency check are the only guard against a captured body resent under a new id (within
the 60 s the timestamp allows). Every attempt carries a fresh ``webhookTimestamp`` (the SDK's own
60 s check would refuse a retry otherwise), so it is a volatile field: left out of the duplicate
body hash.
"""

from __future__ import annotations

from collections.abc import Sequence

from webhook_pipeline.errors import TimestampError
from webhook_pipeline.fields import FieldLocation
from webhook_pipeline.providers.json_body import json_object, with_field
from webhook_pipeline.providers.model import (
    HOUR,
    Defaults,
    LazyVectors,
    Signs,
    Verified,
    iso_utc,
    samples,
)
from webhook_pipeline.providers.registry import register
from webhook_pipeline.providers.schemes import BodyHmacProvider
from webhook_pipeline.webhook_request import WebhookRequest

HEADER = "Linear-Signature"
DELIVERY_HEADER = "Linear-Delivery"
TIMESTAMP_FIELD = "webhookTimestamp"


def body_timestamp_ms(body: bytes) -> int:
    """The body's ``webhookTimestamp`` (Unix milliseconds), strictly a JSON integer.

    Raises
    ------
    TimestampError
        ``timestamp_missing`` (no such field, or the body is not a JSON object),
        ``timestamp_invalid`` (a float, a string, a boolean, negative or over 19 digits).
    """
    doc = json_object(body)
    if doc is None or doc.get(TIMESTAMP_FIELD) is None:
        raise TimestampError("timestamp_missing", f"no {TIMESTAMP_FIELD} in the body")
    value = doc[TIMESTAMP_FIELD]
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < 10**19:
        raise TimestampError("timestamp_invalid", f"{TIMESTAMP_FIELD} is not an integer")
    return value


@register
class Linear(BodyHmacProvider):
    """Linear's ``Linear-Signature`` scheme.

    Header shape: ``Linear-Signature: <64 hex>``. Signed bytes: the raw body. HMAC-SHA256,
    lower-case hex. Key: the webhook signing secret as UTF-8. Timestamp: the signed body's
    ``webhookTimestamp``, Unix **milliseconds**; tolerance 60 s both ways, the SDK's figure (the
    ingest function verifies on arrival; a relay that holds deliveries longer must re-sign or
    raise the source's tolerance).
    """

    name = "linear"
    title = "Linear"
    reference = "linear.app/developers webhooks; linear/linear packages/sdk/src/webhooks/client.ts"
    signs = Signs(
        id=None,
        timestamp="body webhookTimestamp, milliseconds",
        note="Linear-Delivery and Linear-Event are not signed",
    )
    defaults = Defaults(
        delivery_id=FieldLocation(header=DELIVERY_HEADER),
        event_type=FieldLocation(body="type"),
    )
    default_tolerance_seconds = 60
    timestamp_unit = "milliseconds"
    retry_horizon_seconds = 7 * HOUR
    retry_horizon_reference = (
        "linear.app/developers webhooks: retried after 1 minute, 1 hour and 6 hours (recalled, "
        "not in providers-wave2 section 17: UNVERIFIED)"
    )
    volatile_fields = (TIMESTAMP_FIELD,)
    signature_header = HEADER
    delivery_header = DELIVERY_HEADER
    dev_secret = "lin_wh_dev_local_only_signing_secret"
    vectors = LazyVectors(
        lambda: (
            samples.Vector(
                secret="lin_wh_test",
                headers={
                    HEADER: "56245c1cfdfb8db91f259dcc1e1f9be27dd1ec52f741e1b28ac2f50c8dbc82b4"
                },
                body=b'{"id":"evt_1","type":"test","webhookTimestamp":1700000000000}',
                now=1_700_000_000,
                origin="self",
                reference="computed with stdlib hmac from the SDK's recipe; no published vector. "
                "tests/unit/providers/test_linear.py checks it with @linear/sdk "
                "LinearWebhookClient.verify under node (clock set to the vector's time)",
            ),
        )
    )

    def verify(self, request: WebhookRequest, secrets: Sequence[str], now: float) -> Verified:
        """Verify the body HMAC, then the signed ``webhookTimestamp`` against ``now`` (seconds).

        Returns
        -------
        Verified
            ``timestamp`` in seconds (the milliseconds floored), ``raw_timestamp`` in ms.

        Raises
        ------
        VerificationError
            ``signature_missing``, ``signature_malformed``, ``signature_invalid``.
        TimestampError
            ``timestamp_missing``, ``timestamp_invalid`` (see :func:`body_timestamp_ms`),
            ``timestamp_stale`` / ``timestamp_future`` (outside the tolerance).
        """
        verified = super().verify(request, secrets, now)
        ms = body_timestamp_ms(request.body)
        self.check_fresh(ms / 1000, now)
        return Verified(
            secret_index=verified.secret_index, timestamp=ms // 1000, raw_timestamp=str(ms)
        )

    def sign_body(self, body: bytes, secret: str, *, timestamp: int, delivery_id: str) -> bytes:
        """``body`` (a JSON object) with ``webhookTimestamp`` = ``timestamp`` in milliseconds,
        as Linear stamps each attempt; any other body is returned unchanged."""
        return with_field(body, TIMESTAMP_FIELD, int(timestamp) * 1000)

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
                "action": "update",
                "type": event_type or "Issue",
                "createdAt": iso_utc(timestamp),
                "data": {"id": resource, "title": "Dev issue", "updatedAt": iso_utc(sequence)},
                "url": f"https://linear.app/dev/issue/{resource}",
                "organizationId": "0b8f6a2e-2d1f-4c5e-9d7a-1c2b3a4d5e6f",
                "webhookTimestamp": timestamp * 1000,
            },
            **{DELIVERY_HEADER: delivery_id, "Linear-Event": event_type or "Issue"},
        )
