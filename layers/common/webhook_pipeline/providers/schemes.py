"""Scheme shapes several providers share, so that a provider module declares only what differs.

- :class:`BodyHmacProvider`: the HMAC-SHA256 of the raw body in one header, as
  ``<prefix><digest>`` in hex or base64 (GitHub, Meta, LINE, Bitbucket, Jira, X...).
- :class:`TimestampedHmacProvider`: ``<header>: t=<seconds>,<key>=<hex>`` over ``{t}.{body}``
  (Stripe and Calendly ``v1=``, TikTok ``s=``; Paddle's ``ts=..;h1=..`` over ``{ts}:{body}``).
- :func:`parse_rfc3339` / :func:`format_rfc3339`: strict RFC 3339 timestamps (Twitch, Zendesk).
- :class:`V0HmacProvider`: ``<header>: v0=<hex>`` over ``v0:{timestamp}:{body}`` with the
  timestamp in its own header (Slack, Zoom).

Handshake shapes are in :mod:`webhook_pipeline.providers.challenges`.

The building blocks they verify with are :mod:`webhook_pipeline.providers.crypto`'s (digests
decoded strictly, ``match_hmac``, ``match_token``, headers and timestamps read strictly):
constant-time comparisons, reason codes, never another exception.
"""

from __future__ import annotations

import calendar
import re
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import ClassVar

from webhook_pipeline.errors import TimestampError, VerificationError
from webhook_pipeline.providers.base import Provider
from webhook_pipeline.providers.crypto import (
    Encoding,
    decode_hex,
    encode_digest,
    header_digest,
    match_hmac,
    parse_plain_int,
    signature_header,
    timestamp_header,
    utf8_hmac,
)
from webhook_pipeline.providers.model import Verified, refuse_challenge_message
from webhook_pipeline.webhook_request import WebhookRequest

# -- the HMAC of the body in one header ---------------------------------------------------------


class BodyHmacProvider(Provider):
    """A provider whose signature is ``<signature_header>: <hmac_prefix><digest>``, the
    HMAC-SHA256 of the raw body keyed with the secret as UTF-8, in ``hmac_encoding``. No
    timestamp, no signed id: :attr:`delivery_header` (when set) is where :meth:`sign` puts the
    delivery id, an unsigned header. :attr:`hmac_digest_bytes` (when set) is the only digest
    length accepted; any other is ``signature_malformed``.
    """

    hmac_prefix: ClassVar[str] = ""
    hmac_encoding: ClassVar[Encoding] = "hex"
    hmac_digest_bytes: ClassVar[int | None] = None
    delivery_header: ClassVar[str | None] = None

    def verify(self, request: WebhookRequest, secrets: Sequence[str], now: float) -> Verified:
        """Verify the body HMAC (``now`` unused: nothing signed says when).

        Raises
        ------
        VerificationError
            ``signature_missing``, ``signature_malformed`` (prefix, encoding or length),
            ``signature_invalid`` (no secret matches).
        """
        header, size = self.signature_header, self.hmac_digest_bytes
        prefix, encoding = self.hmac_prefix, self.hmac_encoding
        digest = header_digest(request, header, prefix=prefix, encoding=encoding)
        if size is not None and len(digest) != size:
            raise VerificationError("signature_malformed", f"{header} is not a {size}-byte digest")
        refuse_challenge_message(self.handshakes, request.body)
        return Verified(secret_index=match_hmac(secrets, request.body, [digest]))

    def sign(
        self, body: bytes, secret: str, *, timestamp: int, delivery_id: str, url: str = ""
    ) -> dict[str, str]:
        """The signature header (and :attr:`delivery_header` = ``delivery_id``, when set)."""
        value = self.hmac_prefix + encode_digest(utf8_hmac(secret, body), self.hmac_encoding)
        headers = {self.signature_header: value}
        if self.delivery_header is not None:
            headers[self.delivery_header] = delivery_id
        return headers


# -- t=<seconds>,<key>=<hex> over {t}.{body} -----------------------------------------------------


def parse_keyed_header(
    value: str, header: str, timestamp_key: str, signature_key: str
) -> tuple[str | None, list[str]]:
    """Split ``t=..,<signature_key>=..[,<signature_key>=..]`` into the raw ``t`` and the
    signature values.

    Items are separated by ``","``; whitespace before an item is dropped (a proxy may join
    repeated headers with ``", "``), whitespace inside a value is kept (and then fails the strict
    parse); empty items and unknown keys are ignored.

    Raises
    ------
    VerificationError
        ``signature_malformed``: ``t`` appears with two different values (two headers joined
        by ``","``), which is never resolved by picking one.
    """
    timestamps: set[str] = set()
    signatures: list[str] = []
    for item in value.split(","):
        key, sep, val = item.lstrip(" \t").partition("=")
        if not sep:
            continue
        if key == timestamp_key:
            timestamps.add(val)
        elif key == signature_key:
            signatures.append(val)
    if len(timestamps) > 1:
        raise VerificationError(
            "signature_malformed", f"{header} carries several {timestamp_key} values"
        )
    return (timestamps.pop() if timestamps else None), signatures


