"""Adyen standard notifications: an HMAC inside each ``NotificationRequestItem``.

Source of the scheme: Adyen's "Verify HMAC signatures" (docs.adyen.com/development-resources/
webhooks/verify-hmac-signatures) and the official SDK, ``Adyen/adyen-python-api-library``
``Adyen/util.py`` (``generate_notification_sig``, ``is_valid_hmac_notification``; published
vector from ``test/UtilTest.py``). Retries: three immediate retries, then a retry queue for up
to 30 days; the endpoint must answer within 10 s (docs.adyen.com webhooks, troubleshoot).

One POST carries ``notificationItems``, an array of ``{"NotificationRequestItem": {...}}``;
each item is its own delivery (``batch_path``) and carries its own signature in
``additionalData.hmacSignature``: the base64 HMAC-SHA256, keyed with the **hex-decoded** HMAC
key, of ``pspReference:originalReference:merchantAccountCode:merchantReference:value:currency:
eventCode:success`` (``value`` and ``currency`` from ``amount``; an absent field is empty).
:meth:`Adyen.verify` verifies **every** item before the request is split: one item that does
not verify (or carries no signature) makes the whole POST 401, so Adyen retries it and a forged
item can never ride along with genuine ones. The pipeline answers ``[accepted]``
(``text/plain``), the body Adyen's older integrations look for (a 2xx suffices for current
ones; the recalled ``[accepted]`` requirement is UNVERIFIED).

What is signed: those eight fields of each item, so the delivery id
``pspReference:eventCode:success`` and the event type ``eventCode`` are signed (a colon is
refused in every signed field but ``merchantReference``, so the unescaped join cannot be re-cut
into other values: :func:`signing_string`). What is **not**
signed: the body bytes, ``eventDate``, ``reason``, ``paymentMethod``, ``operations``, the rest
of ``additionalData``, the envelope's ``live`` flag, and every header: a captured item can be
resent with those changed and still verifies (the body-consistency check counts one id arriving
with two bodies). There is no timestamp. No ordering fields by default (``eventDate`` is
unsigned). Banking and Management API webhooks sign the raw body in an ``HmacSignature`` header
instead: provider ``adyen-banking`` (:mod:`webhook_pipeline.providers.builtin.adyen_banking`).
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Sequence
from typing import Any

from webhook_pipeline.errors import ConfigurationError, VerificationError
from webhook_pipeline.fields import FieldLocation
from webhook_pipeline.providers.crypto import decode_base64, hmac_digest, match_secrets
from webhook_pipeline.providers.inline import InlineCredentialProvider
from webhook_pipeline.providers.json_body import json_object
from webhook_pipeline.providers.model import (
    DAY,
    Answer,
    Defaults,
    LazyVectors,
    Signs,
    Verified,
    samples,
)
from webhook_pipeline.providers.registry import register
from webhook_pipeline.webhook_request import WebhookRequest

ITEM = "NotificationRequestItem"
ITEMS = "notificationItems"
#: The signed fields of an item, in the order they are joined with ``":"``.
SIGNED_FIELDS = (
    "pspReference",
    "originalReference",
    "merchantAccountCode",
    "merchantReference",
    "amount.value",
    "amount.currency",
    "eventCode",
    "success",
)
ACCEPTED = "[accepted]"

_VECTOR_KEY = "44782DEF547AAA06C910C43932B1EB0C71FC68D9D0C057550C48EC2ACF6BA056"
_VECTOR_BODY = (
    b'{"live":"false","notificationItems":[{"NotificationRequestItem":{"additionalData":'
    b'{"hmacSignature":"coqCmt/IZ4E3CzPvMY8zTjQVL5hYJUiBRg8UU+iCWo0="},"amount":'
    b'{"currency":"EUR","value":1130},"eventCode":"AUTHORISATION","eventDate":'
    b'"2014-08-06T13:35:52+02:00","merchantAccountCode":"TestMerchant","merchantReference":'
    b'"TestPayment-1407325143704","originalReference":"","paymentMethod":"visa",'
    b'"pspReference":"7914073381342284","reason":"","success":"true"}}]}'
)


def signing_string(item: Any) -> bytes:
    """The string an item's ``hmacSignature`` covers (UTF-8).

    The fields are joined with ``":"`` unescaped (as Adyen signs them), so a captured item
    could be re-cut at a colon (``pspReference "P"`` + ``originalReference ""`` read as
    ``pspReference "P:"``...) into other field values, another delivery id among them, under the
    same signature. Only ``merchantReference`` (the merchant's own text) may hold a colon: every
    other signed field is colon-free in what Adyen sends, and with those seven colon-free the
    string splits back into fields one way only.

    Raises
    ------
    VerificationError
        ``signature_malformed``: a signed field has a type Adyen never sends (text fields are
        strings, ``amount.value`` an integer), or a colon in a field other than
        ``merchantReference``; either would make the split into fields ambiguous.
    """
    amount = item.get("amount")
    if amount is not None and not isinstance(amount, dict):
        raise VerificationError("signature_malformed", "amount is not an object")
    parts = []
    for name in SIGNED_FIELDS:
        value = (amount or {}).get(name[7:]) if name.startswith("amount.") else item.get(name)
        if value is None:
            parts.append("")
        elif name == "amount.value" and isinstance(value, int) and not isinstance(value, bool):
            parts.append(str(value))
        elif isinstance(value, str) and name != "amount.value":
            if ":" in value and name != "merchantReference":
                raise VerificationError("signature_malformed", f"{name} holds a colon")
            parts.append(value)
        else:
            raise VerificationError("signature_malformed", f"{name} has an unexpected type")
    return ":".join(parts).encode("utf-8")


def notification_items(body: bytes) -> list[dict[str, Any]]:
    """The ``NotificationRequestItem`` objects of a body, in order.

    Raises
    ------
    VerificationError
        ``signature_missing`` (not JSON, or no items: nothing signed to verify),
        ``signature_malformed`` (an element that is not ``{"NotificationRequestItem": {...}}``).
    """
    document = json_object(body)
    items = document.get(ITEMS) if document is not None else None
    if not isinstance(items, list) or not items:
        raise VerificationError("signature_missing", f"no {ITEMS} to verify")
    out = []
    for element in items:
        item = element.get(ITEM) if isinstance(element, dict) else None
        if not isinstance(item, dict):
            raise VerificationError("signature_malformed", f"an element has no {ITEM} object")
        out.append(item)
    return out


def item_signature(item: dict[str, Any]) -> bytes:
    """The decoded ``additionalData.hmacSignature`` of an item.

    Raises
    ------
    VerificationError
        ``signature_missing`` (absent or empty), ``signature_malformed`` (not base64 of 32
        bytes).
    """
    additional = item.get("additionalData")
    value = additional.get("hmacSignature") if isinstance(additional, dict) else None
    if value is None or value == "":
        raise VerificationError("signature_missing", "an item has no hmacSignature")
    digest = decode_base64(value) if isinstance(value, str) and value.isascii() else None
    if digest is None or len(digest) != 32:
        raise VerificationError("signature_malformed", "hmacSignature is not base64 of 32 bytes")
    return digest


def hmac_key(secret: str) -> bytes:
    """The key bytes of an HMAC key as the Customer Area shows it (hex, decoded), as
    ``Adyen.util`` uses it (``binascii.a2b_hex``)."""
    return binascii.unhexlify(secret)


def validate_hmac_key(secret: str) -> None:
    """An HMAC key as the Customer Area shows it: hex, 32 bytes or more (64 hex digits).

    Raises
    ------
    ConfigurationError
        Empty, not hex, an odd number of digits, or shorter than 32 bytes.
    """
    if not secret:
        raise ConfigurationError("the secret is empty")
    try:
        key = hmac_key(secret)
    except (binascii.Error, ValueError):
        raise ConfigurationError("the Adyen HMAC key is not hex") from None
    if len(key) < 32:
        raise ConfigurationError("the Adyen HMAC key is shorter than 32 bytes (64 hex)")


def _matching_key(secrets: Sequence[str], signed: bytes, digest: bytes) -> int:
    return match_secrets(secrets, lambda secret: hmac_digest(hmac_key(secret), signed), [digest])


@register
class Adyen(InlineCredentialProvider):
    """Adyen's per-item HMAC (see the module docstring)."""

    name = "adyen"
    title = "Adyen"
    reference = (
        "docs.adyen.com/development-resources/webhooks/verify-hmac-signatures; "
        "Adyen/adyen-python-api-library Adyen/util.py"
    )
    signs = Signs(
        id="body pspReference:eventCode:success of each item, inside its hmacSignature",
        timestamp=None,
        body=False,
        body_fields=tuple(f"{ITEM}.{name}" for name in SIGNED_FIELDS),
        note="only pspReference, originalReference, merchantAccountCode, merchantReference, "
        "amount, eventCode and success of each item are signed; eventDate, reason, "
        "paymentMethod, the rest of additionalData, live and every header are not signed",
    )
    defaults = Defaults(
        delivery_id=FieldLocation(
            body=[f"{ITEM}.pspReference", f"{ITEM}.eventCode", f"{ITEM}.success"]
        ),
        event_type=FieldLocation(body=f"{ITEM}.eventCode"),
    )
    retry_horizon_seconds = 30 * DAY
    retry_horizon_reference = (
        "docs.adyen.com webhooks: 3 immediate retries, then a retry queue for up to 30 days"
    )
    # No documented maximum of items per POST; bounded by MAX_BODY_BYTES.
    batch_path = ITEMS
    signature_field = f"{ITEM}.additionalData.hmacSignature"
    dev_secret = "00112233445566778899AABBCCDDEEFF00112233445566778899AABBCCDDEEFF"
    vectors = LazyVectors(
        lambda: (
            samples.Vector(
                secret=_VECTOR_KEY,
                headers={"content-type": "application/json"},
                body=_VECTOR_BODY,
                now=0,
                origin="published",
                reference="Adyen/adyen-python-api-library test/UtilTest.py (the item of "
                "generate_notification_sig, in a notification body)",
            ),
        )
    )

    def validate_secret(self, secret: str) -> None:
        """An HMAC key as the Customer Area shows it (:func:`validate_hmac_key`)."""
        validate_hmac_key(secret)

    def verify(self, request: WebhookRequest, secrets: Sequence[str], now: float) -> Verified:
        """Verify every item of a notification (``now`` is unused: nothing is timestamped).

        Returns
        -------
        Verified
            ``secret_index``: the highest index any item needed (1 when one item was signed
            with the previous key).

        Raises
        ------
        VerificationError
            ``signature_missing`` (no items, or an item without ``hmacSignature``),
            ``signature_malformed`` (an element or a signed field of an unexpected shape, a
            signature that is not base64 of 32 bytes), ``signature_invalid`` (an item matches
            no key: the whole POST is refused).
        """
        highest = 0
        for item in notification_items(request.body):
            index = _matching_key(secrets, signing_string(item), item_signature(item))
            highest = max(highest, index)
        return Verified(secret_index=highest)

    def sign_request(
        self, body: bytes, secret: str, *, timestamp: int, delivery_id: str, url: str = ""
    ) -> samples.SignedRequest:
        """``body`` with each item's ``additionalData.hmacSignature`` set (compact JSON);
        a body that is not a notification is returned unchanged."""
        try:
            items = notification_items(body)
        except VerificationError:
            return samples.SignedRequest({}, body, url)
        document = json_object(body) or {}  # an object: its items were just read
        for item in items:
            digest = hmac_digest(hmac_key(secret), signing_string(item))
            additional = item.setdefault("additionalData", {})
            additional["hmacSignature"] = base64.b64encode(digest).decode("ascii")
        document[ITEMS] = [{ITEM: item} for item in items]
        return samples.SignedRequest({}, json.dumps(document, separators=(",", ":")).encode(), url)

    def acknowledgement(self, status: int, body: dict[str, Any]) -> Answer:
        """``[accepted]`` as ``text/plain`` (accepted and duplicate alike)."""
        return Answer(status, ACCEPTED, "text/plain")

    def sample(
        self,
        *,
        delivery_id: str,
        resource: str,
        sequence: int,
        event_type: str | None,
        timestamp: int,
    ) -> samples.Sample:
        def item(psp: str, code: str) -> dict[str, Any]:
            return {
                ITEM: {
                    "additionalData": {},
                    "amount": {"currency": "EUR", "value": 1130},
                    "eventCode": code,
                    "eventDate": "2026-01-01T00:00:00+01:00",
                    "merchantAccountCode": "TestMerchant",
                    "merchantReference": resource,
                    "originalReference": "",
                    "paymentMethod": "visa",
                    "pspReference": psp,
                    "reason": "",
                    "success": "true",
                }
            }

        code = event_type or "AUTHORISATION"
        return samples.Sample.json(
            {"live": "false", ITEMS: [item(delivery_id, code), item(delivery_id, "CAPTURE")]}
        )

    def new_delivery_id(self, random_hex: str) -> str:
        # A pspReference: 16 digits.
        return str(int(random_hex[:14], 16)).rjust(16, "0")[:16]

    def random_secret(self, entropy: bytes) -> str:
        return entropy[:32].hex().upper()
