"""Razorpay: ``X-Razorpay-Signature: <hex>``, the HMAC-SHA256 of the raw body.

Source of the scheme: Razorpay's "Validate and test webhooks"
(razorpay.com/docs/webhooks/validate-test) and the official SDK, ``razorpay/razorpay-python``
``razorpay/utility/utility.py`` (``Utility.verify_webhook_signature``). Retries: failed
deliveries are retried for 24 hours, after which the webhook is disabled; manual replays are
possible for 7 days and are signed with the current secret (razorpay.com/docs/webhooks
best-practices and FAQs).

What is signed: the raw body only. **Not signed**: every header, including the delivery id
``x-razorpay-event-id``, and there is no timestamp. The body carries no event id of its own
(only ``created_at`` and the entities), so the delivery id is that unsigned header: a captured
body resent under a fresh ``x-razorpay-event-id`` is a new delivery, at any time, and the source
loads with the unsigned-id warning. The gate stops repeats of one id and the body-consistency
check counts one id arriving with two bodies; a source preferring a signed id can read the
body's digest instead (``delivery_id = { digest = "sha256" }``: a resent body is then a
duplicate for the retry horizon, but two genuinely distinct events with byte-identical bodies
would be one).
"""

from __future__ import annotations

from webhook_pipeline.fields import FieldLocation
from webhook_pipeline.providers.model import DAY, Defaults, LazyVectors, Signs, samples
from webhook_pipeline.providers.registry import register
from webhook_pipeline.providers.schemes import BodyHmacProvider

HEADER = "X-Razorpay-Signature"
EVENT_ID_HEADER = "X-Razorpay-Event-Id"


@register
class Razorpay(BodyHmacProvider):
    """Razorpay's ``X-Razorpay-Signature`` scheme.

    Header shape: ``X-Razorpay-Signature: <64 lower-case hex>``, ``x-razorpay-event-id:
    <event id>`` (unsigned). Signed bytes: the raw body. HMAC-SHA256, hex. Key: the webhook
    secret chosen in the Dashboard, as UTF-8. No timestamp.
    """

    name = "razorpay"
    title = "Razorpay"
    reference = (
        "razorpay.com/docs/webhooks/validate-test; razorpay/razorpay-python "
        "razorpay/utility/utility.py (Utility.verify_webhook_signature)"
    )
    signs = Signs(
        id=None,
        timestamp=None,
        note="x-razorpay-event-id (the delivery id) and every other header are not signed; "
        "no timestamp",
    )
    defaults = Defaults(
        delivery_id=FieldLocation(header=EVENT_ID_HEADER),
        event_type=FieldLocation(body="event"),
    )
    retry_horizon_seconds = 1 * DAY
    retry_horizon_reference = (
        "razorpay.com/docs/webhooks: retried for 24 h, then the webhook is disabled "
        "(manual replays up to 7 days)"
    )
    signature_header = HEADER
    delivery_header = EVENT_ID_HEADER
    dev_secret = "dev-razorpay-webhook-secret-local"
    vectors = LazyVectors(
        lambda: (
            samples.Vector(
                secret="rzp_secret",
                headers={
                    HEADER: "e35d523d3afccebd333d6d2367b2a8775a003623a5895972a55b63cf4664c7c3"
                },
                body=b'{"id":"evt_1","type":"test"}',
                now=0,
                origin="self",
                reference="computed from the documented recipe (providers-wave2.md; no published "
                "vector exists); accepted by razorpay Utility.verify_webhook_signature in "
                "tests/unit/providers/test_razorpay.py",
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
        payment = {"id": resource, "entity": "payment", "amount": 50000, "currency": "INR"}
        return samples.Sample.json(
            {
                "entity": "event",
                "account_id": "acc_BFQ7uQEaa7j2z7",
                "event": event_type or "payment.captured",
                "contains": ["payment"],
                "payload": {"payment": {"entity": payment}},
                "created_at": sequence,
            },
            **{EVENT_ID_HEADER: delivery_id},
        )

    def new_delivery_id(self, random_hex: str) -> str:
        return f"evt_{random_hex[:14]}"
