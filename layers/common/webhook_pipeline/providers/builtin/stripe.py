"""Stripe: ``Stripe-Signature: t=<seconds>,v1=<hex>[,v1=<hex>...]`` over ``{t}.{body}``.

Source of the scheme: Stripe's webhook documentation (docs.stripe.com/webhooks, "Verify webhook
signatures manually") and the official SDK, ``stripe/stripe-python`` ``stripe/_webhook.py``
(``WebhookSignature.verify_header`` / ``generate_signature_header``). Retries: up to three days
with exponential backoff in live mode (docs.stripe.com/webhooks, "Retry behavior").

What is signed: the timestamp ``t`` and the raw body. The event id (``evt_...``) is the body's
``id``, so it is covered by the signature; Stripe sends no delivery-id header.
"""

from __future__ import annotations

from webhook_pipeline.fields import FieldLocation
from webhook_pipeline.providers.model import DAY, Defaults, LazyVectors, Signs, samples
from webhook_pipeline.providers.registry import register
from webhook_pipeline.providers.schemes import TimestampedHmacProvider

HEADER = "Stripe-Signature"


@register
class Stripe(TimestampedHmacProvider):
    """Stripe's ``Stripe-Signature`` scheme.

    Header shape: ``Stripe-Signature: t=1700000000,v1=<64 hex>[,v1=<64 hex>]`` (several ``v1``
    while Stripe rolls an endpoint secret; ``v0`` and unknown keys are ignored).
    Signed bytes: ``{t}.{body}``, where ``t`` is the header's value exactly as sent and ``body``
    the raw received bytes. HMAC-SHA256, lower-case hex. Key: the whole ``whsec_...`` string as
    UTF-8 (it is *not* base64-decoded).
    Timestamp: Unix **seconds**, a plain integer; tolerance 300 s by default, checked in both
    directions (stricter than the SDK, which only rejects old timestamps).
    Items are separated by ``","``, whitespace before an item dropped (a proxy may join repeated
    headers with ``", "``); a ``t`` given twice with different values is
    ``signature_malformed``: API Gateway HTTP API joins two ``Stripe-Signature`` headers with
    ``","`` (case C03) and such a value is never resolved by picking one of them.
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
    signature_key = "v1"
    dev_secret = "whsec_dev_stripe_local_only"
    vectors = LazyVectors(
        lambda: (
            samples.Vector(
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
        doc = {
            "id": delivery_id,
            "object": "event",
            "type": event_type or "customer.updated",
            "created": sequence,
            "data": {"object": {"id": resource, "object": "customer"}},
        }
        return samples.Sample.json(doc)

    def new_delivery_id(self, random_hex: str) -> str:
        return f"evt_{random_hex[:24]}"

    def random_secret(self, entropy: bytes) -> str:
        return "whsec_" + entropy.hex()[:32]
