"""Shopify: ``X-Shopify-Hmac-Sha256: <base64>`` over the raw body; no signed timestamp.

Source of the scheme: shopify.dev "Verify webhook deliveries" (webhooks/verify-deliveries) and the
official ``Shopify/shopify-app-js`` ``hmac-validator.ts``. Replays are only stopped by the dedup
gate on ``X-Shopify-Webhook-Id``.
"""

from __future__ import annotations

import base64
from collections.abc import Sequence

from webhook_pipeline.errors import VerificationError
from webhook_pipeline.http import WebhookRequest
from webhook_pipeline.signatures.base import (
    SignatureScheme,
    Verification,
    decode_base64,
    hmac_digest,
    match_secrets,
    signature_header,
)

HEADER = "X-Shopify-Hmac-Sha256"
DELIVERY_HEADER = "X-Shopify-Webhook-Id"


class ShopifyScheme(SignatureScheme):
    """Shopify's ``X-Shopify-Hmac-Sha256`` scheme.

    Header shape: ``X-Shopify-Hmac-Sha256: <44 characters of padded standard base64>``.
    Signed bytes: the raw body. HMAC-SHA256, **base64** (a hex digest in this header does not
    verify: case C04). Key: the app's client secret as UTF-8. No timestamp
    (``Verification.timestamp`` is ``None``).
    """

    name = "shopify"

    def verify(self, request: WebhookRequest, secrets: Sequence[str], now: float) -> Verification:
        """Verify a Shopify delivery.

        Parameters
        ----------
        request : WebhookRequest
            Needs ``X-Shopify-Hmac-Sha256`` and the raw body bytes.
        secrets : Sequence[str]
            Client secrets, current first (Shopify asks to accept old and new for >= 1 h).
        now : float
            Unused (no signed timestamp).

        Returns
        -------
        Verification
            ``secret_index`` of the matching secret, ``timestamp=None``.

        Raises
        ------
        VerificationError
            ``signature_missing`` (no header), ``signature_malformed`` (not base64),
            ``signature_invalid`` (no secret matches, including a hex digest that happens to be
            valid base64).
        """
        digest = decode_base64(signature_header(request, HEADER))
        if digest is None:
            raise VerificationError("signature_malformed", f"{HEADER} is not base64")
        index = match_secrets(
            secrets, lambda secret: hmac_digest(secret.encode("utf-8"), request.body), [digest]
        )
        return Verification(secret_index=index)

    def sign(self, body: bytes, secret: str, *, timestamp: int, delivery_id: str) -> dict[str, str]:
        """Return ``X-Shopify-Hmac-Sha256`` and ``X-Shopify-Webhook-Id`` (``timestamp`` unused)."""
        digest = hmac_digest(secret.encode("utf-8"), body)
        return {HEADER: base64.b64encode(digest).decode("ascii"), DELIVERY_HEADER: delivery_id}
