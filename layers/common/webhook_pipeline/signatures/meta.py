"""Meta (WhatsApp Business, Messenger, Instagram): ``X-Hub-Signature-256: sha256=<hex>``.

Source of the scheme: Meta for Developers, Graph API "Webhooks - Getting Started" (event
notifications are signed with HMAC-SHA256 of the raw payload keyed with the app secret;
endpoint verification is a ``GET`` with ``hub.mode=subscribe``, ``hub.verify_token`` and
``hub.challenge``, answered with the challenge). The signature shape is GitHub's, which is why a
source picks its scheme by endpoint, never by header. Meta signs no timestamp and gives no
delivery id header: the example source deduplicates on the SHA-256 of the body (Meta retries
send the same payload).
"""

from __future__ import annotations

from webhook_pipeline.errors import VerificationError
from webhook_pipeline.http import WebhookRequest
from webhook_pipeline.signatures.base import constant_time_equal, hmac_digest
from webhook_pipeline.signatures.github import HEADER, PREFIX, GitHubScheme


class MetaScheme(GitHubScheme):
    """Meta's ``X-Hub-Signature-256`` scheme and its ``hub.challenge`` endpoint verification.

    Header shape: ``X-Hub-Signature-256: sha256=<64 hex>``; signed bytes: the raw body;
    HMAC-SHA256 hex keyed with the app secret (UTF-8). No timestamp.
    """

    name = "meta"

    def subscription_challenge(
        self, request: WebhookRequest, verify_token: str | None
    ) -> str | None:
        """Answer ``GET ?hub.mode=subscribe&hub.verify_token=..&hub.challenge=..``.

        Returns the ``hub.challenge`` value when the token matches the source's verify token.

        Raises
        ------
        VerificationError
            ``handshake_invalid`` (not a subscribe request, no challenge, or no verify token
            configured) or ``verify_token_invalid`` (token mismatch).
        """
        mode = request.query.get("hub.mode")
        token = request.query.get("hub.verify_token")
        challenge = request.query.get("hub.challenge")
        if mode != "subscribe" or not challenge or token is None or not verify_token:
            raise VerificationError("handshake_invalid")
        if not constant_time_equal(token.encode("utf-8"), verify_token.encode("utf-8")):
            raise VerificationError("verify_token_invalid")
        return challenge

    def sign(self, body: bytes, secret: str, *, timestamp: int, delivery_id: str) -> dict[str, str]:
        """Return ``X-Hub-Signature-256``; ``timestamp`` and ``delivery_id`` are unused."""
        return {HEADER: PREFIX + hmac_digest(secret.encode("utf-8"), body).hex()}