def restamp_keyed_header(
    headers: Mapping[str, str],
    header: str,
    timestamp_key: str,
    raw: str | None,
    separator: str = ",",
) -> dict[str, str]:
    """``headers`` with the ``t`` item of ``header`` replaced by ``raw`` (removed for ``None``),
    the signature items left as they were; items are joined by ``separator``."""
    value = next(v for k, v in headers.items() if k.lower() == header.lower())
    rest = [item for item in value.split(separator) if not item.startswith(f"{timestamp_key}=")]
    items = ([f"{timestamp_key}={raw}"] if raw is not None else []) + rest
    return {
        **{k: v for k, v in headers.items() if k.lower() != header.lower()},
        header: separator.join(items),
    }


class TimestampedHmacProvider(Provider):
    """``<signature_header>: t=<seconds>,<signature_key>=<hex>[,...]``: HMAC-SHA256 of
    ``{t}.{body}`` (``t`` exactly as sent, the raw body), keyed with the secret as UTF-8,
    lower-case hex; several signature items may be present (any may match). ``t`` is Unix
    **seconds**, a plain integer, checked both ways against the tolerance.

    A provider of the same shape with other punctuation sets :attr:`item_separator` (between
    the header's items) and :attr:`signed_separator` (between ``t`` and the body in the signed
    bytes), and overrides :meth:`parse_signature` where its header is parsed more strictly.
    """

    signature_key: ClassVar[str]
    timestamp_key: ClassVar[str] = "t"
    item_separator: ClassVar[str] = ","
    signed_separator: ClassVar[bytes] = b"."

    def parse_signature(self, value: str) -> tuple[str | None, list[str]]:
        """The raw timestamp and the signature values of a signature header's ``value``
        (:func:`parse_keyed_header`).

        Raises
        ------
        VerificationError
            ``signature_malformed``: the timestamp appears with two different values.
        """
        return parse_keyed_header(
            value, self.signature_header, self.timestamp_key, self.signature_key
        )

    def signed_bytes(self, raw_t: str, body: bytes) -> bytes:
        """What the HMAC covers: ``t`` exactly as sent, :attr:`signed_separator`, the body."""
        return raw_t.encode("ascii") + self.signed_separator + body

    def verify(self, request: WebhookRequest, secrets: Sequence[str], now: float) -> Verified:
        """Verify the header and the freshness of its ``t``.

        Raises
        ------
        VerificationError
            ``signature_missing`` (no header), ``signature_malformed`` (two ``t`` values, no
            signature item in hex, or what :meth:`parse_signature` refuses),
            ``signature_invalid`` (no secret matches).
        TimestampError
            ``timestamp_missing``, ``timestamp_invalid`` (not a plain integer),
            ``timestamp_stale`` / ``timestamp_future``.
        """
        header = self.signature_header
        raw_t, values = self.parse_signature(signature_header(request, header))
        if raw_t is None:
            raise TimestampError("timestamp_missing", f"{header} has no {self.timestamp_key}")
        timestamp = parse_plain_int(raw_t)
        candidates = [d for v in values if (d := decode_hex(v)) is not None]
        if not candidates:
            raise VerificationError(
                "signature_malformed", f"{header} has no hex {self.signature_key}"
            )
        index = match_hmac(secrets, self.signed_bytes(raw_t, request.body), candidates)
        self.check_fresh(timestamp, now)
        return Verified(secret_index=index, timestamp=timestamp, raw_timestamp=raw_t)

    def sign(
        self, body: bytes, secret: str, *, timestamp: int, delivery_id: str, url: str = ""
    ) -> dict[str, str]:
        """``{signature_header: "t=<timestamp>,<key>=<hex>"}`` (``timestamp`` Unix seconds)."""
        t = str(int(timestamp))
        digest = utf8_hmac(secret, self.signed_bytes(t, body)).hex()
        items = (f"{self.timestamp_key}={t}", f"{self.signature_key}={digest}")
        return {self.signature_header: self.item_separator.join(items)}

    def restamp(self, headers: Mapping[str, str], raw: str | None) -> dict[str, str] | None:
        """``t`` replaced inside the signature header (removed for ``None``)."""
        return restamp_keyed_header(
            headers, self.signature_header, self.timestamp_key, raw, self.item_separator
        )


# -- RFC 3339 timestamps ------------------------------------------------------------------------

