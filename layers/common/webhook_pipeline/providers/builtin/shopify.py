"""Shopify: ``X-Shopify-Hmac-Sha256: <base64>`` over the raw body; no signed timestamp.

Source of the scheme: shopify.dev "Verify webhook deliveries" (webhooks/verify-deliveries),
"Ignore duplicate webhooks" and the official ``Shopify/shopify-app-js`` ``hmac-validator.ts``.
Retries: 8 times over 4 hours, then the subscription may be removed (shopify.dev "Troubleshooting
webhooks").

What is NOT signed: every header, including the delivery id ``X-Shopify-Webhook-Id``, the topic
and ``X-Shopify-Triggered-At``; there is no signed timestamp. The body (with ``updated_at``, the
ordering value) is signed and always parsed as JSON, whatever ``Content-Type`` says (case C12), so
a resent old body is ``stale``, never applied.
"""

from __future__ import annotations

from webhook_pipeline.fields import FieldLocation
from webhook_pipeline.providers.model import HOUR, Defaults, LazyVectors, Signs, iso_utc, samples
from webhook_pipeline.providers.registry import register
from webhook_pipeline.providers.schemes import BodyHmacProvider

HEADER = "X-Shopify-Hmac-Sha256"
DELIVERY_HEADER = "X-Shopify-Webhook-Id"


@register
class Shopify(BodyHmacProvider):
    """Shopify's ``X-Shopify-Hmac-Sha256`` scheme.

    Header shape: ``X-Shopify-Hmac-Sha256: <44 characters of padded standard base64>``.
    Signed bytes: the raw body. HMAC-SHA256, **base64** (a hex digest in this header does not
    verify: case C04). Key: the app's client secret as UTF-8. No timestamp.
    """

    name = "shopify"
    title = "Shopify"
    reference = "shopify.dev webhooks/verify-deliveries; Shopify/shopify-app-js hmac-validator.ts"
    signs = Signs(
        id=None,
        timestamp=None,
        note="X-Shopify-Webhook-Id, the topic and X-Shopify-Triggered-At are not signed",
    )
    defaults = Defaults(
        delivery_id=FieldLocation(header=DELIVERY_HEADER),
        event_type=FieldLocation(header="X-Shopify-Topic"),
        resource_key=FieldLocation(body="admin_graphql_api_id"),
        sequence=FieldLocation(body="updated_at", format="iso8601"),
        forward_headers=("x-shopify-shop-domain", "x-shopify-event-id", "x-shopify-triggered-at"),
    )
    retry_horizon_seconds = 4 * HOUR
    retry_horizon_reference = "shopify.dev: 8 retries over 4 hours"
    signature_header = HEADER
    hmac_encoding = "base64"
    delivery_header = DELIVERY_HEADER
    dev_secret = "dev-shopify-client-secret-local"
    vectors = LazyVectors(
        lambda: (
            samples.Vector(
                secret="dev-shopify-client-secret-local",
                headers={HEADER: "Bz1YHp1E7rnDqCOImT9XDyG7szBscEmBTIeT/S6BRLI="},
                body=b'{"id":450789469}',
                now=0,
                origin="self",
                reference="computed with stdlib hmac from the documented recipe; "
                "self-consistency only: no published vector and no official Python signer exists",
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
                "id": 450789469,
                "admin_graphql_api_id": f"gid://shopify/Order/{resource}",
                "updated_at": iso_utc(sequence),
            },
            **{
                DELIVERY_HEADER: delivery_id,
                "X-Shopify-Topic": event_type or "orders/updated",
                "X-Shopify-Shop-Domain": "dev-shop.myshopify.com",
                "X-Shopify-Triggered-At": iso_utc(timestamp),
            },
        )
