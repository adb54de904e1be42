"""Google Ads lead form webhooks: ``google_key`` in the JSON body, a shared key, NOT a signature.

Source of the scheme: developers.google.com "Google Ads API: lead form webhooks" and Google Ads
Help "Use a webhook to send leads to your CRM" (each lead is POSTed as JSON with ``lead_id``,
``api_version``, ``form_id``, ``campaign_id``, ``gcl_id``, ``adgroup_id``, ``creative_id``,
``is_test``, ``user_column_data`` and ``google_key``, the key the advertiser typed into the form's
webhook settings; the API's ``WebhookDelivery.google_secret``).

What is NOT signed: everything. ``google_key`` is a shared key carried inside the body and
compared in constant time; it proves the sender knows the key, not that the body is unaltered, and
nothing says when it was sent. The delivery id ``lead_id`` is a body field and therefore unsigned
too: the dedup gate and the body-consistency check are the only guard against a resent lead. Keep
the key long and random, and the endpoint HTTPS only.
"""

from __future__ import annotations

from collections.abc import Sequence

from webhook_pipeline.errors import VerificationError
from webhook_pipeline.fields import FieldLocation
from webhook_pipeline.providers.base import Provider
from webhook_pipeline.providers.crypto import match_token
from webhook_pipeline.providers.json_body import json_object, with_field
from webhook_pipeline.providers.model import DAY, Defaults, LazyVectors, Signs, Verified, samples
from webhook_pipeline.providers.registry import register
from webhook_pipeline.webhook_request import WebhookRequest

FIELD = "google_key"


@register
class GoogleAds(Provider):
    """Google Ads lead forms: the body's ``google_key`` equals the configured key.

    Shape: a JSON object with ``"google_key": "<key>"``; compared as UTF-8 bytes in constant
    time against the current and previous key. No header, no signature, no timestamp.
    """

    name = "google-ads"
    title = "Google Ads lead forms"
    reference = "developers.google.com Google Ads API lead form webhooks; Google Ads Help"
    signs = Signs(
        id=None,
        timestamp=None,
        body=False,
        note="no signature: google_key is a shared key inside the body; the body, lead_id and "
        "every other field are not signed; no timestamp",
    )
    defaults = Defaults(delivery_id=FieldLocation(body="lead_id"))
    retry_horizon_seconds = 1 * DAY
    retry_horizon_reference = (
        "Google documents no retry schedule for lead webhooks (UNVERIFIED): one day"
    )
    signature_field = FIELD
    credential_fields = (FIELD,)
    dev_secret = "dev-google-ads-lead-key-local"
    vectors = LazyVectors(
        lambda: (
            samples.Vector(
                secret="gk_test_key",
                headers={"content-type": "application/json"},
                body=b'{"lead_id":"TeSter-123","api_version":"1.0","form_id":40000000000,'
                b'"google_key":"gk_test_key","is_test":true}',
                now=0,
                origin="self",
                reference="a shared key compared for equality: no computation exists to publish a "
                "vector for (field names from Google's sample lead)",
            ),
        )
    )

    def verify(self, request: WebhookRequest, secrets: Sequence[str], now: float) -> Verified:
        """Compare the body's ``google_key`` with the keys (``now`` unused).

        Raises
        ------
        VerificationError
            ``signature_missing`` (not a JSON object, or no ``google_key``),
            ``signature_malformed`` (``google_key`` not a string), ``signature_invalid``
            (equal to no key).
        """
        doc = json_object(request.body)
        if doc is None or doc.get(FIELD) is None or doc.get(FIELD) == "":
            raise VerificationError("signature_missing", f"no {FIELD} in a JSON object body")
        key = doc[FIELD]
        if not isinstance(key, str):
            raise VerificationError("signature_malformed", f"{FIELD} is not a string")
        try:
            return Verified(secret_index=match_token(secrets, key))
        except UnicodeEncodeError as exc:  # a lone surrogate from a "\ud800" escape
            raise VerificationError("signature_malformed", f"{FIELD} is not Unicode") from exc

    def sign(
        self, body: bytes, secret: str, *, timestamp: int, delivery_id: str, url: str = ""
    ) -> dict[str, str]:
        """No headers: the key is in the body (:meth:`sign_body`)."""
        return {}

    def sign_body(self, body: bytes, secret: str, *, timestamp: int, delivery_id: str) -> bytes:
        """``body`` (a JSON object) with ``google_key`` = ``secret``; any other body unchanged."""
        return with_field(body, FIELD, secret)

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
                "lead_id": delivery_id,
                "user_column_data": [
                    {
                        "column_name": "Full Name",
                        "string_value": "Dev Lead",
                        "column_id": "FULL_NAME",
                    },
                    {
                        "column_name": "User Email",
                        "string_value": "lead@example.com",
                        "column_id": "EMAIL",
                    },
                ],
                "api_version": "1.0",
                "form_id": 40000000000,
                "campaign_id": 20000000000,
                "gcl_id": f"gcl-{resource}",
                "adgroup_id": 20000000000,
                "creative_id": 30000000000,
                "is_test": True,
            }
        )

    def new_delivery_id(self, random_hex: str) -> str:
        return f"TeSter-{random_hex[:24]}"
