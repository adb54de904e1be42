"""Adyen Banking (Balance Platform) and Management API webhooks: ``HmacSignature`` over the body.

Source of the scheme: Adyen's "Verify HMAC signatures" (docs.adyen.com/development-resources/
webhooks/secure-webhooks/verify-hmac-signatures: the webhooks other than the standard ones carry
the signature in the ``HmacSignature`` header, calculated over the whole payload) and the
official SDK, ``Adyen/adyen-python-api-library`` ``Adyen/util.py`` (``generate_payload_sig``,
``is_valid_hmac_payload``, "Use for webhooks that provide the hmacSignature in the HTTP header
(i.e. Banking, Management API)"): the base64 HMAC-SHA256 of the raw body bytes, keyed with the
**hex-decoded** HMAC key of the webhook, compared as a string (the canonical base64 spelling
only). The published vector is the SDK's ``test/UtilTest.py`` ``test_is_valid_hmac_payload``.

Payloads (docs.adyen.com API explorer, balanceplatform-, transfer-, transaction- and
management-webhooks): one event per POST, a JSON object ``{"type": "balancePlatform.transfer.
updated", "environment": "test" | "live", "data": {...}, "timestamp": <RFC 3339, when queued>}``
(Management API webhooks: ``"createdAt"`` instead of ``"timestamp"``); ``data`` is the resource
(``data.id`` for most, ``data.merchantId`` for ``merchant.*``; transfer webhooks also carry
``data.sequenceNumber``, which grows with each update of one transfer).

What is signed: the whole body, so every body field (``type``, ``environment``, ``data``,
``timestamp``, ``createdAt``) is signed. What is **not** signed: every header but the signature
itself; and nothing says when the request was sent, so no freshness is checked (``timestamp``
is when Adyen queued the event, the same on each retry for up to 30 days): a captured body can
be resent at any time, and only the dedup gate stands between it and a second delivery. Adyen
sends no event id: the default delivery id is the SHA-256 of the signed body, on the assumption
that a retry resends the same bytes (the signature is calculated when the payload is generated;
UNVERIFIED). The event type is the signed ``type``. No ordering by default, since no one field
orders every family: a source sets ``resource_key = {body = "data.id"}`` with ``sequence =
{body = "data.sequenceNumber", format = "int"}`` (transfers) or ``{body = "timestamp", format =
"iso8601"}`` (configuration webhooks), all signed. A body whose ``environment`` is not the
source's is authentic: route test and live to different sources (their HMAC keys differ).
"""

from __future__ import annotations

import base64
from collections.abc import Sequence

from webhook_pipeline.errors import VerificationError
from webhook_pipeline.fields import FieldLocation
from webhook_pipeline.providers.base import Provider
from webhook_pipeline.providers.builtin.adyen import hmac_key, validate_hmac_key
from webhook_pipeline.providers.crypto import header_digest, hmac_digest, match_secrets
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

HEADER = "HmacSignature"

_VECTOR_KEY = "44782DEF547AAA06C910C43932B1EB0C71FC68D9D0C057550C48EC2ACF6BA056"
_VECTOR_BODY = (
    b'{\n    "type": "merchant.created",\n    "environment": "test",\n    "createdAt": '
    b'"01-01-2024",\n    "data": {\n        "capabilities": {\n            '
    b'"sendToTransferInstrument": {\n                "requested": true,\n                '
    b'"requestedLevel": "notApplicable"\n            }\n        },\n        "companyId": '
    b'"YOUR_COMPANY_ID",\n        "merchantId": "YOUR_MERCHANT_ACCOUNT",\n        "status": '
    b'"PreActive"\n    }\n}'
)


