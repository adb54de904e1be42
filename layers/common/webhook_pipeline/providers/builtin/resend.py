"""Resend: Standard Webhooks (``v1``, ``whsec_`` secret) under Svix's ``svix-*`` headers.

Source: Resend "Verify webhooks requests" and "Retries and replays"
(resend.com/docs/webhooks/verify-webhooks-requests, .../retries-and-replays): Resend delivers
through Svix (``svix-id``, ``svix-timestamp``, ``svix-signature``); ``resend-node``
``webhooks.verify`` (resend/resend-node#636) verifies with Svix's library. Everything about the
scheme is the Standard Webhooks provider's
(:class:`~webhook_pipeline.providers.builtin.standard_webhooks.StandardWebhooks`).

Ordering: none by default. Email events (``email.sent``, ``email.delivered``, ``email.opened``...)
are a stream about one email (``data.email_id``) rather than its states, and contact and domain
events carry another id (``data.id``): a default resource key would be missing from some.
"""

from __future__ import annotations

import base64

from webhook_pipeline.fields import FieldLocation
from webhook_pipeline.providers.builtin.clerk import SvixDelivered
from webhook_pipeline.providers.model import Defaults, iso_utc, samples
from webhook_pipeline.providers.registry import register


@register
class Resend(SvixDelivered):
    """Resend's webhooks: Standard Webhooks ``v1`` as Svix sends it."""

    name = "resend"
    title = "Resend"
    reference = (
        "resend.com/docs/webhooks verify-webhooks-requests and retries-and-replays; "
        "the Standard Webhooks provider"
    )
    defaults = Defaults(
        delivery_id=FieldLocation(signed="id"),
        event_type=FieldLocation(body="type"),
    )
    retry_horizon_reference = (
        "resend.com/docs/webhooks/retries-and-replays: 0, 5 s, 5 min, 30 min, 2 h, 5 h, 10 h, "
        "10 h (about 27.6 h)"
    )
    dev_secret = "whsec_" + base64.b64encode(b"dev-resend-webhook-signing-secret").decode()

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
                "type": event_type or "email.delivered",
                "created_at": iso_utc(timestamp),
                "data": {
                    "email_id": resource,
                    "from": "Acme <onboarding@resend.dev>",
                    "to": ["delivered@resend.dev"],
                    "subject": "Sending this example",
                    "created_at": iso_utc(sequence),
                },
            }
        )
