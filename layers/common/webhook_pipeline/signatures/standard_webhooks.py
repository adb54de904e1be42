"""Standard Webhooks (and Svix): ``webhook-id``, ``webhook-timestamp``, ``webhook-signature``.

Source of the scheme: the Standard Webhooks specification (standard-webhooks/standard-webhooks
``spec/standard-webhooks.md``) and its Python library ``standardwebhooks`` (``webhooks.py``);
Svix's ``svix-webhooks`` ``python/svix/webhooks.py`` for the ``svix-*`` header aliases.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Sequence

from webhook_pipeline.errors import ConfigurationError, VerificationError
from webhook_pipeline.http import WebhookRequest
from webhook_pipeline.signatures.base import (
    SignatureScheme,
    Verification,
    decode_base64,
    hmac_digest,
    match_secrets,
    signature_header,
    timestamp_header,
)

SECRET_PREFIX = "whsec_"  # noqa: S105 - the format marker, not a secret
#: Header families, tried in order; all three headers are read from the same family.
FAMILIES = (
    ("webhook-id", "webhook-timestamp", "webhook-signature"),
    ("svix-id", "svix-timestamp", "svix-signature"),
)


def decode_secret(secret: str) -> bytes:
    """Return the HMAC key of a ``whsec_<base64>`` secret (or of a bare base64 secret).

    Missing ``=`` padding is tolerated, as the ``standardwebhooks`` library does.

    Raises
    ------
    ConfigurationError
        The part after the prefix is not base64, or decodes to nothing. The secret itself is
        never put in the message.
    """
    encoded = secret.removeprefix(SECRET_PREFIX)
    encoded += "=" * (-len(encoded) % 4)
    try:
        key = base64.b64decode(encoded, validate=True)
    except (binascii.Error, ValueError) as exc:
        raise ConfigurationError("standard-webhooks secret is not whsec_<base64>") from exc
    if not key:
        raise ConfigurationError("standard-webhooks secret is empty")
    return key


def signed_content(msg_id: str, timestamp: str, body: bytes) -> bytes:
    """The bytes a Standard Webhooks sender signs: ``{id}.{timestamp}.{body}``."""
    return msg_id.encode("ascii") + b"." + timestamp.encode("ascii") + b"." + body


class StandardWebhooksScheme(SignatureScheme):
    """The Standard Webhooks symmetric scheme (``v1``), as sent by Svix and others.

    Header shapes: ``webhook-id: msg_...``, ``webhook-timestamp: <seconds>``,
    ``webhook-signature: v1,<base64> [v1,<base64> ...]`` (space-separated; other versions such
    as the asymmetric ``v1a`` are ignored). ``svix-id`` / ``svix-timestamp`` /
    ``svix-signature`` are accepted instead when no ``webhook-signature`` is present.
    Signed bytes: ``{id}.{timestamp}.{body}`` (id and timestamp exactly as sent, raw body).
    HMAC-SHA256, standard base64. Key: the base64 part of ``whsec_<base64>`` decoded.
    Timestamp: Unix **seconds**, a plain integer; tolerance 300 s by default, both directions.
    """

    name = "standard-webhooks"
    default_tolerance_seconds = 300

    def verify(self, request: WebhookRequest, secrets: Sequence[str], now: float) -> Verification:
        """Verify a Standard Webhooks / Svix delivery.

        Parameters
        ----------
        request : WebhookRequest
            Needs the id, timestamp and signature headers of one family and the raw body bytes.
        secrets : Sequence[str]
            ``whsec_<base64>`` secrets, current first.
        now : float
            Current Unix time in seconds.

        Returns
        -------
        Verification
            ``secret_index`` of the matching secret, ``timestamp`` in seconds.

        Raises
        ------
        VerificationError
            ``signature_missing`` (no signature header), ``signature_malformed`` (no id, no
            ``v1`` entry in base64), ``signature_invalid`` (no secret matches).
        TimestampError
            ``timestamp_missing``, ``timestamp_invalid`` (not a plain integer),
            ``timestamp_stale`` / ``timestamp_future`` (outside the tolerance).
        ConfigurationError
            A secret that is not ``whsec_<base64>``.
        """
        id_header, ts_header, sig_header = next(
            (family for family in FAMILIES if request.header(family[2]) is not None), FAMILIES[0]
        )
        value = signature_header(request, sig_header)
        msg_id = request.header(id_header)
        if not msg_id or not msg_id.isascii():
            raise VerificationError("signature_malformed", f"{id_header} missing or not ASCII")
        raw_ts, timestamp = timestamp_header(request, ts_header)
        candidates = []
        for entry in value.split(" "):
            version, sep, encoded = entry.partition(",")
            if sep and version == "v1" and (digest := decode_base64(encoded)) is not None:
                candidates.append(digest)
        if not candidates:
            raise VerificationError("signature_malformed", f"{sig_header} has no base64 v1 entry")
        signed = signed_content(msg_id, raw_ts, request.body)
        index = match_secrets(
            secrets, lambda secret: hmac_digest(decode_secret(secret), signed), candidates
        )
        self.check_fresh(timestamp, now)
        return Verification(secret_index=index, timestamp=timestamp)

    def sign(self, body: bytes, secret: str, *, timestamp: int, delivery_id: str) -> dict[str, str]:
        """Return ``webhook-id`` (= ``delivery_id``), ``webhook-timestamp`` (Unix seconds) and
        ``webhook-signature: v1,<base64>``.

        Raises
        ------
        ConfigurationError
            ``secret`` is not ``whsec_<base64>``.
        """
        ts = str(int(timestamp))
        digest = hmac_digest(decode_secret(secret), signed_content(delivery_id, ts, body))
        return {
            "webhook-id": delivery_id,
            "webhook-timestamp": ts,
            "webhook-signature": "v1," + base64.b64encode(digest).decode("ascii"),
        }