@register
class AdyenBanking(Provider):
    """Adyen's Banking and Management API webhooks (see the module docstring).

    Header shape: ``HmacSignature: <44 characters of padded base64>``. Signed bytes: the raw
    body. HMAC-SHA256, base64. Key: the webhook's HMAC key, hex-decoded. No timestamp.
    """

    name = "adyen-banking"
    title = "Adyen Banking and Management webhooks"
    reference = (
        "docs.adyen.com/development-resources/webhooks/secure-webhooks/verify-hmac-signatures; "
        "Adyen/adyen-python-api-library Adyen/util.py (is_valid_hmac_payload)"
    )
    signs = Signs(
        id="none sent; the default id is the SHA-256 of the signed body",
        timestamp=None,
        note="the whole body is signed (type, environment, data, timestamp / createdAt); no "
        "header but HmacSignature is signed; no freshness: a captured body can be resent at "
        "any time",
    )
    defaults = Defaults(
        delivery_id=FieldLocation(digest="sha256"),
        event_type=FieldLocation(body="type"),
    )
    retry_horizon_seconds = 30 * DAY
    retry_horizon_reference = (
        "docs.adyen.com webhooks: a retry queue for up to 30 days (documented for the standard "
        "webhooks; assumed for these, UNVERIFIED)"
    )
    body_formats = frozenset({"json"})
    signature_header = HEADER
    dev_secret = "FFEEDDCCBBAA99887766554433221100FFEEDDCCBBAA99887766554433221100"
    vectors = LazyVectors(
        lambda: (
            samples.Vector(
                secret=_VECTOR_KEY,
                headers={HEADER: "NiqA5vsdV5etZMOaR27+GBSG4i6JeP6j1wkCM6t53vA="},
                body=_VECTOR_BODY,
                now=0,
                origin="published",
                reference="Adyen/adyen-python-api-library test/UtilTest.py "
                "(test_is_valid_hmac_payload, a merchant.created Management API webhook)",
            ),
        )
    )

    def validate_secret(self, secret: str) -> None:
        """An HMAC key as the Customer Area shows it: hex, 32 bytes or more.

        Raises
        ------
        ConfigurationError
            Empty, not hex, an odd number of digits, or shorter than 32 bytes.
        """
        validate_hmac_key(secret)

    def verify(self, request: WebhookRequest, secrets: Sequence[str], now: float) -> Verified:
        """Verify ``HmacSignature`` over the raw body (``now`` unused: nothing is timestamped).

        Raises
        ------
        VerificationError
            ``signature_missing`` (no header), ``signature_malformed`` (not the canonical
            padded base64 of 32 bytes), ``signature_invalid`` (no key matches).
        """
        digest = header_digest(request, HEADER, encoding="base64")
        if len(digest) != 32:
            raise VerificationError("signature_malformed", f"{HEADER} is not base64 of 32 bytes")
        index = match_secrets(
            secrets, lambda secret: hmac_digest(hmac_key(secret), request.body), [digest]
        )
        return Verified(secret_index=index)

    def sign(
        self, body: bytes, secret: str, *, timestamp: int, delivery_id: str, url: str = ""
    ) -> dict[str, str]:
        """``{"HmacSignature": <base64 HMAC-SHA256 of body>}`` (the hex key decoded)."""
        digest = hmac_digest(hmac_key(secret), body)
        return {HEADER: base64.b64encode(digest).decode("ascii")}

    def sample(
        self,
        *,
        delivery_id: str,
        resource: str,
        sequence: int,
        event_type: str | None,
        timestamp: int,
    ) -> samples.Sample:
        """A ``balancePlatform.transfer.updated`` event: the transfer ``resource`` at its
        ``sequenceNumber`` ``sequence``; ``delivery_id`` is the transfer's event id."""
        transfer = {
            "id": resource,
            "sequenceNumber": sequence,
            "status": "booked",
            "amount": {"currency": "EUR", "value": 1130},
            "balancePlatform": "YOUR_BALANCE_PLATFORM",
            "events": [{"id": delivery_id, "status": "booked", "type": "accounting"}],
        }
        return samples.Sample.json(
            {
                "data": transfer,
                "environment": "test",
                "timestamp": iso_utc(timestamp),
                "type": event_type or "balancePlatform.transfer.updated",
            }
        )

    def new_delivery_id(self, random_hex: str) -> str:
        # A transfer event id: 16 upper-case alphanumerics.
        return random_hex[:16].upper()

    def random_secret(self, entropy: bytes) -> str:
        return entropy[:32].hex().upper()
