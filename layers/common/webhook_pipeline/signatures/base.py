"""The interface every signature scheme implements, and helpers they share.

A scheme verifies the raw body bytes and headers of a request against one or more secrets (the
current one first, then the previous one during a rotation window) and, where the provider signs a
timestamp, checks freshness in both directions with the provider's tolerance and unit.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import re
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from webhook_pipeline.errors import ConfigurationError, TimestampError, VerificationError
from webhook_pipeline.http import WebhookRequest


@dataclass(frozen=True)
class Verification:
    """The result of a successful verification.

    Attributes
    ----------
    secret_index : int
        Index into the secrets passed to ``verify`` of the one that matched
        (0 = current, 1 = previous).
    timestamp : int | None
        The signed timestamp in the scheme's own unit, or ``None`` if the scheme signs none.
    """

    secret_index: int
    timestamp: int | None = None


class SignatureScheme(ABC):
    """One provider's signature scheme.

    Class attributes
    ----------------
    name : str
        Registry name used in the sources file (``scheme = "stripe"``).
    default_tolerance_seconds : int | None
        Freshness tolerance when the source sets none; ``None`` for schemes without a signed
        timestamp.
    option_names : frozenset[str]
        The ``scheme_options`` keys the scheme understands; any other key is a configuration
        error (a typo must not silently fall back to a default).

    Raises
    ------
    ConfigurationError
        From the constructor: an unknown option key, or a tolerance that is not a positive
        integer.
    """

    name: ClassVar[str]
    default_tolerance_seconds: ClassVar[int | None] = None
    option_names: ClassVar[frozenset[str]] = frozenset()

    def __init__(
        self, options: Mapping[str, Any] | None = None, tolerance_seconds: int | None = None
    ) -> None:
        self.options = dict(options or {})
        unknown = sorted(set(self.options) - self.option_names)
        if unknown:
            raise ConfigurationError(
                f"signature scheme {self.name!r}: unknown option(s) {unknown}; "
                f"known: {sorted(self.option_names)}"
            )
        if tolerance_seconds is not None and (
            isinstance(tolerance_seconds, bool)
            or not isinstance(tolerance_seconds, int)
            or tolerance_seconds <= 0
        ):
            raise ConfigurationError(
                f"signature scheme {self.name!r}: tolerance_seconds must be a positive integer"
            )
        self.tolerance_seconds = (
            tolerance_seconds if tolerance_seconds is not None else self.default_tolerance_seconds
        )

    @abstractmethod
    def verify(self, request: WebhookRequest, secrets: Sequence[str], now: float) -> Verification:
        """Verify ``request`` against ``secrets`` at time ``now``.

        Parameters
        ----------
        request : WebhookRequest
            Headers (case-insensitive) and the exact received body bytes.
        secrets : Sequence[str]
            Current secret first, then the previous one if a rotation window is open.
        now : float
            Current Unix time in seconds.

        Returns
        -------
        Verification

        Raises
        ------
        VerificationError
            Signature header missing, malformed, or matching no secret.
        TimestampError
            Timestamp missing, not a plain integer, stale or in the future.
        """

    def check_fresh(self, timestamp_seconds: float, now: float) -> None:
        """Check a signed timestamp (in seconds) against ``now`` with this scheme's tolerance.

        Raises
        ------
        TimestampError
            ``timestamp_stale`` or ``timestamp_future``.
        ConfigurationError
            The scheme has no tolerance (a scheme without a signed timestamp called this).
        """
        if self.tolerance_seconds is None:
            raise ConfigurationError(f"signature scheme {self.name!r} has no timestamp tolerance")
        check_freshness(timestamp_seconds, now, self.tolerance_seconds)

    def handshake(self, request: WebhookRequest) -> dict[str, Any] | None:
        """Answer a provider's verification handshake, if ``request`` (already verified) is one.

        Returns the JSON body of a 200 answer (e.g. Slack's ``url_verification`` challenge), or
        ``None`` for an ordinary delivery. The default: no handshake.
        """
        return None

    def subscription_challenge(
        self, request: WebhookRequest, verify_token: str | None
    ) -> str | None:
        """Answer a subscription handshake that arrives as ``GET`` (Meta's ``hub.challenge``).

        Parameters
        ----------
        request : WebhookRequest
            The ``GET`` request (query string parameters in ``request.query``).
        verify_token : str | None
            The source's configured verify token (from its secret), if any.

        Returns
        -------
        str | None
            The text to answer with 200, or ``None`` when this scheme has no such handshake
            (the ingest function answers 405).

        Raises
        ------
        VerificationError
            The handshake is malformed or its token does not match.
        """
        return None

    @abstractmethod
    def sign(self, body: bytes, secret: str, *, timestamp: int, delivery_id: str) -> dict[str, str]:
        """Return the headers a sender of this scheme would attach to ``body``.

        Used by the sender simulator and tests. ``timestamp`` is Unix seconds (schemes with
        another unit convert), ``delivery_id`` goes where the provider puts it in headers (if it
        does).
        """


def constant_time_equal(a: bytes | str, b: bytes | str) -> bool:
    """Compare two digests in constant time (bytes or ASCII strings)."""
    ab = a.encode() if isinstance(a, str) else a
    bb = b.encode() if isinstance(b, str) else b
    return hmac.compare_digest(ab, bb)


def parse_plain_int(value: str | None) -> int:
    """Parse a timestamp that must be a plain base-10 integer (ASCII digits only).

    ``nan``, ``inf``, exponents (``1e9``), signs, decimals, surrounding spaces and empty strings
    are rejected (case C05): ``abs(now - float("nan")) > tolerance`` is False in Python, so a
    permissive parse would let such values through.

    Raises
    ------
    TimestampError
        ``timestamp_missing`` when ``value`` is None or empty, ``timestamp_invalid`` otherwise.
    """
    if value is None or value == "":
        raise TimestampError("timestamp_missing")
    if not (value.isascii() and value.isdigit()) or len(value) > 19:
        raise TimestampError("timestamp_invalid")
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


def decode_hex(value: str, *, uppercase: bool = False) -> bytes | None:
    """Decode a hex digest, or return ``None`` when it is not strictly hex.

    Providers send lower-case hex and their SDKs compare strings, so upper-case digits are
    refused unless ``uppercase`` is true. Unlike ``bytes.fromhex`` no whitespace is allowed.
    """
    pattern = _HEX if uppercase else _LOWER_HEX
    if len(value) % 2 or not pattern.fullmatch(value):
        return None
    return bytes.fromhex(value)


def decode_base64(value: str) -> bytes | None:
    """Decode standard, padded base64, or return ``None`` when it is not strictly that."""
    if len(value) % 4 or not _BASE64.fullmatch(value):
        return None
    try:
        return base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        return None


def hmac_digest(key: bytes, message: bytes, algorithm: str = "sha256") -> bytes:
    """HMAC of ``message`` with ``key`` using ``algorithm`` (a key of :data:`DIGESTS`)."""
    return hmac.new(key, message, DIGESTS[algorithm]).digest()


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
    if not secrets or any(not s for s in secrets):
        raise ConfigurationError("signature verification needs at least one non-empty secret")
    wanted = list(candidates)
    for index, secret in enumerate(secrets):
        digest = expected(secret)
        # Compare against every candidate (no early exit on the first mismatch).
        matched = False
        for candidate in wanted:
            matched |= constant_time_equal(digest, candidate)
        if matched:
            return index
    raise VerificationError("signature_invalid")
