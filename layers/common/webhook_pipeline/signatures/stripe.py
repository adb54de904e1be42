"""Stripe: ``Stripe-Signature: t=<seconds>,v1=<hex>[,v1=<hex>...]``.

Source of the scheme: Stripe's webhook documentation (docs.stripe.com/webhooks, "Verify webhook
signatures manually") and the official SDK, ``stripe/stripe-python`` ``stripe/_webhook.py``
(``WebhookSignature.verify_header`` / ``generate_signature_header``).
"""

from __future__ import annotations

from collections.abc import Sequence

from webhook_pipeline.errors import TimestampError, VerificationError
from webhook_pipeline.http import WebhookRequest
from webhook_pipeline.signatures.base import (
    SignatureScheme,
    Verification,
    decode_hex,
    hmac_digest,
    match_secrets,
    parse_plain_int,
    signature_header,
)

HEADER = "Stripe-Signature"


def _parse_header(value: str) -> tuple[str | None, list[str]]:
    """Split a ``Stripe-Signature`` value into its raw ``t`` value and its ``v1`` values.

    Items are separated by ``","``; whitespace before an item is dropped (a proxy may join
    repeated headers with ``", "``), whitespace inside a value is not (``t=1700000000 `` is not
    a plain integer). ``v0`` (test-mode legacy scheme), empty items and unknown keys are
    ignored.

    Raises
    ------
    VerificationError
        ``signature_malformed`` when ``t`` appears with two different values: API Gateway HTTP
        API joins two ``Stripe-Signature`` headers with ``","`` (case C03) and such a value is
        never resolved by picking one of them.
    """
    timestamps: set[str] = set()
    signatures: list[str] = []
    for item in value.split(","):
        key, sep, val = item.lstrip(" \t").partition("=")
        if not sep:
            continue
        if key == "t":
            timestamps.add(val)
        elif key == "v1":
            signatures.append(val)
    if len(timestamps) > 1:
        raise VerificationError("signature_malformed", "Stripe-Signature carries several t values")
    return (timestamps.pop() if timestamps else None), signatures


class StripeScheme(SignatureScheme):
    """Stripe's ``Stripe-Signature`` scheme.

    Header shape: ``Stripe-Signature: t=1700000000,v1=<64 hex>[,v1=<64 hex>]`` (several ``v1``
    while Stripe rolls an endpoint secret; ``v0`` and unknown keys are ignored).
    Signed bytes: ``{t}.{body}``, where ``t`` is the header's value exactly as sent and ``body``
    the raw received bytes. HMAC-SHA256, lower-case hex. Key: the whole ``whsec_...`` string as
    UTF-8 (it is *not* base64-decoded).
    Timestamp: Unix **seconds**, a plain integer; tolerance 300 s by default, checked in both
    directions (stricter than the SDK, which only rejects old timestamps).
    """

    name = "stripe"
    default_tolerance_seconds = 300

    def verify(self, request: WebhookRequest, secrets: Sequence[str], now: float) -> Verification:
        """Verify a Stripe delivery.

        Parameters
        ----------
        request : WebhookRequest
            Needs ``Stripe-Signature`` and the raw body bytes.
        secrets : Sequence[str]
            ``whsec_...`` endpoint secrets, current first.
        now : float
            Current Unix time in seconds.

        Returns
        -------
        Verification
            ``secret_index`` of the matching secret, ``timestamp`` = ``t`` in seconds.

        Raises
        ------
        VerificationError
            ``signature_missing`` (no header), ``signature_malformed`` (two different ``t``
            values, no ``v1`` in hex), ``signature_invalid`` (no secret matches).
        TimestampError
            ``timestamp_missing`` (no ``t`` or an empty one), ``timestamp_invalid`` (``t`` not a
            plain integer), ``timestamp_stale`` /
            ``timestamp_future`` (outside the tolerance, either direction).
        """
        raw_t, v1_values = _parse_header(signature_header(request, HEADER))
        if raw_t is None:
            raise TimestampError("timestamp_missing", "Stripe-Signature has no t")
        timestamp = parse_plain_int(raw_t)
        candidates = [d for v in v1_values if (d := decode_hex(v)) is not None]
        if not candidates:
            raise VerificationError("signature_malformed", "Stripe-Signature has no hex v1")
        signed = raw_t.encode("ascii") + b"." + request.body
        index = match_secrets(
            secrets, lambda secret: hmac_digest(secret.encode("utf-8"), signed), candidates
        )
        self.check_fresh(timestamp, now)
        return Verification(secret_index=index, timestamp=timestamp)

    def sign(self, body: bytes, secret: str, *, timestamp: int, delivery_id: str) -> dict[str, str]:
        """Return ``{"Stripe-Signature": "t=<timestamp>,v1=<hex>"}``.

        ``timestamp`` is Unix seconds; ``delivery_id`` is not a header for Stripe (the event id
        is the body's ``id``) and is ignored.
        """
        t = str(int(timestamp))
        digest = hmac_digest(secret.encode("utf-8"), t.encode("ascii") + b"." + body)
        return {HEADER: f"t={t},v1={digest.hex()}"}
