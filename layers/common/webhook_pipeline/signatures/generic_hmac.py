"""A configurable HMAC scheme for senders without a dedicated module.

Configured per source in the sources file (``[sources.<name>.scheme_options]``)::

    header = "X-Signature"                  # required: the signature header
    prefix = "sha256="                      # optional, default "": text before the digest
    algorithm = "sha256"                    # sha1 | sha256 | sha512 (default sha256)
    encoding = "hex"                        # hex | base64 (default hex)
    timestamp_header = "X-Timestamp"        # optional: a signed timestamp
    timestamp_unit = "seconds"              # seconds | milliseconds (default seconds)
    signed_template = "{timestamp}.{body}"  # default "{body}"
    delivery_id_header = "X-Delivery-Id"    # required when the template uses {delivery_id}

Source of the scheme: no single provider; it covers the common "HMAC of (timestamp +) body in one
header" family (e.g. GitHub's legacy ``X-Hub-Signature: sha1=``, Intercom, Linear) described in
``providers.md``.
"""

from __future__ import annotations

import base64
import string
from collections.abc import Mapping, Sequence
from typing import Any

from webhook_pipeline.errors import ConfigurationError, VerificationError
from webhook_pipeline.http import WebhookRequest
from webhook_pipeline.signatures.base import (
    DIGESTS,
    SignatureScheme,
    Verification,
    decode_base64,
    decode_hex,
    hmac_digest,
    match_secrets,
    signature_header,
    timestamp_header,
)

ENCODINGS = ("hex", "base64")
TIMESTAMP_UNITS = {"seconds": 1, "milliseconds": 1000}
PLACEHOLDERS = ("timestamp", "body", "delivery_id")
_Part = bytes | str  # literal bytes, or the name of a placeholder


def _parse_template(template: str) -> list[_Part]:
    """Split ``signed_template`` into literal bytes and placeholder names.

    ``{{`` and ``}}`` stand for literal braces (``str.format`` syntax); placeholders take no
    format spec or conversion.

    Raises
    ------
    ConfigurationError
        Unbalanced braces, an unknown placeholder, a format spec, or ``{body}`` not present
        exactly once.
    """
    parts: list[_Part] = []
    try:
        parsed = list(string.Formatter().parse(template))
    except ValueError as exc:
        raise ConfigurationError(f"generic-hmac: signed_template is invalid: {exc}") from exc
    for literal, field, spec, conversion in parsed:
        if literal:
            parts.append(literal.encode("utf-8"))
        if field is None:
            continue
        if field not in PLACEHOLDERS or spec or conversion:
            raise ConfigurationError(
                f"generic-hmac: signed_template placeholder {{{field}}} is not one of "
                f"{{timestamp}}, {{body}}, {{delivery_id}} (without format specs)"
            )
        parts.append(field)
    if parts.count("body") != 1:
        raise ConfigurationError("generic-hmac: signed_template must contain {body} exactly once")
    return parts


