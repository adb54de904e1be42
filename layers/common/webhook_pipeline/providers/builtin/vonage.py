"""Vonage signed webhooks (Messages, Voice): ``Authorization: Bearer <JWT HS256>`` whose
``payload_hash`` claim is the SHA-256 of the body.

Source of the scheme: Vonage API docs "Signed webhooks" (developer.vonage.com/en/getting-started/
concepts/signing-messages and .../messages/concepts/signed-webhooks): the JWT is signed HS256
with the account's **signature secret**, and carries ``iat``, ``jti``, ``iss``, ``api_key``,
``application_id`` and ``payload_hash`` ("a SHA-256 hash of the request payload"). Official
verifier: ``Vonage/vonage-python-sdk`` ``vonage_jwt/verify_jwt.py`` (``verify_signature``),
which checks the HS256 signature only: **not** ``payload_hash`` and not the freshness of
``iat``. A token captured from one request then verifies for any body; we check both.

What is signed: the JWT (its header and claims), and through ``payload_hash`` the body. The JWT
is verified here by hand (HS256 only, strict base64url, a constant-time HMAC comparison):
another ``alg`` (``none``, ``RS256``...) is refused rather than negotiated, which is the classic
JWT pitfall. The delivery id: the body's digest (``message_uuid`` is shared by a message's
status callbacks, and ``jti`` is new on every attempt); covered by ``payload_hash``.
Ordering: none by default; a Messages API status source may set ``resource_key = { body =
"message_uuid" }`` and ``sequence = { body = "timestamp", format = "iso8601" }``.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import math
import re
import uuid
from collections.abc import Mapping, Sequence
from typing import Any

from webhook_pipeline.errors import ConfigurationError, TimestampError, VerificationError
from webhook_pipeline.fields import FieldLocation
from webhook_pipeline.providers.base import Provider
from webhook_pipeline.providers.crypto import (
    constant_time_equal,
    match_hmac,
    parse_plain_int,
    signature_header,
    utf8_hmac,
)
from webhook_pipeline.providers.json_body import json_object
from webhook_pipeline.providers.model import (
    HOUR,
    Defaults,
    LazyVectors,
    Signs,
    Verified,
    iso_utc,
    samples,
)
from webhook_pipeline.providers.registry import register
from webhook_pipeline.webhook_request import WebhookRequest

HEADER = "Authorization"
_BASE64URL = re.compile(r"[A-Za-z0-9_-]*")
_JWT_HEADER = {"alg": "HS256", "typ": "JWT"}


def b64url_decode(value: str) -> bytes | None:
    """Decode unpadded base64url strictly (the canonical encoding only), or ``None``."""
    if len(value) % 4 == 1 or not _BASE64URL.fullmatch(value):
        return None
    try:
        raw = base64.urlsafe_b64decode(value + "=" * (-len(value) % 4))
    except (binascii.Error, ValueError):
        return None
    return raw if b64url_encode(raw) == value else None


def b64url_encode(raw: bytes) -> str:
    """Unpadded base64url."""
    return base64.urlsafe_b64encode(raw).decode("ascii").rstrip("=")


def _json_part(value: str, what: str) -> dict[str, Any]:
    raw = b64url_decode(value)
    doc = json_object(raw) if raw is not None else None
    if doc is None:
        raise VerificationError("signature_malformed", f"the JWT {what} is not a JSON object")
    return doc


def parse_token(value: str) -> tuple[bytes, dict[str, Any], bytes]:
    """Split ``Bearer <JWT>`` into the signing input, the claims and the signature.

    Raises
    ------
    VerificationError
        ``signature_malformed``: not ``Bearer`` and three base64url parts, a header whose
        ``alg`` is not ``HS256``, claims that are not a JSON object.
    """
    scheme, _, token = value.partition(" ")
    parts = token.split(".") if scheme.lower() == "bearer" else []
    if len(parts) != 3:
        raise VerificationError("signature_malformed", f"{HEADER} is not Bearer <JWT>")
    header = _json_part(parts[0], "header")
    if header.get("alg") != "HS256":
        raise VerificationError("signature_malformed", "the JWT alg is not HS256")
    claims = _json_part(parts[1], "claims")
    signature = b64url_decode(parts[2])
    if signature is None or len(signature) != 32:
        raise VerificationError("signature_malformed", "the JWT signature is not HS256")
    return f"{parts[0]}.{parts[1]}".encode("ascii"), claims, signature


def issued_at(claims: Mapping[str, Any]) -> int:
    """The ``iat`` claim in Unix seconds: a JSON integer of at most 19 digits.

    Raises
    ------
    TimestampError
        ``timestamp_missing`` (absent or ``""``), ``timestamp_invalid`` (anything but a
        non-negative JSON integer).
    """
    iat = claims.get("iat")
    if iat is None or iat == "":
        raise TimestampError("timestamp_missing")
    if isinstance(iat, bool) or not isinstance(iat, int) or iat < 0:
        raise TimestampError("timestamp_invalid")
    return parse_plain_int(str(iat))


def check_expiry(exp: object, now: float) -> None:
    """Refuse a passed ``exp``. RFC 7519 makes it a NumericDate: any JSON number (``1.5e9`` and
    ``1796134571.0`` included), so a fractional one is compared as it is, never skipped.

    Raises
    ------
    TimestampError
        ``timestamp_invalid``: present but not a finite JSON number (a string, a boolean...);
        ``timestamp_stale``: earlier than ``now`` (seconds).
    """
    if exp is None:
        return
    if isinstance(exp, bool) or not isinstance(exp, int | float) or not math.isfinite(exp):
        raise TimestampError("timestamp_invalid", "the JWT's exp is not a number")
    if exp < now:
        raise TimestampError("timestamp_stale", "the JWT has expired")


@register
class Vonage(Provider):
    """Vonage's signed webhooks.

    Header shape: ``Authorization: Bearer <base64url header>.<base64url claims>.<base64url
    HMAC-SHA256>``; JWT header ``{"alg": "HS256"}``; claims with ``iat`` (seconds) and
    ``payload_hash`` (hex SHA-256 of the raw body). Key: the signature secret (UTF-8).
    Timestamp: ``iat``, a JSON integer; tolerance 300 s both ways (the official verifier checks
    none; Vonage mints a token per request, so 300 s is clock skew with room).
    """

    name = "vonage"
    title = "Vonage signed webhooks"
    reference = (
        "developer.vonage.com signing-messages / messages signed-webhooks; "
        "Vonage/vonage-python-sdk vonage_jwt/verify_jwt.py (checks no payload_hash)"
    )
    signs = Signs(
        id=None,
        timestamp="iat claim of the Authorization JWT, seconds",
        note=(
            "the JWT is signed and its payload_hash covers the body (checked here, unlike the "
            "official verifier); no delivery id is signed (default: the body digest)"
        ),
    )
    defaults = Defaults(
        delivery_id=FieldLocation(digest="sha256"),
        event_type=FieldLocation(body="status"),
    )
    default_tolerance_seconds = 300
    retry_horizon_seconds = 24 * HOUR
    retry_horizon_reference = (
        "Messages API callbacks are retried with back-off (window not published, UNVERIFIED): 24 h"
    )
    signature_header = HEADER
    # iat is inside the JWT of the Authorization header, not a header of its own (restamp).
    timestamp_header = None
    dev_secret = "dev-vonage-signature-secret-local-32b"
    vectors = LazyVectors(
        lambda: (
            samples.Vector(
                secret="vonage-signature-secret-for-tests",
                headers={
                    HEADER: (
                        "Bearer eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJpYXQiOjE3MDAwMDAwMDAsImp0aS"
                        "I6ImY3YTUxYzhiLTJiNWEtNGQwZS05YjhlLTJjMWY0YzZlMGExMSIsImlzcyI6IlZvbmFnZSIs"
                        "InBheWxvYWRfaGFzaCI6Ijc1M2FhNmVlOWRmMzIyYmQxNGVlYTMwNWM4NmM4NjIzNmU2ZmQ5OG"
                        "U0MzI5ZjNiNjU5M2FjYzdlMGYyNmQ0OTEiLCJhcGlfa2V5IjoiYWJjZDEyMzQiLCJhcHBsaWNh"
                        "dGlvbl9pZCI6ImFhYWFhYWFhLWJiYmItY2NjYy1kZGRkLTAxMjM0NTY3ODlhYiJ9.gs7dHqxmH"
                        "hjUQb7ycU3l8HWghWnGDSz_7SCPxCU9D7E"
                    )
                },
                body=(
                    b'{"message_uuid":"aaaaaaaa-bbbb-4ccc-8ddd-0123456789ab","to":"447700900000",'
                    b'"from":"447700900001","timestamp":"2023-11-14T22:13:20Z","status":"delivered",'
                    b'"channel":"sms"}'
                ),
                now=1_700_000_000,
                origin="sdk",
                reference=(
                    "minted with PyJWT 2.15 jwt.encode HS256 (the library vonage-jwt verifies "
                    "with); Vonage publishes no signed-webhook vector"
                ),
            ),
        )
    )

    def validate_secret(self, secret: str) -> None:
        """A printable ASCII signature secret (raises ConfigurationError)."""
        if not secret or not (secret.isascii() and secret.isprintable()):
            raise ConfigurationError("a Vonage signature secret is non-empty printable ASCII")

    def verify(self, request: WebhookRequest, secrets: Sequence[str], now: float) -> Verified:
        """Verify the JWT (HS256) and that its ``payload_hash`` is the body's SHA-256.

        Raises
        ------
        VerificationError
            ``signature_missing`` (no ``Authorization``), ``signature_malformed`` (not Bearer
            with an HS256 JWT, no ``payload_hash``), ``signature_invalid`` (no secret matches,
            or the token was minted for another body).
        TimestampError
            ``timestamp_missing`` / ``timestamp_invalid`` (``iat``), ``timestamp_stale`` /
            ``timestamp_future``, ``timestamp_stale`` for a passed ``exp``, ``timestamp_invalid``
            for an ``exp`` that is not a JSON number.
        """
        signing_input, claims, signature = parse_token(signature_header(request, HEADER))
        timestamp = issued_at(claims)
        payload_hash = claims.get("payload_hash")
        if not isinstance(payload_hash, str) or not payload_hash.isascii():
            raise VerificationError("signature_malformed", "the JWT has no payload_hash")
        index = match_hmac(secrets, signing_input, [signature])
        if not constant_time_equal(hashlib.sha256(request.body).hexdigest(), payload_hash):
            raise VerificationError("signature_invalid", "payload_hash is not the body's SHA-256")
        self.check_fresh(timestamp, now)
        check_expiry(claims.get("exp"), now)
        return Verified(secret_index=index, timestamp=timestamp)

    def sign(
        self, body: bytes, secret: str, *, timestamp: int, delivery_id: str, url: str = ""
    ) -> dict[str, str]:
        """``Authorization: Bearer <JWT>`` as Vonage mints it (``jti`` derived from
        ``delivery_id`` and ``timestamp``, so the same request signs the same way)."""
        claims = {
            "iat": int(timestamp),
            "jti": str(uuid.uuid5(uuid.NAMESPACE_URL, f"vonage/{delivery_id}/{timestamp}")),
            "iss": "Vonage",
            "payload_hash": hashlib.sha256(body).hexdigest(),
            "api_key": "abcd1234",
            "application_id": "aaaaaaaa-bbbb-cccc-dddd-0123456789ab",
        }
        return {HEADER: "Bearer " + mint(claims, secret)}

    def restamp(self, headers: Mapping[str, str], raw: str | None) -> dict[str, str] | None:
        """The JWT with ``iat`` replaced (a JSON integer for plain digits, else the text as a
        JSON string; removed for ``None``), its signature left as it was."""
        value = next(v for k, v in headers.items() if k.lower() == HEADER.lower())
        head, claims_part, signature = value.removeprefix("Bearer ").split(".")
        claims = json.loads(base64.urlsafe_b64decode(claims_part + "=" * (-len(claims_part) % 4)))
        claims.pop("iat", None)
        if raw is not None:
            claims["iat"] = int(raw) if raw.isascii() and raw.isdigit() else raw
        encoded = b64url_encode(json.dumps(claims, separators=(",", ":")).encode())
        rest = {k: v for k, v in headers.items() if k.lower() != HEADER.lower()}
        return rest | {HEADER: f"Bearer {head}.{encoded}.{signature}"}

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
                "message_uuid": delivery_id,
                "to": "447700900000",
                "from": "447700900001",
                "timestamp": iso_utc(sequence),
                "status": event_type or "delivered",
                "channel": "sms",
                "client_ref": resource,
            }
        )

    def new_delivery_id(self, random_hex: str) -> str:
        return str(uuid.UUID(random_hex[:32], version=4))


def mint(claims: Mapping[str, Any], secret: str) -> str:
    """An HS256 JWT of ``claims`` signed with ``secret`` (the simulator and tests)."""
    head = b64url_encode(json.dumps(_JWT_HEADER, separators=(",", ":")).encode())
    body = b64url_encode(json.dumps(dict(claims), separators=(",", ":")).encode())
    signature = utf8_hmac(secret, f"{head}.{body}".encode("ascii"))
    return f"{head}.{body}.{b64url_encode(signature)}"
