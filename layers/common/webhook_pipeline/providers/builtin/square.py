"""Square: ``x-square-hmacsha256-signature: <base64>`` over the notification URL + the raw body.

Source of the scheme: Square's "Verify and validate an event notification"
(developer.squareup.com/docs/webhooks/step3validate) and the official SDK,
``square/square-python-sdk`` ``square/utils/webhooks_helper.py`` (``verify_signature``;
published vectors from ``tests/integration/test_webhooks_helper.py``). Retries: Square's pages
disagree (24 h on one, 72 h on another; which is current is UNVERIFIED), and a subscription is
disabled after about three weeks of failures; the endpoint must answer within 10 s.

What is signed: the **notification URL** exactly as configured in the subscription (scheme,
host, path and query) followed by the raw body. So the delivery id (body ``event_id``), the
event type, the object and ``created_at`` are signed. Not signed: every header; there is no
signed timestamp (``created_at`` is signed but retries resend the same body for a day or more,
so it cannot bound freshness): a captured delivery can be resent at any time and is stopped only
as a duplicate of its signed ``event_id``. The URL is the one the sender called
(``request.public_url``: the source's ``public_url``, the deployment's ``PUBLIC_BASE_URL``, or
the request's own host and path), so a proxy or custom domain in front of API Gateway needs one
of the first two; a mismatch is logged with the URL reconstructed. A legacy SHA-1
``x-square-signature`` header is recalled from older integrations (UNVERIFIED) and ignored.
"""

from __future__ import annotations

import base64
from collections.abc import Sequence

from webhook_pipeline.errors import VerificationError
from webhook_pipeline.fields import FieldLocation
from webhook_pipeline.providers.base import Provider
from webhook_pipeline.providers.crypto import (
    check_printable_key,
    decode_base64,
    match_hmac,
    signature_header,
    utf8_hmac,
)
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
from webhook_pipeline.webhook_request import WebhookRequest, called_url

HEADER = "x-square-hmacsha256-signature"


@register
class Square(Provider):
    """Square's ``x-square-hmacsha256-signature`` scheme.

    Header shape: ``x-square-hmacsha256-signature: <base64 of 32 bytes>``. Signed bytes: the
    notification URL (UTF-8) followed by the raw body. HMAC-SHA256, standard base64. Key: the
    subscription's signature key as UTF-8 (not decoded). No timestamp.
    """

    name = "square"
    title = "Square"
    reference = (
        "developer.squareup.com/docs/webhooks/step3validate; square/square-python-sdk "
        "square/utils/webhooks_helper.py"
    )
    signs = Signs(
        id="body event_id, inside the signed body",
        timestamp=None,
        note="the notification URL and the body are signed; no header and no timestamp "
        "(created_at is signed but cannot bound a resend)",
    )
    defaults = Defaults(
        delivery_id=FieldLocation(body="event_id"),
        event_type=FieldLocation(body="type"),
        resource_key=FieldLocation(body="data.id"),
        sequence=FieldLocation(body="created_at", format="iso8601"),
    )
    retry_horizon_seconds = 3 * DAY
    retry_horizon_reference = (
        "developer.squareup.com webhooks: 24 h on one page, 72 h on another (UNVERIFIED which "
        "is current): the longer one"
    )
    signs_url = True
    signature_header = HEADER
    dev_secret = "dev-square-signature-key-local"
    vectors = LazyVectors(
        lambda: (
            samples.Vector(
                secret="Ibxx_5AKakO-3qeNVR61Dw",
                headers={HEADER: "GF4YkrJgGBDZ9NIYbNXBnMzqb2HoL4RW/S6vkZ9/2N4="},
                body=b'{"merchant_id":"MLEFBHHSJGVHD","type":"webhooks.test_notification",'
                b'"event_id":"ac3ac95b-f97d-458c-a6e6-18981597e05f",'
                b'"created_at":"2022-07-13T20:30:59.037339943Z",'
                b'"data":{"type":"webhooks","id":"bc368e64-01aa-407e-b46e-3231809b1129"}}',
                now=0,
                origin="published",
                reference="square/square-python-sdk tests/integration/test_webhooks_helper.py",
                url="https://webhook.site/679a4f3a-dcfa-49ee-bac5-9d0edad886b9",
            ),
            samples.Vector(
                secret="signature-key",
                headers={HEADER: "Cxt7+aTi4rKgcA0bC4g9EHdVtLSDWdqccmL5MvihU4U="},
                body=b'{"data":{"type":"webhooks","id":">id<"}}',
                now=0,
                origin="published",
                reference="square/square-python-sdk tests/integration/test_webhooks_helper.py "
                "(> and < stay raw, not \\u003e)",
                url="https://webhook.site/webhooks",
            ),
        )
    )

    def validate_secret(self, secret: str) -> None:
        """A subscription signature key, as :func:`check_printable_key` checks it."""
        super().validate_secret(secret)
        check_printable_key(secret, "Square signature key")

    def verify(self, request: WebhookRequest, secrets: Sequence[str], now: float) -> Verified:
        """Verify a Square notification against the URL the sender called (``now`` unused).

        Raises
        ------
        VerificationError
            ``signature_missing`` (no header), ``signature_malformed`` (not base64 of 32
            bytes), ``signature_invalid`` (no secret matches this URL and body).
        """
        digest = decode_base64(signature_header(request, HEADER))
        if digest is None or len(digest) != 32:
            raise VerificationError("signature_malformed", f"{HEADER} is not base64 of 32 bytes")
        signed = called_url(request).encode("utf-8") + request.body
        index = match_hmac(secrets, signed, [digest])
        return Verified(secret_index=index)

    def sign(
        self, body: bytes, secret: str, *, timestamp: int, delivery_id: str, url: str = ""
    ) -> dict[str, str]:
        """The signature over ``url`` + ``body`` (``url``: the notification URL)."""
        digest = utf8_hmac(secret, url.encode("utf-8") + body)
        return {HEADER: base64.b64encode(digest).decode("ascii")}

    def sample(
        self,
        *,
        delivery_id: str,
        resource: str,
        sequence: int,
        event_type: str | None,
        timestamp: int,
    ) -> samples.Sample:
        payment = {"id": resource, "status": "COMPLETED", "updated_at": iso_utc(sequence)}
        return samples.Sample.json(
            {
                "merchant_id": "MLEFBHHSJGVHD",
                "type": event_type or "payment.updated",
                "event_id": delivery_id,
                "created_at": iso_utc(sequence),
                "data": {"type": "payment", "id": resource, "object": {"payment": payment}},
            }
        )
