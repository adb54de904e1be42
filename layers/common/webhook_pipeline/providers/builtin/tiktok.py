"""TikTok for Developers: ``TikTok-Signature: t=<seconds>,s=<hex>`` over ``{t}.{body}``.

Source of the scheme: developers.tiktok.com "Webhooks verification" (doc/webhooks-verification)
and "Webhooks overview" (doc/webhooks-overview): HMAC-SHA256 of ``"{t}.{raw body}"`` keyed with
the app's client secret, hex; at-least-once delivery, retried with exponential backoff for up to
72 hours. TikTok publishes no test vector and no official Python signer: the vector below is
computed from that recipe (self-consistency only). TikTok Shop (Partner Center) signs differently
(an ``Authorization`` header over app key + body, only third-party sources): not covered here.

What is signed: the timestamp ``t`` and the body. TikTok sends no delivery id: the default id is
the signed body's ``event``, ``create_time`` and ``user_openid`` joined (``a:b:c``), which is the
same on every retry of one event (the combination is third-party advice, UNVERIFIED).
"""

from __future__ import annotations

from webhook_pipeline.fields import FieldLocation
from webhook_pipeline.providers.model import DAY, Defaults, LazyVectors, Signs, samples
from webhook_pipeline.providers.registry import register
from webhook_pipeline.providers.schemes import TimestampedHmacProvider
from webhook_pipeline.providers.vectors import recipe_vector

HEADER = "TikTok-Signature"


@register
class TikTok(TimestampedHmacProvider):
    """TikTok's ``TikTok-Signature`` scheme.

    Header shape: ``TikTok-Signature: t=1700000000,s=<64 hex>``. Signed bytes: ``{t}.{body}``
    (``t`` exactly as sent, raw body). HMAC-SHA256, lower-case hex. Key: the client secret as
    UTF-8. Timestamp: Unix **seconds**, a plain integer, both directions.

    Tolerance: 300 s. TikTok documents no figure; the ingest function verifies on arrival
    (queue first, nothing slow before the check), so the window only has to absorb clock skew
    and the sender's own delay, and 300 s is what Stripe and Slack use for the same shape.
    """

    name = "tiktok"
    title = "TikTok"
    reference = "developers.tiktok.com doc/webhooks-verification, doc/webhooks-overview"
    signs = Signs(
        id="none sent; the default id is body event:create_time:user_openid (signed body)",
        timestamp="t in TikTok-Signature, seconds",
        note="no delivery id header exists; the id is built from signed body fields",
    )
    defaults = Defaults(
        delivery_id=FieldLocation(body=["event", "create_time", "user_openid"]),
        event_type=FieldLocation(body="event"),
    )
    default_tolerance_seconds = 300
    retry_horizon_seconds = 3 * DAY
    retry_horizon_reference = "developers.tiktok.com webhooks-overview: retries for up to 72 hours"
    signature_header = HEADER
    timestamp_header = HEADER
    signature_key = "s"
    dev_secret = "dev-tiktok-client-secret-local"
    vectors = LazyVectors(
        lambda: (
            recipe_vector(
                "tt_secret",
                {
                    HEADER: "t=1700000000,"
                    "s=83f59e5ade87b1ce7d33b064549dc4d71df82a92abc7b16e2f0869eba4ff1286"
                },
                publisher="TikTok",
                now=1_700_000_000,
                section=14,
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
        """A ``video.publish.completed`` event; ``delivery_id`` becomes the user's open id."""
        return samples.Sample.json(
            {
                "client_key": "awdevclientkey01",
                "event": event_type or "video.publish.completed",
                "create_time": sequence,
                "user_openid": delivery_id,
                "content": f'{{"share_id":"video.{resource}"}}',
            }
        )

    def new_delivery_id(self, random_hex: str) -> str:
        return f"act.{random_hex[:32]}"
