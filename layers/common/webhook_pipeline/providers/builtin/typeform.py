"""Typeform: ``Typeform-Signature: sha256=<base64>``, the HMAC-SHA256 of the raw body.

Source of the scheme: typeform.com/developers "Secure your webhooks" (HMAC-SHA256 of the raw
payload keyed with the webhook secret, base64, prefixed ``sha256=``) and "Webhooks API" (delivery
retries: ``410 Gone`` or ``404 Not Found`` disables the webhook at once; 429/408/503/423 are
retried every 2-3 minutes for 10 hours; other failures after 5, 10, 20, 60 and 120 minutes).
Typeform publishes no test vector and no official Python signer: the vector below is computed from
the recipe (self-consistency only).

What is signed: the body only; no timestamp (a captured delivery can be resent at any time: the
dedup gate and the body-consistency check are the guard). The delivery id is the body's
``event_id``, inside the signed body.
"""

from __future__ import annotations

from webhook_pipeline.fields import FieldLocation
from webhook_pipeline.providers.model import HOUR, Defaults, LazyVectors, Signs, iso_utc, samples
from webhook_pipeline.providers.registry import register
from webhook_pipeline.providers.schemes import BodyHmacProvider
from webhook_pipeline.providers.vectors import recipe_vector

HEADER = "Typeform-Signature"


@register
class Typeform(BodyHmacProvider):
    """Typeform's ``Typeform-Signature`` scheme.

    Header shape: ``Typeform-Signature: sha256=<44 characters of padded base64>``. Signed bytes:
    the raw body. HMAC-SHA256, **base64**. Key: the webhook secret as UTF-8. No timestamp.
    """

    name = "typeform"
    title = "Typeform"
    reference = "typeform.com/developers webhooks (secure your webhooks; delivery retries)"
    signs = Signs(
        id="body event_id, inside the signed body",
        timestamp=None,
        note="no timestamp: a captured delivery can be resent at any time",
    )
    defaults = Defaults(
        delivery_id=FieldLocation(body="event_id"),
        event_type=FieldLocation(body="event_type"),
    )
    retry_horizon_seconds = 10 * HOUR
    retry_horizon_reference = (
        "typeform.com/developers webhooks: 503 retried every 2-3 minutes for 10 hours"
    )
    stop_statuses = frozenset({404, 410})
    signature_header = HEADER
    hmac_prefix = "sha256="
    hmac_encoding = "base64"
    dev_secret = "dev-typeform-webhook-secret-local"
    vectors = LazyVectors(
        lambda: (
            recipe_vector(
                "tf_secret",
                {HEADER: "sha256=BUp4mLPY6tAM2dBwDJYklUVPTmSGaHdQ30F5F64+L0Q="},
                publisher="Typeform",
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
                "event_id": delivery_id,
                "event_type": event_type or "form_response",
                "form_response": {
                    "form_id": resource,
                    "token": f"tok{sequence}",
                    "submitted_at": iso_utc(timestamp),
                    "answers": [{"type": "text", "text": "hi", "field": {"id": "f1"}}],
                },
            }
        )

    def new_delivery_id(self, random_hex: str) -> str:
        return "01" + random_hex[:24].upper()
