"""Meta (WhatsApp Business, Messenger, Instagram): ``X-Hub-Signature-256: sha256=<hex>``.

Source of the scheme: Meta for Developers, Graph API "Webhooks - Getting Started" (event
notifications are signed with HMAC-SHA256 of the raw payload keyed with the app secret;
endpoint verification is a ``GET`` with ``hub.mode=subscribe``, ``hub.verify_token`` and
``hub.challenge``, answered with the challenge). The signature shape is GitHub's, which is why a
source picks its provider by endpoint, never by header.

What is signed: the body only. Meta signs no timestamp and sends no delivery id header; its
retries resend the same payload, so the delivery id defaults to the SHA-256 of the body (which
the signature covers). Retry horizon: the Graph API documents retries "with decreasing frequency
over the next 36 hours", the WhatsApp Cloud API up to 7 days; the default TTL covers the longer.
"""

from __future__ import annotations

import json

from webhook_pipeline.errors import VerificationError
from webhook_pipeline.fields import FieldLocation
from webhook_pipeline.providers.builtin.github import HEADER
from webhook_pipeline.providers.crypto import constant_time_equal
from webhook_pipeline.providers.model import (
    DAY,
    Answer,
    Defaults,
    Handshake,
    LazyVectors,
    Signs,
    samples,
)
from webhook_pipeline.providers.registry import register
from webhook_pipeline.providers.schemes import BodyHmacProvider
from webhook_pipeline.providers.vectors import github_published_vector
from webhook_pipeline.source_secrets import SourceSecret
from webhook_pipeline.webhook_request import WebhookRequest


class HubChallenge(Handshake):
    """``GET ?hub.mode=subscribe&hub.verify_token=..&hub.challenge=..``: answered with the
    challenge as text when the token equals the source's ``verify_token`` (from its secret)."""

    name = "hub.challenge"
    method = "GET"
    signed = False

    def matches(self, request: WebhookRequest) -> bool:
        # Meta's only GET is this verification; a malformed one is 401, not 405.
        return request.method == "GET"

    def answer(self, request: WebhookRequest, secret: SourceSecret) -> Answer:
        """The challenge, as ``text/plain``.

        Raises
        ------
        VerificationError
            ``handshake_invalid`` (not a subscribe request, no challenge, or no verify token
            configured) or ``verify_token_invalid`` (token mismatch).
        """
        mode = request.query.get("hub.mode")
        token = request.query.get("hub.verify_token")
        challenge = request.query.get("hub.challenge")
        if mode != "subscribe" or not challenge or token is None or not secret.verify_token:
            raise VerificationError("handshake_invalid")
        if not constant_time_equal(token.encode("utf-8"), secret.verify_token.encode("utf-8")):
            raise VerificationError("verify_token_invalid")
        return Answer(200, challenge, "text/plain; charset=utf-8")

    def sample(self, secret: SourceSecret) -> samples.HandshakeSample:
        query = {
            "hub.mode": "subscribe",
            "hub.verify_token": secret.verify_token or "",
            "hub.challenge": "1158201444",
        }
        return samples.HandshakeSample(
            "GET", query=query, headers={"user-agent": "facebookplatform/1.0"}
        )


@register
class Meta(BodyHmacProvider):
    """Meta's ``X-Hub-Signature-256`` scheme and its ``hub.challenge`` endpoint verification.

    Header shape: ``X-Hub-Signature-256: sha256=<64 hex>``; signed bytes: the raw body;
    HMAC-SHA256 hex keyed with the app secret (UTF-8). No timestamp.
    """

    name = "meta"
    title = "Meta / WhatsApp"
    reference = "developers.facebook.com Graph API Webhooks, Getting Started"
    signs = Signs(
        id=None,
        timestamp=None,
        note="no delivery id at all (the default id is the signed body's SHA-256); no timestamp",
    )
    defaults = Defaults(
        delivery_id=FieldLocation(digest="sha256"),
        event_type=FieldLocation(body="object"),
    )
    retry_horizon_seconds = 7 * DAY
    retry_horizon_reference = "Graph API: 36 h; WhatsApp Cloud API: up to 7 days"
    handshakes = (HubChallenge(),)
    signature_header = HEADER
    credential_params = ("hub.verify_token",)  # the GET challenge's, in the URL
    dev_secret = "dev-meta-app-secret-local"
    dev_verify_token = "dev-meta-verify-token"
    hmac_prefix = "sha256="
    vectors = LazyVectors(
        lambda: (
            github_published_vector(
                HEADER,
                reference="the same HMAC-SHA256 hex of the body as GitHub's published vector",
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
        message = {"id": f"wamid.{delivery_id}", "timestamp": str(timestamp)}
        change = {"field": "messages", "value": {"messages": [message]}}
        return samples.Sample.json(
            {
                "object": event_type or "whatsapp_business_account",
                "entry": [{"id": resource, "changes": [change]}],
            }
        )

    def dev_secret_value(self) -> str:
        return json.dumps({"current": self.dev_secret, "verify_token": self.dev_verify_token})
