"""Clerk: Standard Webhooks (``v1``, ``whsec_`` secret) under Svix's ``svix-*`` headers.

Source: Clerk "Webhooks overview" and "Sync Clerk data to your app with webhooks"
(clerk.com/docs/webhooks): Clerk delivers its webhooks through Svix; ``@clerk/backend``
``verifyWebhook`` maps the ``svix-*`` headers to ``webhook-*`` and verifies with the
``standardwebhooks`` library. Everything about the scheme is the Standard Webhooks provider's
(:class:`~webhook_pipeline.providers.builtin.standard_webhooks.StandardWebhooks`): the signed
``svix-id`` is the delivery id, and an unsigned ``webhook-id`` next to it is a
``signature_mismatch``.

Timestamp: ``svix-timestamp`` is Unix seconds, and may carry a decimal fraction (Clerk's own
tests send JavaScript's ``(Date.now() / 1000).toString()``, ``1700000000.437``): as the Svix
libraries do (``standardwebhooks`` ``float()`` then ``floor``, ``svix`` JavaScript
``parseInt``), the signed content holds its integer part and the freshness check its value
(:func:`~webhook_pipeline.providers.builtin.standard_webhooks.read_timestamp`, up to 6 fraction
digits).

Ordering: Clerk events carry the whole object after the change (``data``) and a ``timestamp`` in
**milliseconds**; the resource is ``data.id`` (``user_...``, ``sess_...``, ``org_...``).
"""

from __future__ import annotations

import base64

from webhook_pipeline.fields import FieldLocation
from webhook_pipeline.providers.builtin.standard_webhooks import (
    StandardWebhooks,
    as_svix,
    svix_vector,
)
from webhook_pipeline.providers.model import HOUR, Defaults, LazyVectors, Signs, samples
from webhook_pipeline.providers.registry import register


class SvixDelivered(StandardWebhooks):
    """Standard Webhooks ``v1`` as Svix delivers it for a provider (Clerk, Resend): the
    ``svix-*`` headers, Svix's published vector and retry schedule. A subclass declares its name,
    references, defaults, development secret and sample."""

    signs = Signs(
        id="svix-id header",
        timestamp="svix-timestamp header, seconds",
        note="id, timestamp and body are signed (Standard Webhooks v1 under svix-* headers)",
    )
    retry_horizon_seconds = 28 * HOUR
    signature_header = "svix-signature"
    timestamp_header = "svix-timestamp"
    vectors = LazyVectors(lambda: (svix_vector(),))

    def sign(
        self, body: bytes, secret: str, *, timestamp: int, delivery_id: str, url: str = ""
    ) -> dict[str, str]:
        """``svix-id``, ``svix-timestamp`` and ``svix-signature: v1,<base64>``."""
        return as_svix(
            super().sign(body, secret, timestamp=timestamp, delivery_id=delivery_id, url=url)
        )


@register
class Clerk(SvixDelivered):
    """Clerk's webhooks: Standard Webhooks ``v1`` as Svix sends it (``svix-id``,
    ``svix-timestamp``, ``svix-signature``)."""

    name = "clerk"
    title = "Clerk"
    reference = (
        "clerk.com/docs/webhooks (delivered by Svix); @clerk/backend verifyWebhook; "
        "the Standard Webhooks provider"
    )
    defaults = Defaults(
        delivery_id=FieldLocation(signed="id"),
        event_type=FieldLocation(body="type"),
        resource_key=FieldLocation(body="data.id"),
        sequence=FieldLocation(body="timestamp", format="int"),
    )
    retry_horizon_reference = (
        "Svix's schedule, which Clerk uses: 0, 5 s, 5 min, 30 min, 2 h, 5 h, 10 h, 10 h "
        "(about 27.6 h)"
    )
    dev_secret = "whsec_" + base64.b64encode(b"dev-clerk-webhook-signing-secret").decode()

    def sample(
        self,
        *,
        delivery_id: str,
        resource: str,
        sequence: int,
        event_type: str | None,
        timestamp: int,
    ) -> samples.Sample:
        user = {
            "id": resource,
            "object": "user",
            "first_name": "Ada",
            "email_addresses": [{"id": "idn_1", "email_address": "ada@example.com"}],
            "created_at": sequence * 1000,
            "updated_at": sequence * 1000,
        }
        return samples.Sample.json(
            {
                "data": user,
                "object": "event",
                "type": event_type or "user.updated",
                "timestamp": sequence * 1000,
                "instance_id": "ins_123",
            }
        )
