"""GitHub: ``X-Hub-Signature-256: sha256=<hex>`` over the raw body; no signed timestamp.

Source of the scheme: GitHub's documentation, ``github/docs``
``content/webhooks/using-webhooks/validating-webhook-deliveries.md`` (published vector below).
Retries: GitHub does not redeliver failed deliveries automatically; a person or an app redelivers
from the hook's history (kept 3 days) with the same ``X-GitHub-Delivery``.

What is NOT signed: every header, including the delivery id ``X-GitHub-Delivery`` and the event
type ``X-GitHub-Event``; there is no signed timestamp. A captured body can therefore be resent at
any time under a new ``X-GitHub-Delivery``: the dedup gate stops repeats of one id, the
body-consistency check counts one id with two bodies, and nothing can tell a resent body under a
fresh id from a new delivery. Only the body is proven authentic.
"""

from __future__ import annotations

from collections.abc import Sequence

from webhook_pipeline.errors import VerificationError
from webhook_pipeline.fields import FieldLocation
from webhook_pipeline.http import WebhookRequest
from webhook_pipeline.providers.base import Provider
from webhook_pipeline.providers.crypto import (
    decode_hex,
    hmac_digest,
    match_secrets,
    signature_header,
)
from webhook_pipeline.providers.model import DAY, Defaults, Sample, Signs, Vector, Verified
from webhook_pipeline.providers.registry import register

HEADER = "X-Hub-Signature-256"
DELIVERY_HEADER = "X-GitHub-Delivery"
PREFIX = "sha256="


def verify_hub_signature(request: WebhookRequest, secrets: Sequence[str]) -> Verified:
    """``X-Hub-Signature-256: sha256=<lower-case hex>`` of the raw body (GitHub, Meta).

    Raises
    ------
    VerificationError
        ``signature_missing`` (no header), ``signature_malformed`` (no ``sha256=`` prefix, not
        hex), ``signature_invalid`` (no secret matches).
    """
    value = signature_header(request, HEADER)
    digest = decode_hex(value.removeprefix(PREFIX)) if value.startswith(PREFIX) else None
    if digest is None:
        raise VerificationError("signature_malformed", f"{HEADER} is not sha256=<hex>")
    index = match_secrets(
        secrets, lambda secret: hmac_digest(secret.encode("utf-8"), request.body), [digest]
    )
    return Verified(secret_index=index)


def hub_signature(body: bytes, secret: str) -> str:
    """``sha256=<hex>`` of ``body`` keyed with ``secret``."""
    return PREFIX + hmac_digest(secret.encode("utf-8"), body).hex()


@register
class GitHub(Provider):
    """GitHub's ``X-Hub-Signature-256`` scheme.

    Header shape: ``X-Hub-Signature-256: sha256=<64 hex>``. Signed bytes: the raw body.
    HMAC-SHA256, hex. Key: the webhook secret as UTF-8. No timestamp.
    """

    name = "github"
    title = "GitHub"
    reference = "github/docs content/webhooks/using-webhooks/validating-webhook-deliveries.md"
    signs = Signs(
        id=None,
        timestamp=None,
        note="X-GitHub-Delivery and X-GitHub-Event are not signed; no timestamp",
    )
    defaults = Defaults(
        delivery_id=FieldLocation(header=DELIVERY_HEADER),
        event_type=FieldLocation(header="X-GitHub-Event"),
        forward_headers=("x-github-hook-id",),
    )
    retry_horizon_seconds = 3 * DAY
    retry_horizon_reference = "manual redelivery from the hook's 3-day delivery history"
    signature_header = HEADER
    dev_secret = "dev-github-secret-local-only"
    vectors = (
        Vector(
            secret="It's a Secret to Everybody",
            headers={
                HEADER: "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17"
            },
            body=b"Hello, World!",
            now=0,
            origin="published",
            reference="github/docs validating-webhook-deliveries.md",
        ),
    )

    def verify(self, request: WebhookRequest, secrets: Sequence[str], now: float) -> Verified:
        """Verify a GitHub delivery (see :func:`verify_hub_signature`; ``now`` is unused)."""
        return verify_hub_signature(request, secrets)

    def sign(
        self, body: bytes, secret: str, *, timestamp: int, delivery_id: str, url: str = ""
    ) -> dict[str, str]:
        """``X-Hub-Signature-256`` and ``X-GitHub-Delivery`` (``timestamp`` unused)."""
        return {HEADER: hub_signature(body, secret), DELIVERY_HEADER: delivery_id}

    def sample(
        self,
        *,
        delivery_id: str,
        resource: str,
        sequence: int,
        event_type: str | None,
        timestamp: int,
    ) -> Sample:
        return Sample.json(
            {"action": "opened", "repository": {"full_name": "octo/hello"}, "sequence": sequence},
            **{
                DELIVERY_HEADER: delivery_id,
                "X-GitHub-Event": event_type or "issues",
                "X-GitHub-Hook-ID": "123456",
            },
        )
