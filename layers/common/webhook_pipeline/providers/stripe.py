"""Stripe: ``Stripe-Signature: t=<seconds>,v1=<hex>[,v1=<hex>...]`` over ``{t}.{body}``.

Source of the scheme: Stripe's webhook documentation (docs.stripe.com/webhooks, "Verify webhook
signatures manually") and the official SDK, ``stripe/stripe-python`` ``stripe/_webhook.py``
(``WebhookSignature.verify_header`` / ``generate_signature_header``). Retries: up to three days
with exponential backoff in live mode (docs.stripe.com/webhooks, "Retry behavior").

What is signed: the timestamp ``t`` and the raw body. The event id (``evt_...``) is the body's
``id``, so it is covered by the signature; Stripe sends no delivery-id header.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from webhook_pipeline.errors import TimestampError, VerificationError
from webhook_pipeline.fields import FieldLocation
from webhook_pipeline.http import WebhookRequest
from webhook_pipeline.providers.base import Provider
from webhook_pipeline.providers.crypto import (
    decode_hex,
    hmac_digest,
    match_secrets,
    parse_plain_int,
    signature_header,
)
from webhook_pipeline.providers.model import DAY, Defaults, Sample, Signs, Vector, Verified
from webhook_pipeline.providers.registry import register
from webhook_pipeline.providers.schemes import parse_keyed_header

HEADER = "Stripe-Signature"


def parse_header(value: str) -> tuple[str | None, list[str]]:
    """Split a ``Stripe-Signature`` value into its raw ``t`` value and its ``v1`` values.

    Items are separated by ``","``; whitespace before an item is dropped (a proxy may join
    repeated headers with ``", "``), whitespace inside a value is not (``t=1700000000 `` is not
    a plain integer). ``v0`` (test-mode legacy scheme), empty items and unknown keys are
    ignored.

    Raises
    ------
    VerificationError
        ``signature_malformed`` when ``t`` appears with two different values: API Gateway HTTP
        API joins two ``Stripe-Signature`` headers with ``","`` (case C03) and such a value is
        never resolved by picking one of them.
    """
    return parse_keyed_header(value, HEADER, "t", "v1")


@register
class Stripe(Provider):
    """Stripe's ``Stripe-Signature`` scheme.

    Header shape: ``Stripe-Signature: t=1700000000,v1=<64 hex>[,v1=<64 hex>]`` (several ``v1``
    while Stripe rolls an endpoint secret; ``v0`` and unknown keys are ignored).
    Signed bytes: ``{t}.{body}``, where ``t`` is the header's value exactly as sent and ``body``
    the raw received bytes. HMAC-SHA256, lower-case hex. Key: the whole ``whsec_...`` string as
    UTF-8 (it is *not* base64-decoded).
    Timestamp: Unix **seconds**, a plain integer; tolerance 300 s by default, checked in both
    directions (stricter than the SDK, which only rejects old timestamps).
    """

    name = "stripe"
    title = "Stripe"
    reference = "docs.stripe.com/webhooks; stripe/stripe-python stripe/_webhook.py"
    signs = Signs(
        id="body id (evt_...), inside the signed body",
        timestamp="t in Stripe-Signature, seconds",
        note="everything that matters is signed",
    )
    defaults = Defaults(
        delivery_id=FieldLocation(body="id"),
        event_type=FieldLocation(body="type"),
        resource_key=FieldLocation(body="data.object.id"),
        sequence=FieldLocation(body="created", format="int"),
    )
    default_tolerance_seconds = 300
    retry_horizon_seconds = 3 * DAY
    retry_horizon_reference = "docs.stripe.com/webhooks: retries for up to three days (live mode)"
    signature_header = HEADER
    timestamp_header = HEADER
    dev_secret = "whsec_dev_stripe_local_only"
    vectors = (
        Vector(
            secret="whsec_test_secret",
            headers={
                HEADER: "t=1700000000,"
                "v1=248a374f50f943a28b0f6ab50faf9a7e7e29b710fa26df9fb1618b9bf8ea9c9a"
            },
            body=b'{"id":"evt_1"}',
            now=1_700_000_000,
            origin="sdk",
            reference="stripe-python WebhookSignature.generate_signature_header (providers.md)",
        ),
    )

    def verify(self, request: WebhookRequest, secrets: Sequence[str], now: float) -> Verified:
        """Verify a Stripe delivery.

        Returns
        -------
        Verified
            ``secret_index`` of the matching secret, ``timestamp`` = ``t`` in seconds.

        Raises
        ------
        VerificationError
            ``signature_missing`` (no header), ``signature_malformed`` (two different ``t``
            values, no ``v1`` in hex), ``signature_invalid`` (no secret matches).
        TimestampError
            ``timestamp_missing`` (no ``t`` or an empty one), ``timestamp_invalid`` (``t`` not a
            plain integer), ``timestamp_stale`` / ``timestamp_future`` (outside the tolerance,
            either direction).
        """
        raw_t, v1_values = parse_header(signature_header(request, HEADER))
        if raw_t is None:
            raise TimestampError("timestamp_missing", "Stripe-Signature has no t")
        timestamp = parse_plain_int(raw_t)
        candidates = [d for v in v1_values if (d := decode_hex(v)) is not None]
        if not candidates:
            raise VerificationError("signature_malformed", "Stripe-Signature has no hex v1")
        signed = raw_t.encode("ascii") + b"." + request.body
        index = match_secrets(
            secrets, lambda secret: hmac_digest(secret.encode("utf-8"), signed), candidates
        )
        self.check_fresh(timestamp, now)
        return Verified(secret_index=index, timestamp=timestamp)

    def sign(
        self, body: bytes, secret: str, *, timestamp: int, delivery_id: str, url: str = ""
    ) -> dict[str, str]:
        """``{"Stripe-Signature": "t=<timestamp>,v1=<hex>"}``; the event id is in the body."""
        t = str(int(timestamp))
        digest = hmac_digest(secret.encode("utf-8"), t.encode("ascii") + b"." + body)
        return {HEADER: f"t={t},v1={digest.hex()}"}

    def sample(
        self,
        *,
        delivery_id: str,
        resource: str,
        sequence: int,
        event_type: str | None,
        timestamp: int,
    ) -> Sample:
        doc = {
            "id": delivery_id,
            "object": "event",
            "type": event_type or "customer.updated",
            "created": sequence,
            "data": {"object": {"id": resource, "object": "customer"}},
        }
        return Sample.json(doc)

    def new_delivery_id(self, random_hex: str) -> str:
        return f"evt_{random_hex[:24]}"

    def random_secret(self, entropy: bytes) -> str:
        return "whsec_" + entropy.hex()[:32]

    def restamp(self, headers: Mapping[str, str], raw: str | None) -> dict[str, str] | None:
        """``t`` replaced inside ``Stripe-Signature`` (removed for ``None``)."""
        value = next(v for k, v in headers.items() if k.lower() == HEADER.lower())
        v1 = [item for item in value.split(",") if not item.startswith("t=")]
        items = ([f"t={raw}"] if raw is not None else []) + v1
        return {
            **{k: v for k, v in headers.items() if k.lower() != HEADER.lower()},
            HEADER: ",".join(items),
        }
