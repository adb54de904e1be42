"""Standard Webhooks (and Svix): ``webhook-id``, ``webhook-timestamp``, ``webhook-signature``.

Source of the scheme: the Standard Webhooks specification (standard-webhooks/standard-webhooks
``spec/standard-webhooks.md``) and its Python library ``standardwebhooks`` (``webhooks.py``);
Svix's ``svix-webhooks`` ``python/svix/webhooks.py`` for the ``svix-*`` header family, which Svix,
Clerk and Resend send.

What is signed: the message id, the timestamp and the body (``{id}.{ts}.{body}``). The delivery id
is therefore the signed id of the family the signature was read from; a request that also carries
the other family's id header with another value is rejected (``signature_mismatch``), so an
unsigned ``webhook-id`` next to a genuine ``svix-*`` delivery can never become a new delivery
(case C11).
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Sequence

from webhook_pipeline.errors import ConfigurationError, VerificationError
from webhook_pipeline.fields import FieldLocation
from webhook_pipeline.http import WebhookRequest
from webhook_pipeline.providers.base import (
    HOUR,
    Defaults,
    Provider,
    Sample,
    Signs,
    Vector,
    Verified,
    iso_utc,
)
from webhook_pipeline.providers.crypto import (
    decode_base64,
    hmac_digest,
    match_secrets,
    signature_header,
    timestamp_header,
)
from webhook_pipeline.providers.registry import register

SECRET_PREFIX = "whsec_"
#: The shortest key accepted (bytes); the specification recommends 24 to 64.
MIN_KEY_BYTES = 16
#: Header families (name, id, timestamp, signature), tried in order.
FAMILIES = (
    ("webhook", "webhook-id", "webhook-timestamp", "webhook-signature"),
    ("svix", "svix-id", "svix-timestamp", "svix-signature"),
)


def decode_secret(secret: str) -> bytes:
    """The HMAC key of a ``whsec_<base64>`` secret (or of a bare base64 secret).

    Missing ``=`` padding is tolerated, as the ``standardwebhooks`` library does; anything else
    that is not standard base64 is refused.

    Raises
    ------
    ConfigurationError
        The part after the prefix is not base64, or decodes to fewer than 16 bytes. The secret
        itself is never put in the message.
    """
    encoded = secret.removeprefix(SECRET_PREFIX)
    encoded += "=" * (-len(encoded) % 4)
    try:
        key = base64.b64decode(encoded, validate=True)
    except (binascii.Error, ValueError) as exc:
        raise ConfigurationError("the secret is not whsec_<base64>") from exc
    if len(key) < MIN_KEY_BYTES:
        raise ConfigurationError(
            f"the secret decodes to {len(key)} bytes; a whsec_ key has at least {MIN_KEY_BYTES}"
        )
    return key


def signed_content(msg_id: str, timestamp: str, body: bytes) -> bytes:
    """The bytes a Standard Webhooks sender signs: ``{id}.{timestamp}.{body}``."""
    return msg_id.encode("ascii") + b"." + timestamp.encode("ascii") + b"." + body


@register
class StandardWebhooks(Provider):
    """The Standard Webhooks symmetric scheme (``v1``), as sent by Svix and others.

    Header shapes: ``webhook-id: msg_...``, ``webhook-timestamp: <seconds>``,
    ``webhook-signature: v1,<base64> [v1,<base64> ...]`` (space-separated; other versions such
    as the asymmetric ``v1a`` are ignored). ``svix-id`` / ``svix-timestamp`` /
    ``svix-signature`` are read instead when no ``webhook-signature`` is present.
    Signed bytes: ``{id}.{timestamp}.{body}`` (id and timestamp exactly as sent, raw body).
    HMAC-SHA256, standard base64. Key: the base64 part of ``whsec_<base64>`` decoded.
    Timestamp: Unix **seconds**, a plain integer; tolerance 300 s by default, both directions.
    """

    name = "standard-webhooks"
    title = "Standard Webhooks / Svix"
    reference = (
        "standard-webhooks spec/standard-webhooks.md; standardwebhooks webhooks.py; "
        "svix-webhooks python/svix/webhooks.py"
    )
    signs = Signs(
        id="webhook-id (or svix-id) header",
        timestamp="webhook-timestamp (or svix-timestamp) header, seconds",
        note="id, timestamp and body are signed; headers of the other family are not",
    )
    defaults = Defaults(
        delivery_id=FieldLocation(signed="id"),
        event_type=FieldLocation(body="type"),
        resource_key=FieldLocation(body="data.id"),
        sequence=FieldLocation(body="timestamp", format="iso8601"),
    )
    default_tolerance_seconds = 300
    retry_horizon_seconds = 28 * HOUR
    retry_horizon_reference = (
        "standard-webhooks spec: retries 0, 5 s, 5 min, 30 min, 2 h, 5 h, 10 h, 10 h (about 27.6 h)"
    )
    stop_statuses = frozenset({410})
    signature_header = "webhook-signature"
    timestamp_header = "webhook-timestamp"
    dev_secret = "whsec_" + base64.b64encode(b"dev-standard-webhooks-secret-32b").decode()
    vectors = (
        Vector(
            secret="whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",
            headers={
                "webhook-id": "msg_p5jXN8AQM9LWM0D4loKWxJek",
                "webhook-timestamp": "1614265330",
                "webhook-signature": "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=",
            },
            body=b'{"test": 2432232314}',
            now=1_614_265_330,
            origin="published",
            reference="standard-webhooks spec and library tests",
            delivery_id="msg_p5jXN8AQM9LWM0D4loKWxJek",
        ),
        Vector(
            secret="whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",
            headers={
                "svix-id": "msg_p5jXN8AQM9LWM0D4loKWxJek",
                "svix-timestamp": "1614265330",
                "svix-signature": "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=",
            },
            body=b'{"test": 2432232314}',
            now=1_614_265_330,
            origin="published",
            reference="the same vector under Svix's svix-* headers (svix-webhooks)",
            delivery_id="msg_p5jXN8AQM9LWM0D4loKWxJek",
        ),
    )

    def validate_secret(self, secret: str) -> None:
        """A ``whsec_<base64>`` secret of at least 16 key bytes (raises ConfigurationError)."""
        decode_secret(secret)

    def signed_header_names(self) -> frozenset[str]:
        return frozenset(h for family in FAMILIES for h in family[1:3])

    def verify(self, request: WebhookRequest, secrets: Sequence[str], now: float) -> Verified:
        """Verify a Standard Webhooks / Svix delivery.

        Returns
        -------
        Verified
            ``secret_index``, ``timestamp`` (seconds), ``delivery_id`` (the signed id),
            ``family`` (``webhook`` or ``svix``) and the two signed headers.

        Raises
        ------
        VerificationError
            ``signature_missing`` (no signature header), ``signature_malformed`` (no id, no
            ``v1`` entry in base64), ``signature_invalid`` (no secret matches),
            ``signature_mismatch`` (the other family's id or timestamp header is present with a
            different value).
        TimestampError
            ``timestamp_missing``, ``timestamp_invalid`` (not a plain integer),
            ``timestamp_stale`` / ``timestamp_future`` (outside the tolerance).
        """
        family, id_header, ts_header, sig_header = next(
            (f for f in FAMILIES if request.header(f[3]) is not None), FAMILIES[0]
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
        for _, other_id, other_ts, _ in FAMILIES:
            for other, ours in ((other_id, msg_id), (other_ts, raw_ts)):
                seen = request.header(other)
                if seen is not None and seen != ours:
                    raise VerificationError(
                        "signature_mismatch", f"{other} disagrees with the signed {family} headers"
                    )
        self.check_fresh(timestamp, now)
        return Verified(
            secret_index=index,
            timestamp=timestamp,
            delivery_id=msg_id,
            signed_headers=frozenset({id_header, ts_header}),
            family=family,
        )

    def sign(
        self, body: bytes, secret: str, *, timestamp: int, delivery_id: str, url: str = ""
    ) -> dict[str, str]:
        """``webhook-id`` (= ``delivery_id``), ``webhook-timestamp`` (Unix seconds) and
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

    def sample(
        self,
        *,
        delivery_id: str,
        resource: str,
        sequence: int,
        event_type: str | None,
        timestamp: int,
    ) -> Sample:
        return Sample.json(
            {
                "type": event_type or "invoice.paid",
                "timestamp": iso_utc(sequence),
                "data": {"id": resource},
            }
        )

    def new_delivery_id(self, random_hex: str) -> str:
        return f"msg_{random_hex[:24]}"

    def random_secret(self, entropy: bytes) -> str:
        return SECRET_PREFIX + base64.b64encode(entropy[:24]).decode("ascii")
