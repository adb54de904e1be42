"""Jira Cloud (admin webhooks): ``X-Hub-Signature: sha256=<hex>`` when a secret is set.

Source of the scheme: developer.atlassian.com "Jira Cloud platform: Webhooks" (a webhook
registered with a secret carries ``X-Hub-Signature: sha256=<hex HMAC-SHA256 of the body>``; every
delivery carries ``X-Atlassian-Webhook-Identifier``, the same on each retry, with
``X-Atlassian-Webhook-Retry`` counting retries and ``X-Atlassian-Webhook-Flow`` naming the flow:
``Primary`` within about 30 s, ``Secondary`` within about 15 minutes). The signature is GitHub's
computation under another header: GitHub's published vector applies. Webhooks of OAuth or Connect
apps carry no HMAC (Connect signs a JWT instead): a source of those cannot use this provider.

What is NOT signed: every header, including the delivery id ``X-Atlassian-Webhook-Identifier``;
there is no timestamp. A captured body can be resent at any time under a new identifier: the dedup
gate and the body-consistency check are the guard.
"""

from __future__ import annotations

from webhook_pipeline.fields import FieldLocation
from webhook_pipeline.providers.model import DAY, Defaults, LazyVectors, Signs, samples
from webhook_pipeline.providers.registry import register
from webhook_pipeline.providers.schemes import BodyHmacProvider
from webhook_pipeline.providers.vectors import github_published_vector

HEADER = "X-Hub-Signature"
DELIVERY_HEADER = "X-Atlassian-Webhook-Identifier"


@register
class Jira(BodyHmacProvider):
    """Jira Cloud's ``X-Hub-Signature`` scheme.

    Header shape: ``X-Hub-Signature: sha256=<64 hex>``. Signed bytes: the raw body.
    HMAC-SHA256, lower-case hex. Key: the webhook secret as UTF-8. No timestamp.
    """

    name = "jira"
    title = "Jira Cloud"
    reference = "developer.atlassian.com Jira Cloud platform webhooks (secret, headers, retries)"
    signs = Signs(
        id=None,
        timestamp=None,
        note="X-Atlassian-Webhook-Identifier, -Retry and -Flow are not signed; no timestamp",
    )
    defaults = Defaults(
        delivery_id=FieldLocation(header=DELIVERY_HEADER),
        event_type=FieldLocation(body="webhookEvent"),
        forward_headers=("x-atlassian-webhook-retry", "x-atlassian-webhook-flow"),
    )
    retry_horizon_seconds = 1 * DAY
    retry_horizon_reference = (
        "Atlassian: retries counted by X-Atlassian-Webhook-Retry, Secondary flow within about "
        "15 minutes (the full schedule was not re-read: UNVERIFIED): one day"
    )
    signature_header = HEADER
    hmac_prefix = "sha256="
    delivery_header = DELIVERY_HEADER
    dev_secret = "dev-jira-webhook-secret-local"
    vectors = LazyVectors(lambda: (github_published_vector(HEADER),))

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
                "timestamp": sequence * 1000,
                "webhookEvent": event_type or "jira:issue_updated",
                "issue": {"id": "10001", "key": resource, "fields": {"summary": "Dev issue"}},
            },
            **{
                DELIVERY_HEADER: delivery_id,
                "X-Atlassian-Webhook-Retry": "0",
                "X-Atlassian-Webhook-Flow": "Primary",
            },
        )
