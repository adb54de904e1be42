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

from webhook_pipeline.fields import FieldLocation
from webhook_pipeline.providers.model import DAY, Defaults, LazyVectors, Signs, samples
from webhook_pipeline.providers.registry import register
from webhook_pipeline.providers.schemes import BodyHmacProvider
from webhook_pipeline.providers.vectors import github_published_vector

HEADER = "X-Hub-Signature-256"
DELIVERY_HEADER = "X-GitHub-Delivery"


@register
class GitHub(BodyHmacProvider):
    """GitHub's ``X-Hub-Signature-256`` scheme.

    Header shape: ``X-Hub-Signature-256: sha256=<64 hex>``. Signed bytes: the raw body.
    HMAC-SHA256, lower-case hex. Key: the webhook secret as UTF-8. No timestamp. The same shape
    is Meta's (:mod:`webhook_pipeline.providers.builtin.meta`).
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
    hmac_prefix = "sha256="
    delivery_header = DELIVERY_HEADER
    vectors = LazyVectors(
        lambda: (
            github_published_vector(
                HEADER, reference="github/docs validating-webhook-deliveries.md"
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
            {"action": "opened", "repository": {"full_name": "octo/hello"}, "sequence": sequence},
            **{
                DELIVERY_HEADER: delivery_id,
                "X-GitHub-Event": event_type or "issues",
                "X-GitHub-Hook-ID": "123456",
            },
        )
