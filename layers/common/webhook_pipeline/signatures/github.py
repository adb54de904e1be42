"""GitHub: ``X-Hub-Signature-256: sha256=<hex>`` over the raw body; no signed timestamp.

Source of the scheme: GitHub's documentation, ``github/docs``
``content/webhooks/using-webhooks/validating-webhook-deliveries.md``. Replays are only stopped by
the dedup gate on ``X-GitHub-Delivery`` (GitHub signs no timestamp).
"""

from __future__ import annotations

from collections.abc import Sequence

from webhook_pipeline.errors import VerificationError
from webhook_pipeline.http import WebhookRequest
from webhook_pipeline.signatures.base import (
    SignatureScheme,
    Verification,
    decode_hex,
    hmac_digest,
    match_secrets,
    signature_header,
)

HEADER = "X-Hub-Signature-256"
DELIVERY_HEADER = "X-GitHub-Delivery"
PREFIX = "sha256="


class GitHubScheme(SignatureScheme):
    """GitHub's ``X-Hub-Signature-256`` scheme.

    Header shape: ``X-Hub-Signature-256: sha256=<64 hex>``. Signed bytes: the raw body.
    HMAC-SHA256, hex. Key: the webhook secret as UTF-8. No timestamp
    (``Verification.timestamp`` is ``None``).
    """

    name = "github"

    def verify(self, request: WebhookRequest, secrets: Sequence[str], now: float) -> Verification:
        """Verify a GitHub delivery.

        Parameters
        ----------
        request : WebhookRequest
            Needs ``X-Hub-Signature-256`` and the raw body bytes.
        secrets : Sequence[str]
            Webhook secrets, current first.
        now : float
            Unused (no signed timestamp).

        Returns
        -------
        Verification
            ``secret_index`` of the matching secret, ``timestamp=None``.

        Raises
        ------
        VerificationError
            ``signature_missing`` (no header), ``signature_malformed`` (no ``sha256=`` prefix,
            not hex), ``signature_invalid`` (no secret matches).
        """
        value = signature_header(request, HEADER)
        digest = decode_hex(value.removeprefix(PREFIX)) if value.startswith(PREFIX) else None
        if digest is None:
            raise VerificationError("signature_malformed", f"{HEADER} is not sha256=<hex>")
        index = match_secrets(
            secrets, lambda secret: hmac_digest(secret.encode("utf-8"), request.body), [digest]
        )
        return Verification(secret_index=index)

    def sign(self, body: bytes, secret: str, *, timestamp: int, delivery_id: str) -> dict[str, str]:
        """Return ``X-Hub-Signature-256`` and ``X-GitHub-Delivery``; ``timestamp`` is unused."""
        digest = hmac_digest(secret.encode("utf-8"), body)
        return {HEADER: PREFIX + digest.hex(), DELIVERY_HEADER: delivery_id}