class GenericHmacScheme(SignatureScheme):
    """HMAC over a configurable template of timestamp, body and delivery id.

    Header shapes: ``<header>: <prefix><digest>`` with the digest in hex (either case) or
    padded standard base64; optionally ``<timestamp_header>: <integer>`` in seconds or
    milliseconds (``timestamp_unit``) and ``<delivery_id_header>: <id>``.
    Signed bytes: ``signed_template`` with ``{body}`` replaced by the raw body bytes (never
    decoded), ``{timestamp}`` and ``{delivery_id}`` by the header values exactly as sent.
    Key: the secret as UTF-8. Timestamp (when configured): tolerance 300 s by default, both
    directions; ``Verification.timestamp`` is in ``timestamp_unit``.

    Raises
    ------
    ConfigurationError
        From the constructor, for an unknown option key, a missing ``header``, an unknown
        ``algorithm``, ``encoding`` or ``timestamp_unit``, a non-string option, or a template
        that does not match the timestamp/delivery-id headers configured (a configured
        timestamp header must be signed, and a signed placeholder must have its header).
    """

    name = "generic-hmac"
    default_tolerance_seconds = 300
    option_names = frozenset(
        {
            "header",
            "prefix",
            "algorithm",
            "encoding",
            "timestamp_header",
            "timestamp_unit",
            "signed_template",
            "delivery_id_header",
        }
    )

    def __init__(
        self, options: Mapping[str, Any] | None = None, tolerance_seconds: int | None = None
    ) -> None:
        super().__init__(options, tolerance_seconds)
        opts = self.options
        for key, value in opts.items():
            if not isinstance(value, str):
                raise ConfigurationError(f"generic-hmac: option {key!r} must be a string")
        header = opts.get("header")
        if not header:
            raise ConfigurationError("generic-hmac: option 'header' (signature header) is required")
        self.header: str = header
        self.prefix: str = opts.get("prefix", "")
        self.algorithm: str = opts.get("algorithm", "sha256")
        if self.algorithm not in DIGESTS:
            raise ConfigurationError(
                f"generic-hmac: algorithm {self.algorithm!r} is not one of {sorted(DIGESTS)}"
            )
        self.encoding: str = opts.get("encoding", "hex")
        if self.encoding not in ENCODINGS:
            raise ConfigurationError(
                f"generic-hmac: encoding {self.encoding!r} is not one of {list(ENCODINGS)}"
            )
        unit = opts.get("timestamp_unit", "seconds")
        if unit not in TIMESTAMP_UNITS:
            raise ConfigurationError(
                f"generic-hmac: timestamp_unit {unit!r} is not one of {list(TIMESTAMP_UNITS)}"
            )
        self.timestamp_unit: str = unit
        self.timestamp_header: str | None = opts.get("timestamp_header") or None
        self.delivery_id_header: str | None = opts.get("delivery_id_header") or None
        self.template = _parse_template(opts.get("signed_template", "{body}"))
        if ("timestamp" in self.template) != (self.timestamp_header is not None):
            raise ConfigurationError(
                "generic-hmac: timestamp_header and a {timestamp} placeholder in signed_template "
                "go together (an unsigned timestamp proves nothing)"
            )
        if "delivery_id" in self.template and self.delivery_id_header is None:
            raise ConfigurationError(
                "generic-hmac: signed_template uses {delivery_id}: set delivery_id_header"
            )

    def _signed(self, body: bytes, timestamp: str | None, delivery_id: str | None) -> bytes:
        values = {"body": body, "timestamp": timestamp, "delivery_id": delivery_id}
        out = bytearray()
        for part in self.template:
            if isinstance(part, bytes):
                out += part
            else:
                value = values[part]
                out += value if isinstance(value, bytes) else str(value).encode("ascii")
        return bytes(out)

    def _decode(self, text: str) -> bytes | None:
        if self.encoding == "hex":
            return decode_hex(text, uppercase=True)
        return decode_base64(text)

    def _encode(self, digest: bytes) -> str:
        return digest.hex() if self.encoding == "hex" else base64.b64encode(digest).decode("ascii")

    def verify(self, request: WebhookRequest, secrets: Sequence[str], now: float) -> Verification:
        """Verify a delivery against the configured header, template, algorithm and encoding.

        Parameters
        ----------
        request : WebhookRequest
            Needs the signature header, the timestamp and delivery-id headers when configured,
            and the raw body bytes.
        secrets : Sequence[str]
            Secrets, current first.
        now : float
            Current Unix time in **seconds** (also for a milliseconds ``timestamp_unit``).

        Returns
        -------
        Verification
            ``secret_index`` of the matching secret; ``timestamp`` in ``timestamp_unit`` or
            ``None`` without a timestamp header.

        Raises
        ------
        VerificationError
            ``signature_missing`` (no signature header), ``signature_malformed`` (prefix
            missing, digest not in the configured encoding, signed delivery-id header missing
            or not ASCII), ``signature_invalid`` (no secret matches).
        TimestampError
            ``timestamp_missing``, ``timestamp_invalid`` (not a plain integer),
            ``timestamp_stale`` / ``timestamp_future`` (outside the tolerance).
        """
        value = signature_header(request, self.header)
        digest = (
            self._decode(value.removeprefix(self.prefix)) if value.startswith(self.prefix) else None
        )
        if digest is None:
            raise VerificationError(
                "signature_malformed", f"{self.header} is not {self.prefix}<{self.encoding}>"
            )
        raw_ts: str | None = None
        timestamp: int | None = None
        if self.timestamp_header is not None:
            raw_ts, timestamp = timestamp_header(request, self.timestamp_header)
        delivery_id: str | None = None
        if "delivery_id" in self.template and self.delivery_id_header is not None:
            delivery_id = request.header(self.delivery_id_header)
            if not delivery_id or not delivery_id.isascii():
                raise VerificationError(
                    "signature_malformed", f"{self.delivery_id_header} missing or not ASCII"
                )
        signed = self._signed(request.body, raw_ts, delivery_id)
        index = match_secrets(
            secrets,
            lambda secret: hmac_digest(secret.encode("utf-8"), signed, self.algorithm),
            [digest],
        )
        if timestamp is not None:
            self.check_fresh(timestamp / TIMESTAMP_UNITS[self.timestamp_unit], now)
        return Verification(secret_index=index, timestamp=timestamp)

    def sign(self, body: bytes, secret: str, *, timestamp: int, delivery_id: str) -> dict[str, str]:
        """Return the configured headers for ``body``.

        ``timestamp`` is Unix seconds (multiplied by 1000 for a milliseconds unit); the delivery
        id goes to ``delivery_id_header`` when one is configured.
        """
        headers: dict[str, str] = {}
        ts: str | None = None
        if self.timestamp_header is not None:
            ts = str(int(timestamp) * TIMESTAMP_UNITS[self.timestamp_unit])
            headers[self.timestamp_header] = ts
        if self.delivery_id_header is not None:
            headers[self.delivery_id_header] = delivery_id
        digest = hmac_digest(
            secret.encode("utf-8"), self._signed(body, ts, delivery_id), self.algorithm
        )
        headers[self.header] = self.prefix + self._encode(digest)
        return headers