_RFC3339 = re.compile(
    r"([0-9]{4})-([0-9]{2})-([0-9]{2})T([0-9]{2}):([0-9]{2}):([0-9]{2})"
    r"(?:\.([0-9]{1,9}))?(Z|[+-][0-9]{2}:[0-9]{2})"
)


def parse_rfc3339(raw: str | None) -> float:
    """Unix seconds (with the fraction) of a strict RFC 3339 timestamp.

    Accepted: ``2021-02-19T23:47:00Z``, with up to nine fraction digits
    (``2021-02-19T23:47:00.8091512Z``) and a ``Z`` or ``+hh:mm`` / ``-hh:mm`` offset. Refused:
    anything else, including a lower-case ``t`` or ``z``, a space instead of ``T``, no offset,
    surrounding spaces, non-ASCII digits, out-of-range fields (month 13, second 60).

    Raises
    ------
    TimestampError
        ``timestamp_missing`` (absent or empty) or ``timestamp_invalid``.
    """
    if raw is None or raw == "":
        raise TimestampError("timestamp_missing")
    match = _RFC3339.fullmatch(raw) if raw.isascii() else None
    if match is None:
        raise TimestampError("timestamp_invalid", "not an RFC 3339 timestamp")
    year, month, day, hour, minute, second = (int(g) for g in match.groups()[:6])
    fraction, zone = match.group(7) or "", match.group(8)
    offset = 0
    if zone != "Z":
        hours, minutes = int(zone[1:3]), int(zone[4:6])
        if hours > 23 or minutes > 59:
            raise TimestampError("timestamp_invalid", "RFC 3339 offset out of range")
        offset = (hours * 60 + minutes) * 60 * (1 if zone[0] == "+" else -1)
    try:
        moment = datetime(year, month, day, hour, minute, second, tzinfo=UTC)
    except ValueError as exc:
        raise TimestampError("timestamp_invalid", "RFC 3339 field out of range") from exc
    whole = calendar.timegm(moment.timetuple()) - offset
    return whole + (int(fraction) / 10 ** len(fraction) if fraction else 0.0)


def format_rfc3339(seconds: int, nanoseconds: int | None = None) -> str:
    """``2026-01-01T00:00:00Z`` for Unix ``seconds`` (with ``.`` and nine digits when
    ``nanoseconds`` is given)."""
    text = datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%M:%S")
    return text + (f".{nanoseconds:09d}" if nanoseconds is not None else "") + "Z"


# -- v0=<hex> over v0:{timestamp}:{body} ----------------------------------------------------------


class V0HmacProvider(Provider):
    """``<signature_header>: v0=<hex>``, the HMAC-SHA256 (keyed with the secret as UTF-8) of
    ``v0:{timestamp}:{body}``, where the timestamp is :attr:`timestamp_header`'s value exactly as
    sent (Unix seconds, a plain integer). :attr:`v0_digest_bytes` (when set) is the only digest
    length accepted; any other is ``signature_malformed``."""

    v0_digest_bytes: ClassVar[int | None] = None

    def verify(self, request: WebhookRequest, secrets: Sequence[str], now: float) -> Verified:
        """Verify the ``v0`` signature and the freshness of its timestamp.

        Raises
        ------
        VerificationError
            ``signature_missing`` (no signature header), ``signature_malformed`` (not
            ``v0=<hex>``, or not :attr:`v0_digest_bytes` long), ``signature_invalid`` (no
            secret matches).
        TimestampError
            ``timestamp_missing``, ``timestamp_invalid`` (not a plain integer),
            ``timestamp_stale`` / ``timestamp_future`` (outside the tolerance).
        """
        header, ts_header = self.signature_header, self.timestamp_header or ""
        value = signature_header(request, header)
        digest = decode_hex(value.removeprefix("v0=")) if value.startswith("v0=") else None
        size = self.v0_digest_bytes
        if digest is None or (size is not None and len(digest) != size):
            shape = f"v0=<{2 * size} hex>" if size is not None else "v0=<hex>"
            raise VerificationError("signature_malformed", f"{header} is not {shape}")
        raw_ts, timestamp = timestamp_header(request, ts_header)
        signed = b"v0:" + raw_ts.encode("ascii") + b":" + request.body
        index = match_hmac(secrets, signed, [digest])
        self.check_fresh(timestamp, now)
        return Verified(
            secret_index=index, timestamp=timestamp, signed_headers=self.signed_header_names()
        )

    def sign(
        self, body: bytes, secret: str, *, timestamp: int, delivery_id: str, url: str = ""
    ) -> dict[str, str]:
        """The signature and timestamp headers (``timestamp`` in Unix seconds)."""
        ts = str(int(timestamp))
        digest = utf8_hmac(secret, b"v0:" + ts.encode("ascii") + b":" + body)
        return {self.signature_header: "v0=" + digest.hex(), self.timestamp_header or "": ts}
