"""Building blocks every provider's verification uses: strict parsing of signature and timestamp
headers, strict hex/base64 decoding, HMAC, constant-time comparison against several secrets.

Strict means: what a provider's own SDK would refuse is refused here too (upper-case hex where the
SDK compares lower-case strings, base64 without padding, ``1e9`` or `` 1700000000 `` as a
timestamp), with a reason code and never an exception other than the typed ones.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Literal

from cryptography.exceptions import InvalidSignature

from webhook_pipeline.errors import ConfigurationError, TimestampError, VerificationError
from webhook_pipeline.webhook_request import WebhookRequest

#: How a digest is written in a header.
Encoding = Literal["hex", "base64"]


def constant_time_equal(a: bytes | str, b: bytes | str) -> bool:
    """Compare two digests in constant time (bytes or ASCII strings)."""
    ab = a.encode() if isinstance(a, str) else a
    bb = b.encode() if isinstance(b, str) else b
    return hmac.compare_digest(ab, bb)


def parse_plain_int(value: str | None) -> int:
    """Parse a timestamp that must be a plain base-10 integer (ASCII digits only).

    ``nan``, ``inf``, exponents (``1e9``), signs, decimals, surrounding spaces and empty strings
    are rejected (case C05): ``abs(now - float("nan")) > tolerance`` is False in Python, so a
    permissive parse would let such values through. So are leading zeros (``0170...``), which no
    sender writes: where a body is signed right before the timestamp with no separator (a
    generic ``{body}{timestamp}`` template), a body ending in ``0`` could otherwise give its last
    digit to the timestamp and verify as another body with the same time.

    Raises
    ------
    TimestampError
        ``timestamp_missing`` when ``value`` is None or empty, ``timestamp_invalid`` otherwise.
    """
    if value is None or value == "":
        raise TimestampError("timestamp_missing")
    if not (value.isascii() and value.isdigit()) or len(value) > 19:
        raise TimestampError("timestamp_invalid")
    if value.startswith("0") and value != "0":
        raise TimestampError("timestamp_invalid", "a timestamp with a leading zero")
    return int(value)


def check_freshness(timestamp_seconds: float, now: float, tolerance_seconds: int) -> None:
    """Reject a timestamp older or newer than ``now`` by more than ``tolerance_seconds``.

    Raises
    ------
    TimestampError
        ``timestamp_stale`` (too old) or ``timestamp_future`` (too far ahead).
    """
    if timestamp_seconds < now - tolerance_seconds:
        raise TimestampError("timestamp_stale")
    if timestamp_seconds > now + tolerance_seconds:
        raise TimestampError("timestamp_future")


_HEX = re.compile(r"[0-9a-fA-F]+")


_LOWER_HEX = re.compile(r"[0-9a-f]+")


_BASE64 = re.compile(r"[A-Za-z0-9+/]+={0,2}")


#: Digest constructors by the names sources may use.
DIGESTS: Mapping[str, Callable[[], Any]] = {
    "sha1": hashlib.sha1,
    "sha256": hashlib.sha256,
    "sha512": hashlib.sha512,
}


def signature_header(request: WebhookRequest, name: str) -> str:
    """Return the signature header ``name`` (any case) as an ASCII string.

    Raises
    ------
    VerificationError
        ``signature_missing`` when absent or empty, ``signature_malformed`` when the value holds
        non-ASCII characters (never a ``KeyError`` or ``UnicodeEncodeError``).
    """
    value = request.header(name)
    if value is None or value == "":
        raise VerificationError("signature_missing", f"{name} header missing")
    if not value.isascii():
        raise VerificationError("signature_malformed", f"{name} header is not ASCII")
    return value


def timestamp_header(request: WebhookRequest, name: str) -> tuple[str, int]:
    """Return the timestamp header ``name`` as sent and as an integer (the scheme's unit).

    Returns
    -------
    tuple[str, int]
        The raw ASCII digits (what the sender signed) and their value.

    Raises
    ------
    TimestampError
        ``timestamp_missing`` (absent or empty), ``timestamp_invalid`` (anything but plain
        ASCII digits, see :func:`parse_plain_int`).
    """
    raw = request.header(name)
    value = parse_plain_int(raw)
    return str(raw), value


def check_printable_key(secret: str, name: str, *, min_chars: int = 16) -> None:
    """Check a shared signing key typed or pasted by an operator: printable ASCII without
    spaces, at least ``min_chars`` characters (Paddle's endpoint secret key, Square's signature
    key).

    Raises
    ------
    ConfigurationError
        Holding spaces or non-ASCII characters, or shorter than ``min_chars``; the message names
        the key (``name``), never its value.
    """
    if not (secret.isascii() and secret.isprintable()) or " " in secret:
        raise ConfigurationError(f"the {name} must be printable ASCII, no spaces")
    if len(secret) < min_chars:
        raise ConfigurationError(f"the {name} is shorter than {min_chars} characters")


def decode_hex(value: str, *, uppercase: bool = False) -> bytes | None:
    """Decode a hex digest, or return ``None`` when it is not strictly hex.

    Providers send lower-case hex and their SDKs compare strings, so upper-case digits are
    refused unless ``uppercase`` is true. Unlike ``bytes.fromhex`` no whitespace is allowed.
    """
    pattern = _HEX if uppercase else _LOWER_HEX
    if len(value) % 2 or not pattern.fullmatch(value):
        return None
    return bytes.fromhex(value)


def decode_base64(value: str, *, canonical: bool = True) -> bytes | None:
    """Decode standard, padded base64, or return ``None`` when it is not strictly that.

    Strictly means also the canonical spelling (``canonical``, the default): the unused low
    bits of the last character before ``=`` are zero, so the bytes have one spelling only
    (``...fp4=`` and ``...fp5=`` decode alike; only the encoder's own is accepted). A
    provider's SDK that compares the encoded strings (Adyen, Twilio, Square, LINE, HubSpot)
    refuses every other spelling, and so do we. ``canonical=False`` accepts them, for an SDK
    that decodes before comparing (SendGrid's, the ``standardwebhooks`` library's) and for
    keys and credentials, which are not signatures.
    """
    if len(value) % 4 or not _BASE64.fullmatch(value):
        return None
    try:
        decoded = base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        return None
    if canonical and base64.b64encode(decoded).decode("ascii") != value:
        return None
    return decoded


def decode_digest(text: str, encoding: Encoding) -> bytes | None:
    """A digest in lower-case hex or padded standard base64, or ``None`` when it is not."""
    return decode_hex(text) if encoding == "hex" else decode_base64(text)


def encode_digest(digest: bytes, encoding: Encoding) -> str:
    """``digest`` as lower-case hex or padded standard base64."""
    return digest.hex() if encoding == "hex" else base64.b64encode(digest).decode("ascii")


def header_digest(
    request: WebhookRequest, header: str, *, prefix: str = "", encoding: Encoding = "hex"
) -> bytes:
    """The digest of a ``<header>: <prefix><digest>`` signature header, decoded.

    Raises
    ------
    VerificationError
        ``signature_missing`` (absent or empty), ``signature_malformed`` (not ASCII, prefix
        missing, digest not strictly in ``encoding``).
    """
    value = signature_header(request, header)
    digest = decode_digest(value[len(prefix) :], encoding) if value.startswith(prefix) else None
    if digest is None:
        raise VerificationError("signature_malformed", f"{header} is not {prefix}<{encoding}>")
    return digest


def match_token(secrets: Sequence[str], presented: str) -> int:
    """Index of the secret equal to ``presented`` (a shared token, not a signature), compared in
    constant time against every secret.

    Raises
    ------
    VerificationError
        ``signature_invalid``: no secret equals it.
    ConfigurationError
        No secret, or an empty one.
    """
    return match_secrets(
        secrets, lambda secret: secret.encode("utf-8"), [presented.encode("utf-8")]
    )


def hmac_digest(key: bytes, message: bytes, algorithm: str = "sha256") -> bytes:
    """HMAC of ``message`` with ``key`` using ``algorithm`` (a key of :data:`DIGESTS`)."""
    return hmac.new(key, message, DIGESTS[algorithm]).digest()


def utf8_hmac(secret: str, message: bytes) -> bytes:
    """HMAC-SHA256 of ``message`` keyed with ``secret`` as UTF-8 (the raw 32-byte digest): what a
    sender of an HMAC scheme computes."""
    return hmac.digest(secret.encode("utf-8"), message, "sha256")


def match_hmac(secrets: Sequence[str], message: bytes, candidates: Iterable[bytes]) -> int:
    """Index of the first secret whose HMAC-SHA256 of ``message`` (keyed with the secret as
    UTF-8, as :func:`utf8_hmac`) equals one of ``candidates``: the verification of every HMAC
    scheme keyed that way, one digest per secret compared in constant time with every candidate.

    Parameters
    ----------
    secrets : Sequence[str]
        Current secret first, then the previous one.
    message : bytes
        The signed bytes, as the scheme builds them.
    candidates : Iterable[bytes]
        Raw (decoded) signatures taken from the request.

    Raises
    ------
    ConfigurationError
        No secret at all, or an empty one.
    VerificationError
        ``signature_invalid`` when no secret matches any candidate.
    """
    if not secrets or any(not s for s in secrets):
        raise ConfigurationError("signature verification needs at least one non-empty secret")
    wanted = tuple(candidates)
    for index, secret in enumerate(secrets):
        digest = hmac.digest(secret.encode("utf-8"), message, "sha256")
        matched = False
        for candidate in wanted:  # every candidate compared: no early exit on a mismatch
            matched |= hmac.compare_digest(digest, candidate)
        if matched:
            return index
    raise VerificationError("signature_invalid")


def match_secrets(
    secrets: Sequence[str], expected: Callable[[str], bytes], candidates: Iterable[bytes]
) -> int:
    """Return the index of the first secret whose digest equals one of ``candidates``.

    Parameters
    ----------
    secrets : Sequence[str]
        Current secret first, then the previous one.
    expected : Callable[[str], bytes]
        Computes the raw digest the sender would have produced with one secret.
    candidates : Iterable[bytes]
        Raw (decoded) signatures taken from the request.

    Returns
    -------
    int
        Index into ``secrets`` of the secret that matched.

    Raises
    ------
    ConfigurationError
        No secret at all, or an empty one (a misconfigured source must fail loudly, not answer
        401 to every sender).
    VerificationError
        ``signature_invalid`` when no secret matches any candidate.
    """
    return match_secrets_any(secrets, lambda secret: (expected(secret),), candidates)


def match_secrets_any(
    secrets: Sequence[str],
    expected: Callable[[str], Iterable[bytes]],
    candidates: Iterable[bytes],
) -> int:
    """:func:`match_secrets` for schemes where one secret may have produced any of several
    digests: the signed URL with and without its default port (Twilio), with and without the
    escapes the provider decodes (HubSpot).

    Raises
    ------
    ConfigurationError
        No secret at all, or an empty one.
    VerificationError
        ``signature_invalid`` when no digest of any secret matches any candidate.
    """
    if not secrets or any(not s for s in secrets):
        raise ConfigurationError("signature verification needs at least one non-empty secret")
    wanted = list(candidates)
    for index, secret in enumerate(secrets):
        # Compare every digest against every candidate (no early exit on the first mismatch).
        matched = False
        for digest in expected(secret):
            for candidate in wanted:
                matched |= constant_time_equal(digest, candidate)
        if matched:
            return index
    raise VerificationError("signature_invalid")


def match_public_keys(secrets: Sequence[str], verify: Callable[[str], object]) -> int:
    """Return the index of the first stored public key under which the signature verifies.

    The asymmetric counterpart of :func:`match_secrets` (Ed25519, ECDSA): nothing is compared
    by the caller, the signature library checks the signature against each key in turn.

    Parameters
    ----------
    secrets : Sequence[str]
        Stored public keys (current first, then the previous one), already validated.
    verify : Callable[[str], object]
        Checks the request's signature under one stored key: returns when it verifies, raises
        ``cryptography.exceptions.InvalidSignature`` when it does not.

    Returns
    -------
    int
        Index into ``secrets`` of the key that verified.

    Raises
    ------
    ConfigurationError
        No key at all, or an empty one.
    VerificationError
        ``signature_invalid`` when no key verifies the signature.
    """
    if not secrets or any(not s for s in secrets):
        raise ConfigurationError("signature verification needs at least one non-empty key")
    for index, key in enumerate(secrets):
        try:
            verify(key)
        except InvalidSignature:
            continue
        return index
    raise VerificationError("signature_invalid")
