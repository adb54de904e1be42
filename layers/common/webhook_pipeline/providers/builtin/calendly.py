"""Calendly: ``Calendly-Webhook-Signature: t=<seconds>,v1=<hex>`` over ``{t}.{body}``.

Source of the scheme: developer.calendly.com "Webhook signatures" (HMAC-SHA256 of
``"{t}.{raw body}"`` keyed with the webhook signing key, hex; the example rejects a ``t`` older
than three minutes) and "Webhook errors" (a failing endpoint is retried with exponential back-off
for 24 hours, then the subscription is disabled). Calendly publishes no test vector and no Python
signer: the vector below is computed from the recipe (self-consistency only).

What is signed: ``t`` and the body. The delivery id is not a header: the default is the signed
body's ``payload.uri`` (the invitee or routing-form submission the event is about) joined with the
``event`` type, stable across retries. Calendly deletes a subscription whose endpoint answers
``410 Gone``: 410 is never answered to it.
"""

from __future__ import annotations

from webhook_pipeline.fields import FieldLocation
from webhook_pipeline.providers.model import DAY, Defaults, LazyVectors, Signs, iso_utc, samples
from webhook_pipeline.providers.registry import register
from webhook_pipeline.providers.schemes import TimestampedHmacProvider
from webhook_pipeline.providers.vectors import recipe_vector

HEADER = "Calendly-Webhook-Signature"


@register
class Calendly(TimestampedHmacProvider):
    """Calendly's ``Calendly-Webhook-Signature`` scheme.

    Header shape: ``Calendly-Webhook-Signature: t=1700000000,v1=<64 hex>``. Signed bytes:
    ``{t}.{body}``. HMAC-SHA256, lower-case hex. Key: the webhook signing key as UTF-8.
    Timestamp: Unix **seconds**, a plain integer, both directions.

    Tolerance: 180 s, the three minutes of Calendly's own example (third-party copies of it
    only: UNVERIFIED at source); the ingest function verifies on arrival, so that is ample.
    """

    name = "calendly"
    title = "Calendly"
    reference = "developer.calendly.com webhook signatures; webhook errors (retries, 410)"
    signs = Signs(
        id="body payload.uri + event, inside the signed body",
        timestamp="t in Calendly-Webhook-Signature, seconds",
        note="everything that matters is signed; no delivery id header exists",
    )
    defaults = Defaults(
        delivery_id=FieldLocation(body=["event", "payload.uri"]),
        event_type=FieldLocation(body="event"),
    )
    default_tolerance_seconds = 180
    retry_horizon_seconds = 1 * DAY
    retry_horizon_reference = (
        "developer.calendly.com webhook errors: exponential back-off for 24 hours, then disabled"
    )
    stop_statuses = frozenset({410})
    signature_header = HEADER
    timestamp_header = HEADER
    signature_key = "v1"
    dev_secret = "dev-calendly-signing-key-local"
    vectors = LazyVectors(
        lambda: (
            recipe_vector(
                "cal_key",
                {
                    HEADER: "t=1700000000,"
                    "v1=9bbad6e0709f0607fd1b19bf963f23039b13113d381bfd438e28cec898ca0db6"
                },
                publisher="Calendly",
                now=1_700_000_000,
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
        """An ``invitee.created`` event; ``delivery_id`` is the invitee's id in its URI."""
        event_uri = f"https://api.calendly.com/scheduled_events/{resource}"
        return samples.Sample.json(
            {
                "created_at": iso_utc(timestamp),
                "created_by": "https://api.calendly.com/users/DEVUSER",
                "event": event_type or "invitee.created",
                "payload": {
                    "uri": f"{event_uri}/invitees/{delivery_id}",
                    "event": event_uri,
                    "status": "active",
                    "updated_at": iso_utc(sequence),
                },
            }
        )

    def new_delivery_id(self, random_hex: str) -> str:
        return random_hex[:16].upper()
