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
header" family (e.g. GitHub's legacy ``X-Hub-Signature: sha1=``, Intercom, Linear).

What is signed is what the template says. The delivery id is signed only when the template has
``{delivery_id}`` (then the id IS that header's value, and a source may not read it elsewhere);
otherwise a source reading its id from a header loads with a loud warning, or fails to load with
``require_signed_id = true``. A ``{delivery_id}`` next to a literal separator is unambiguous only
if the id cannot contain that separator: such ids are refused (``signature_malformed``), so
``{delivery_id}.{body}`` cannot verify id ``ord.1`` + body ``2.{...}`` as id ``ord`` + body
``1.2.{...}``.
"""

from __future__ import annotations

import base64
import string
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

from webhook_pipeline.errors import ConfigurationError, VerificationError
from webhook_pipeline.fields import FieldLocation
from webhook_pipeline.providers.base import Provider
from webhook_pipeline.providers.crypto import (
    DIGESTS,
    decode_base64,
    decode_hex,
    hmac_digest,
    match_secrets,
    signature_header,
    timestamp_header,
)
from webhook_pipeline.providers.model import DAY, Defaults, LazyVectors, Signs, Verified, samples
from webhook_pipeline.providers.registry import register
from webhook_pipeline.webhook_request import WebhookRequest

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
    for index, part in enumerate(parts):
        if part != "delivery_id":
            continue
        for neighbour in (parts[index - 1] if index else None, parts[index + 1 : index + 2]):
            if isinstance(neighbour, list):
                neighbour = neighbour[0] if neighbour else None
            if isinstance(neighbour, str):
                raise ConfigurationError(
                    "generic-hmac: signed_template puts {delivery_id} right next to "
                    f"{{{neighbour}}}: put a separator between them"
                )
    return parts


def id_separators(parts: list[_Part]) -> str:
    """The characters of the literals that separate ``{delivery_id}`` from another placeholder:
    an id containing one of them could be split at another place with the same signed bytes
    (``{delivery_id}.{body}``: id ``ord.1`` + body ``2.{..}`` = id ``ord`` + body ``1.2.{..}``),
    so such ids are refused. A literal at the start or end of the template anchors the id and
    does not count."""
    chars: set[str] = set()
    for index, part in enumerate(parts):
        if part != "delivery_id":
            continue
        for literal, beyond in ((index - 1, index - 2), (index + 1, index + 2)):
            text = parts[literal] if 0 <= beyond < len(parts) else None
            if isinstance(text, bytes) and isinstance(parts[beyond], str):
                chars.update(text.decode("utf-8"))
    return "".join(sorted(chars))


@register
class GenericHmac(Provider):
    """HMAC over a configurable template of timestamp, body and delivery id.

    Header shapes: ``<header>: <prefix><digest>`` with the digest in hex (either case) or
    padded standard base64; optionally ``<timestamp_header>: <integer>`` in seconds or
    milliseconds (``timestamp_unit``) and ``<delivery_id_header>: <id>``.
    Signed bytes: ``signed_template`` with ``{body}`` replaced by the raw body bytes (never
    decoded), ``{timestamp}`` and ``{delivery_id}`` by the header values exactly as sent.
    Key: the secret as UTF-8. Timestamp (when configured): tolerance 300 s by default, both
    directions; ``Verified.timestamp`` is in seconds.

    Raises
    ------
    ConfigurationError
        From the constructor, for an unknown option key, a missing ``header``, an unknown
        ``algorithm``, ``encoding`` or ``timestamp_unit``, a non-string option, or a template
        that does not match the timestamp/delivery-id headers configured (a configured
        timestamp header must be signed, and a signed placeholder must have its header).
    """

    name = "generic-hmac"
    title = "Generic HMAC"
    reference = "configurable: header, prefix, algorithm, encoding, timestamp, signed template"
    signs = Signs(
        id="the delivery id header, only when the template has {delivery_id}",
        timestamp="the timestamp header, when configured",
        note="what the template covers; anything else is unsigned",
    )
    defaults = Defaults(delivery_id=None)
    default_tolerance_seconds = 300
    retry_horizon_seconds = 3 * DAY
    retry_horizon_reference = "no single sender: 3 days unless the source sets dedup_ttl_seconds"
    dev_secret = "dev-generic-hmac-secret-local"
    example_options: ClassVar[Mapping[str, Any]] = {
        "header": "X-Signature",
        "prefix": "sha256=",
        "timestamp_header": "X-Timestamp",
        "delivery_id_header": "X-Delivery-Id",
        "signed_template": "{delivery_id}.{timestamp}.{body}",
    }
    vectors = LazyVectors(
        lambda: (
            samples.Vector(
                secret="It's a Secret to Everybody",
                headers={
                    "X-Signature": "sha256="
                    "757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17"
                },
                body=b"Hello, World!",
                now=0,
                origin="published",
                reference=(
                    "GitHub's published vector, configured as header X-Signature, sha256=, hex"
                ),
                options={"header": "X-Signature", "prefix": "sha256="},
            ),
        )
    )
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
        self.signature_header = header
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
        self.timestamp_unit = "milliseconds" if unit == "milliseconds" else "seconds"
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
        self.id_separators = id_separators(self.template)

    @property
    def signs_id(self) -> bool:
        """Whether the template covers the delivery id header."""
        return "delivery_id" in self.template

    def signed_header_names(self) -> frozenset[str]:
        names = set()
        if self.timestamp_header is not None:
            names.add(self.timestamp_header.lower())
        if self.signs_id and self.delivery_id_header is not None:
            names.add(self.delivery_id_header.lower())
        return frozenset(names)

    def field_defaults(self) -> Defaults:
        """The delivery id is the signed one when the template covers it; otherwise the source
        must say where it is."""
        if self.signs_id:
            return Defaults(delivery_id=FieldLocation(signed="id"))
        return self.defaults

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

    def _signed_delivery_id(self, request: WebhookRequest) -> str | None:
        """The delivery-id header's value where the template signs it (``None`` otherwise).

        Raises
        ------
        VerificationError
            ``signature_malformed``: missing, not ASCII or containing a template separator.
        """
        delivery_id: str | None = None
        if "delivery_id" in self.template and self.delivery_id_header is not None:
            delivery_id = request.header(self.delivery_id_header)
            if not delivery_id or not delivery_id.isascii():
                raise VerificationError(
                    "signature_malformed", f"{self.delivery_id_header} missing or not ASCII"
                )
            if any(ch in delivery_id for ch in self.id_separators):
                raise VerificationError(
                    "signature_malformed",
                    f"{self.delivery_id_header} contains a separator of the signed template",
                )
        return delivery_id

    def verify(self, request: WebhookRequest, secrets: Sequence[str], now: float) -> Verified:
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
        Verified
            ``secret_index`` of the matching secret; ``timestamp`` in seconds (``None`` without
            a timestamp header); ``delivery_id`` when the template signs it.

        Raises
        ------
        VerificationError
            ``signature_missing`` (no signature header), ``signature_malformed`` (prefix
            missing, digest not in the configured encoding, signed delivery-id header missing,
            not ASCII or containing a separator of the template), ``signature_invalid`` (no
            secret matches).
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
        delivery_id = self._signed_delivery_id(request)
        signed = self._signed(request.body, raw_ts, delivery_id)
        index = match_secrets(
            secrets,
            lambda secret: hmac_digest(secret.encode("utf-8"), signed, self.algorithm),
            [digest],
        )
        seconds: int | None = None
        if timestamp is not None:
            seconds = timestamp // TIMESTAMP_UNITS[self.timestamp_unit]
            self.check_fresh(timestamp / TIMESTAMP_UNITS[self.timestamp_unit], now)
        return Verified(
            secret_index=index,
            timestamp=seconds,
            delivery_id=delivery_id,
            signed_headers=self.signed_header_names(),
            raw_timestamp=raw_ts,
        )

    def sign(
        self, body: bytes, secret: str, *, timestamp: int, delivery_id: str, url: str = ""
    ) -> dict[str, str]:
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

    def sample(
        self,
        *,
        delivery_id: str,
        resource: str,
        sequence: int,
        event_type: str | None,
        timestamp: int,
    ) -> samples.Sample:
        headers = {"X-Delivery-Id": delivery_id} if self.delivery_id_header is None else {}
        return samples.Sample.json(
            {
                "type": event_type or "resource.updated",
                "resource": {"id": resource, "version": sequence},
            },
            **headers,
        )
