"""Bitbucket Cloud: ``X-Hub-Signature: sha256=<hex>``, the HMAC-SHA256 of the raw body.

Source of the scheme: support.atlassian.com "Manage webhooks" / "Secure webhooks" for Bitbucket
Cloud (a webhook with a secret carries ``X-Hub-Signature: sha256=<hex HMAC-SHA256 of the body>``),
its event payload page (``X-Event-Key``, ``X-Hook-UUID``, ``X-Request-UUID``, ``X-Attempt-Number``)
and the troubleshooting page (payloads over 256 KB are not delivered). The signature is GitHub's
computation under another header, so GitHub's published vector applies; a vector computed from the
recipe is kept beside it.

What is NOT signed: every header, including the delivery id ``X-Request-UUID`` (the same on each
attempt, ``X-Attempt-Number`` counts them) and the event key; there is no timestamp. A captured
body can be resent at any time under a new ``X-Request-UUID``: the dedup gate and the
body-consistency check are the guard.
"""

from __future__ import annotations

from webhook_pipeline.fields import FieldLocation
from webhook_pipeline.providers.model import DAY, Defaults, LazyVectors, Signs, iso_utc, samples
from webhook_pipeline.providers.registry import register
from webhook_pipeline.providers.schemes import BodyHmacProvider
from webhook_pipeline.providers.vectors import github_published_vector, recipe_vector

HEADER = "X-Hub-Signature"
DELIVERY_HEADER = "X-Request-UUID"


@register
class Bitbucket(BodyHmacProvider):
    """Bitbucket Cloud's ``X-Hub-Signature`` scheme.

    Header shape: ``X-Hub-Signature: sha256=<64 hex>``. Signed bytes: the raw body.
    HMAC-SHA256, lower-case hex. Key: the webhook secret as UTF-8. No timestamp.
    """

    name = "bitbucket"
    title = "Bitbucket Cloud"
    reference = "support.atlassian.com Bitbucket Cloud manage webhooks, event payloads"
    signs = Signs(
        id=None,
        timestamp=None,
        note="X-Request-UUID, X-Event-Key, X-Hook-UUID and X-Attempt-Number are not signed; "
        "no timestamp",
    )
    defaults = Defaults(
        delivery_id=FieldLocation(header=DELIVERY_HEADER),
        event_type=FieldLocation(header="X-Event-Key"),
        forward_headers=("x-hook-uuid", "x-attempt-number"),
    )
    retry_horizon_seconds = 1 * DAY
    retry_horizon_reference = (
        "Bitbucket retries a failed webhook a few times (X-Attempt-Number; schedule not "
        "documented: UNVERIFIED): one day"
    )
    signature_header = HEADER
    hmac_prefix = "sha256="
    delivery_header = DELIVERY_HEADER
    dev_secret = "dev-bitbucket-webhook-secret-local"
    vectors = LazyVectors(
        lambda: (
            github_published_vector(HEADER),
            recipe_vector(
                "bb_secret",
                {HEADER: "sha256=500570a40c8091944422ffc1de743afb5cfc9d0a1589fa6b21aae2e0689e687c"},
                publisher="Bitbucket",
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
                "push": {"changes": [{"new": {"name": "main", "target": {"hash": "a1b2c3"}}}]},
                "repository": {"full_name": f"team/{resource}", "updated_on": iso_utc(sequence)},
                "actor": {"display_name": "Dev"},
            },
            **{
                DELIVERY_HEADER: delivery_id,
                "X-Event-Key": event_type or "repo:push",
                "X-Hook-UUID": "{0c6b5d1e-6d7e-4c8a-9c39-1f0c5a8a6b2e}",
                "X-Attempt-Number": "1",
            },
        )
