"""GitLab: ``X-Gitlab-Token``, a plain shared token compared in constant time (no signature).

Source of the scheme: docs.gitlab.com "Webhooks" (user/project/integrations/webhooks: the secret
token is sent as is in ``X-Gitlab-Token``; ``X-Gitlab-Event``, ``X-Gitlab-Event-UUID``,
``X-Gitlab-Webhook-UUID``; ``Idempotency-Key`` is the same on every retry of one event:
gitlab-org/gitlab merge request 160952, issue 388692). GitLab's Standard Webhooks signing (merge
request 230944, behind a feature flag) is not what this provider reads: a source of those
deliveries uses ``standard-webhooks``.

What is NOT signed: everything. The token proves the sender knows the secret, nothing more: the
body is not signed (anyone who sees one delivery, token included, can send any body), there is no
timestamp, and the delivery id ``Idempotency-Key`` is an unsigned header. The dedup gate and the
body-consistency check are the only guard against a resent or altered body; use HTTPS only.
"""

from __future__ import annotations

from collections.abc import Sequence

from webhook_pipeline.fields import FieldLocation
from webhook_pipeline.providers.base import Provider
from webhook_pipeline.providers.crypto import match_token, signature_header
from webhook_pipeline.providers.model import (
    DAY,
    Defaults,
    LazyVectors,
    Signs,
    Verified,
    iso_utc,
    samples,
)
from webhook_pipeline.providers.registry import register
from webhook_pipeline.webhook_request import WebhookRequest

HEADER = "X-Gitlab-Token"
DELIVERY_HEADER = "Idempotency-Key"


@register
class GitLab(Provider):
    """GitLab's ``X-Gitlab-Token``: the configured secret token, sent as is.

    Header shape: ``X-Gitlab-Token: <token>``; compared byte for byte (UTF-8) in constant time
    against the current and previous secret. No signature, no timestamp.
    """

    name = "gitlab"
    title = "GitLab"
    reference = "docs.gitlab.com user/project/integrations/webhooks; gitlab-org/gitlab MR 160952"
    signs = Signs(
        id=None,
        timestamp=None,
        body=False,
        note="no signature: a shared token; the body, Idempotency-Key and every other header "
        "are not signed; no timestamp",
    )
    defaults = Defaults(
        delivery_id=FieldLocation(header=DELIVERY_HEADER),
        event_type=FieldLocation(header="X-Gitlab-Event"),
        forward_headers=("x-gitlab-event-uuid", "x-gitlab-webhook-uuid", "x-gitlab-instance"),
    )
    retry_horizon_seconds = 2 * DAY
    retry_horizon_reference = (
        "GitLab resends a failed request from the webhook's request history, kept 2 days, "
        "with the same Idempotency-Key (recalled: UNVERIFIED)"
    )
    signature_header = HEADER
    dev_secret = "dev-gitlab-secret-token-local"
    vectors = LazyVectors(
        lambda: (
            samples.Vector(
                secret="gl_token_123",
                headers={
                    HEADER: "gl_token_123",
                    DELIVERY_HEADER: "908a6d9e-45fd-46c8-97e6-c4f350f219dd",
                },
                body=b'{"object_kind":"push"}',
                now=0,
                origin="self",
                reference="a plain token: no computation exists to publish a vector for "
                "(the Idempotency-Key is gitlab-org/gitlab issue 14888's example)",
            ),
        )
    )

    def verify(self, request: WebhookRequest, secrets: Sequence[str], now: float) -> Verified:
        """Compare ``X-Gitlab-Token`` with the secrets (``now`` unused).

        Raises
        ------
        VerificationError
            ``signature_missing`` (no token), ``signature_malformed`` (not ASCII),
            ``signature_invalid`` (equal to no secret).
        """
        return Verified(secret_index=match_token(secrets, signature_header(request, HEADER)))

    def sign(
        self, body: bytes, secret: str, *, timestamp: int, delivery_id: str, url: str = ""
    ) -> dict[str, str]:
        """``X-Gitlab-Token`` (the secret itself) and ``Idempotency-Key``."""
        return {HEADER: secret, DELIVERY_HEADER: delivery_id}

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
                "object_kind": "push",
                "event_name": "push",
                "ref": "refs/heads/main",
                "project": {"id": 15, "path_with_namespace": f"group/{resource}"},
                "commits": [
                    {
                        "id": "b6568db1bc1dcd7f8b4d5a946b0b91f9dacd7327",
                        "timestamp": iso_utc(sequence),
                    }
                ],
            },
            **{
                "X-Gitlab-Event": event_type or "Push Hook",
                "X-Gitlab-Event-UUID": delivery_id,
                "X-Gitlab-Instance": "https://gitlab.example.com",
            },
        )
