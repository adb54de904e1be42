"""The interface every signature scheme implements, and helpers they share.

A scheme verifies the raw body bytes and headers of a request against one or more secrets (the
current one first, then the previous one during a rotation window) and, where the provider signs a
timestamp, checks freshness in both directions with the provider's tolerance and unit.
"""

from __future__ import annotations

import hmac
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from webhook_pipeline.errors import TimestampError
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
    """

    name: ClassVar[str]
    default_tolerance_seconds: ClassVar[int | None] = None

    def __init__(self, options: Mapping[str, Any] | None = None,
                 tolerance_seconds: int | None = None) -> None:
        self.options = dict(options or {})
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
