"""Sentry (integration platform): ``Sentry-Hook-Signature: <hex>``, the HMAC-SHA256 of the body.

Source of the scheme: docs.sentry.io "Integration Platform: Webhooks"
(organization/integrations/integration-platform/webhooks): HMAC-SHA256 of the raw body keyed with
the integration's client secret, hex, in ``Sentry-Hook-Signature``; ``Sentry-Hook-Resource`` names
the resource (``installation``, ``issue``, ``event_alert``...), ``Sentry-Hook-Timestamp`` the send
time and ``Request-ID`` the request. Sentry publishes no test vector and no signer for it: the
vector below is computed from the recipe (self-consistency only).

What is NOT signed: every header. ``Sentry-Hook-Timestamp`` is outside the signed bytes, so it
proves nothing about when the body was signed: freshness is NOT checked against it (an attacker
who captured a delivery would simply send a fresh value). ``Request-ID``, the default delivery id,
is unsigned too: the dedup gate and the body-consistency check are the only guard against a
captured body resent under a new id.
"""

from __future__ import annotations

from webhook_pipeline.fields import FieldLocation
from webhook_pipeline.providers.model import DAY, Defaults, LazyVectors, Signs, iso_utc, samples
from webhook_pipeline.providers.registry import register
from webhook_pipeline.providers.schemes import BodyHmacProvider
from webhook_pipeline.providers.vectors import recipe_vector

HEADER = "Sentry-Hook-Signature"
DELIVERY_HEADER = "Request-ID"
RESOURCE_HEADER = "Sentry-Hook-Resource"


@register
class Sentry(BodyHmacProvider):
    """Sentry's ``Sentry-Hook-Signature`` scheme.

    Header shape: ``Sentry-Hook-Signature: <64 hex>`` (no prefix). Signed bytes: the raw body.
    HMAC-SHA256, lower-case hex. Key: the client secret as UTF-8. No signed timestamp.
    """

    name = "sentry"
    title = "Sentry"
    reference = "docs.sentry.io organization/integrations/integration-platform/webhooks"
    signs = Signs(
        id=None,
        timestamp=None,
        note="Request-ID, Sentry-Hook-Resource and Sentry-Hook-Timestamp are not signed; "
        "the timestamp header is not checked for freshness because it is unsigned",
    )
    defaults = Defaults(
        delivery_id=FieldLocation(header=DELIVERY_HEADER),
        event_type=FieldLocation(header=RESOURCE_HEADER),
        forward_headers=("sentry-hook-timestamp",),
    )
    retry_horizon_seconds = 1 * DAY
    retry_horizon_reference = (
        "Sentry documents no retry schedule for integration webhooks (UNVERIFIED): one day"
    )
    signature_header = HEADER
    delivery_header = DELIVERY_HEADER
    dev_secret = "dev-sentry-client-secret-local"
    vectors = LazyVectors(
        lambda: (
            recipe_vector(
                "sentry_secret",
                {HEADER: "161e4584368043adf6856fd277bb7011f5ecee72653bbc8ab7429365fcc91316"},
                publisher="Sentry",
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
                "action": "created",
                "installation": {"uuid": "7a485448-a9e2-4c85-8a3c-4f44175783c9"},
                "data": {"issue": {"id": resource, "lastSeen": iso_utc(sequence)}},
                "actor": {"type": "application", "id": "sentry", "name": "Sentry"},
            },
            **{
                DELIVERY_HEADER: delivery_id,
                RESOURCE_HEADER: event_type or "issue",
                "Sentry-Hook-Timestamp": str(timestamp),
            },
        )
