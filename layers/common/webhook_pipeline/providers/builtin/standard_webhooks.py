"""Standard Webhooks (and Svix): ``webhook-id``, ``webhook-timestamp``, ``webhook-signature``.

Source of the scheme: the Standard Webhooks specification (standard-webhooks/standard-webhooks
``spec/standard-webhooks.md``) and its Python library ``standardwebhooks`` (``webhooks.py``);
Svix's ``svix-webhooks`` ``python/svix/webhooks.py`` for the ``svix-*`` header family, which Svix,
Clerk and Resend send; the asymmetric ``v1a`` scheme (Ed25519, ``whsk_`` secret keys and ``whpk_``
public keys) as the specification's "Signature scheme" section and the reference Go library
(``libraries/go/webhook_asymmetric.go``, whose test holds the published ``v1a`` vector) define it.
The Python library (``standardwebhooks`` 1.1) has no ``v1a``.

What is signed: the message id, the timestamp and the body (``{id}.{ts}.{body}``). The delivery id
is therefore the signed id of the family the signature was read from; a request that also carries
the other family's id header with another value is rejected (``signature_mismatch``), so an
unsigned ``webhook-id`` next to a genuine ``svix-*`` delivery can never become a new delivery
(case C11).

Symmetric or asymmetric is chosen by the stored key, never by the request: a ``whsec_`` secret
verifies ``v1`` entries (HMAC-SHA256), a ``whpk_`` public key verifies ``v1a`` entries (Ed25519
over the same ``{id}.{ts}.{body}``); a source rotating from one to the other stores both. A
``whsk_`` secret key is the sender's: storing it is refused (store its ``whpk_`` public key).

(Over 400 lines: a provider is one module, and this one holds two schemes and three key formats.)
"""

from __future__ import annotations

import base64
import binascii
import dataclasses
import functools
import re
from collections.abc import Mapping, Sequence

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from webhook_pipeline.errors import ConfigurationError, TimestampError, VerificationError
from webhook_pipeline.fields import FieldLocation
from webhook_pipeline.providers.base import Provider
from webhook_pipeline.providers.crypto import (
    constant_time_equal,
    decode_base64,
    hmac_digest,
    signature_header,
)
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

SECRET_PREFIX = "whsec_"
#: Asymmetric (``v1a``) keys: the sender's secret key and the public key receivers store.
SECRET_KEY_PREFIX = "whsk_"
PUBLIC_KEY_PREFIX = "whpk_"
#: The shortest key accepted (bytes); the specification recommends 24 to 64.
MIN_KEY_BYTES = 16
#: Header families (name, id, timestamp, signature), tried in order.
FAMILIES = (
    ("webhook", "webhook-id", "webhook-timestamp", "webhook-signature"),
    ("svix", "svix-id", "svix-timestamp", "svix-signature"),
)


def as_svix(headers: Mapping[str, str]) -> dict[str, str]:
    """``webhook-*`` headers renamed to the ``svix-*`` family Svix sends."""
    return {k.replace("webhook-", "svix-", 1): v for k, v in headers.items()}


def published_vector() -> samples.Vector:
    """The spec's published vector, under the ``webhook-*`` headers."""
    return samples.Vector(
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
    )


def svix_vector() -> samples.Vector:
    """The spec's published vector under Svix's ``svix-*`` headers."""
    published = published_vector()
    return dataclasses.replace(
        published,
        headers=as_svix(published.headers),
        reference="the same vector under Svix's svix-* headers (svix-webhooks)",
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


@functools.lru_cache(maxsize=64)
def decode_public_key(secret: str) -> Ed25519PublicKey:
    """The Ed25519 key of a ``whpk_<base64 of the 32-byte public key>`` value.

    Raises
    ------
    ConfigurationError
        Not padded base64 after the prefix, or not 32 bytes.
    """
    raw = decode_base64(secret.removeprefix(PUBLIC_KEY_PREFIX), canonical=False)
    if raw is None or len(raw) != 32:
        raise ConfigurationError("a whpk_ key is base64 of a 32-byte Ed25519 public key")
    return Ed25519PublicKey.from_public_bytes(raw)


@functools.lru_cache(maxsize=16)
def decode_secret_key(secret: str) -> Ed25519PrivateKey:
    """The Ed25519 signing key of a ``whsk_`` value: base64 of the 32-byte seed (as the
    reference Go library reads it), or of the 64-byte seed + public key (libsodium's form,
    whose public half must then match).

    Raises
    ------
    ConfigurationError
        Not base64 of 32 or 64 bytes, or a 64-byte key whose halves disagree.
    """
    raw = decode_base64(secret.removeprefix(SECRET_KEY_PREFIX), canonical=False)
    if raw is None or len(raw) not in (32, 64):
        raise ConfigurationError("a whsk_ key is base64 of a 32-byte Ed25519 seed")
    key = Ed25519PrivateKey.from_private_bytes(raw[:32])
    if len(raw) == 64 and raw[32:] != _raw_public(key):
        raise ConfigurationError("the whsk_ key's public half is not its seed's public key")
    return key


def _raw_public(key: Ed25519PrivateKey) -> bytes:
    return key.public_key().public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)


def public_key_of(secret_key: str) -> str:
    """The ``whpk_`` public key of a ``whsk_`` secret key."""
    raw = _raw_public(decode_secret_key(secret_key))
    return PUBLIC_KEY_PREFIX + base64.b64encode(raw).decode("ascii")


#: A timestamp as both Svix libraries read it: Unix seconds, with an optional decimal fraction
#: of up to 6 digits.
_TIMESTAMP = re.compile(r"([0-9]{1,19})(?:\.[0-9]{1,6})?")


def read_timestamp(raw: str | None) -> tuple[str, float]:
    """The seconds a sender signs for a timestamp header ``raw``, and its value.

    Follows the ``standardwebhooks`` / ``svix`` libraries: Python's reads the header with
    ``float()`` and signs ``str(floor(value))``, the JavaScript one (``@clerk/backend`` and
    Svix's own) with ``parseInt`` and signs that integer. A header with a decimal fraction
    (``1700000000.123``, as Clerk's own tests send) is therefore accepted, and the signed
    content holds its integer part written without leading zeros (``1700000000``). What only
    a lax parse accepts (spaces, a sign, an exponent, ``_``, ``nan``, anything after the
    number) is refused, as for every provider (case C05), and so are fractions finer than a
    microsecond, where the two libraries disagree (``float("<seconds>.999999999")`` rounds up to the
    next second, ``parseInt`` does not).

    Returns
    -------
    tuple[str, float]
        The integer part as signed (``"1700000000"``), and the value in seconds (with the
        fraction, for the freshness check).

    Raises
    ------
    TimestampError
        ``timestamp_missing`` (absent or empty), ``timestamp_invalid`` (another shape).
    """
    if raw is None or raw == "":
        raise TimestampError("timestamp_missing")
    match = _TIMESTAMP.fullmatch(raw) if raw.isascii() else None
    if match is None:
        raise TimestampError("timestamp_invalid", "not Unix seconds")
    return str(int(match.group(1))), float(raw)


def signed_content(msg_id: str, timestamp: str, body: bytes) -> bytes:
    """The bytes a Standard Webhooks sender signs: ``{id}.{timestamp}.{body}``."""
    return msg_id.encode("ascii") + b"." + timestamp.encode("ascii") + b"." + body


def _signatures(value: str) -> tuple[list[bytes], list[bytes]]:
    """The decoded ``v1`` (HMAC) and ``v1a`` (64-byte Ed25519) entries of a signature header;
    entries of other versions or not in base64 are passed over. Another spelling of the same
    bytes (unused bits set in the last character) is accepted: the ``standardwebhooks`` and
    ``svix`` libraries decode each entry (``base64.b64decode``) and compare bytes."""
    symmetric: list[bytes] = []
    asymmetric: list[bytes] = []
    for entry in value.split(" "):
        version, sep, encoded = entry.partition(",")
        if not sep or (decoded := decode_base64(encoded, canonical=False)) is None:
            continue
        if version == "v1":
            symmetric.append(decoded)
        elif version == "v1a" and len(decoded) == 64:
            asymmetric.append(decoded)
    return symmetric, asymmetric


def _match(
    secrets: Sequence[str], signed: bytes, symmetric: list[bytes], asymmetric: list[bytes]
) -> int:
    """The index of the first stored key that verifies: a ``whpk_`` key against the ``v1a``
    signatures (Ed25519), a ``whsec_`` secret against the ``v1`` ones (HMAC, compared in
    constant time with every candidate).

    Raises
    ------
    VerificationError
        ``signature_invalid``: no stored key verifies any signature.
    """
    for index, secret in enumerate(secrets):
        matched = False
        if secret.startswith(PUBLIC_KEY_PREFIX):
            key = decode_public_key(secret)
            for signature in asymmetric:
                try:
                    key.verify(signature, signed)
                except InvalidSignature:
                    continue
                matched = True
        else:
            digest = hmac_digest(decode_secret(secret), signed)
            for candidate in symmetric:
                matched |= constant_time_equal(digest, candidate)
        if matched:
            return index
    raise VerificationError("signature_invalid")


@register
class StandardWebhooks(Provider):
    """The Standard Webhooks schemes, symmetric ``v1`` (as sent by Svix and others) and
    asymmetric ``v1a``.

    Header shapes: ``webhook-id: msg_...``, ``webhook-timestamp: <seconds>``,
    ``webhook-signature: v1,<base64> [v1a,<base64> ...]`` (space-separated; unknown versions
    are ignored). ``svix-id`` / ``svix-timestamp`` / ``svix-signature`` are read instead when no
    ``webhook-signature`` is present.
    Signed bytes: ``{id}.{timestamp}.{body}`` (the id exactly as sent, the timestamp's integer
    part as :func:`read_timestamp` gives it, the raw body).
    ``v1``: HMAC-SHA256, standard base64; key: the base64 part of ``whsec_<base64>`` decoded.
    ``v1a``: Ed25519 (64-byte signature, standard base64); key: ``whpk_<base64 of 32 bytes>``.
    Timestamp: Unix **seconds**, an integer with an optional decimal fraction (as the Svix
    libraries read it; :func:`read_timestamp`); tolerance 300 s by default, both directions.
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
    timestamp_fraction = True
    dev_secret = "whsec_" + base64.b64encode(b"dev-standard-webhooks-secret-32b").decode()
    vectors = LazyVectors(
        lambda: (
            published_vector(),
            svix_vector(),
            samples.Vector(
                # The public key of the Go library's test seed "TESTSIGNINGKEYDONOTUSETHISFORANY".
                secret="whpk_ZlN4eg7dSSqi0moX9hQUk3orrOouK3QVQSlJa248c/g=",
                headers={
                    "webhook-id": "msg_p5jXN8AQM9LWM0D4loKWxJek",
                    "webhook-timestamp": "1614265330",
                    "webhook-signature": (
                        "v1a,tQ9V2XOqn7jL/DQenEFpqIugdBVtiMmER5mhSkXBNwM0mkATuDe6KYYUuxqtaiHeYGb7KaaBR"
                        "dM5WqyeFiL8Ag=="
                    ),
                },
                body=b'{"test": 2432232314}',
                now=1_614_265_330,
                origin="published",
                reference=(
                    "standard-webhooks libraries/go/webhook_asymmetric_test.go "
                    "(TestAsymmetricWebhookSign, v1a)"
                ),
                delivery_id="msg_p5jXN8AQM9LWM0D4loKWxJek",
            ),
        )
    )

    def validate_secret(self, secret: str) -> None:
        """A ``whsec_<base64>`` secret of at least 16 key bytes, or a ``whpk_`` Ed25519 public
        key; a ``whsk_`` secret key is refused (raises ConfigurationError)."""
        if secret.startswith(SECRET_KEY_PREFIX):
            raise ConfigurationError(
                "a whsk_ key is the sender's signing key: store its whpk_ public key"
            )
        if secret.startswith(PUBLIC_KEY_PREFIX):
            decode_public_key(secret)
        else:
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
            ``timestamp_missing``, ``timestamp_invalid`` (not Unix seconds with an optional
            fraction), ``timestamp_stale`` / ``timestamp_future`` (outside the tolerance).
        ConfigurationError
            No secret, or an empty one.
        """
        family, id_header, ts_header, sig_header = next(
            (f for f in FAMILIES if request.header(f[3]) is not None), FAMILIES[0]
        )
        value = signature_header(request, sig_header)
        msg_id = request.header(id_header)
        if not msg_id or not msg_id.isascii():
            raise VerificationError("signature_malformed", f"{id_header} missing or not ASCII")
        raw_ts = request.header(ts_header)
        seconds, timestamp = read_timestamp(raw_ts)
        symmetric, asymmetric = _signatures(value)
        if not secrets or any(not s for s in secrets):
            raise ConfigurationError("signature verification needs at least one non-empty secret")
        public = [s.startswith(PUBLIC_KEY_PREFIX) for s in secrets]
        if not ((symmetric and not all(public)) or (asymmetric and any(public))):
            wanted = "v1a" if all(public) else ("v1" if not any(public) else "v1 or v1a")
            raise VerificationError(
                "signature_malformed", f"{sig_header} has no base64 {wanted} entry"
            )
        signed = signed_content(msg_id, seconds, request.body)
        index = _match(secrets, signed, symmetric, asymmetric)
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
            timestamp=int(seconds),
            delivery_id=msg_id,
            signed_headers=frozenset({id_header, ts_header}),
            family=family,
        )

    def sign(
        self, body: bytes, secret: str, *, timestamp: int, delivery_id: str, url: str = ""
    ) -> dict[str, str]:
        """``webhook-id`` (= ``delivery_id``), ``webhook-timestamp`` (Unix seconds) and
        ``webhook-signature: v1,<base64>`` (``v1a,<base64>`` for a ``whsk_`` secret key).

        Raises
        ------
        ConfigurationError
            ``secret`` is neither ``whsec_<base64>`` nor a ``whsk_`` key.
        """
        ts = str(int(timestamp))
        content = signed_content(delivery_id, ts, body)
        if secret.startswith(SECRET_KEY_PREFIX):
            entry = "v1a," + base64.b64encode(decode_secret_key(secret).sign(content)).decode()
        else:
            entry = "v1," + base64.b64encode(hmac_digest(decode_secret(secret), content)).decode()
        return {"webhook-id": delivery_id, "webhook-timestamp": ts, "webhook-signature": entry}

    def verification_secret(self, signing_secret: str) -> str:
        """The ``whpk_`` public key of a ``whsk_`` secret key; a ``whsec_`` secret itself."""
        if signing_secret.startswith(SECRET_KEY_PREFIX):
            return public_key_of(signing_secret)
        return signing_secret

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
                "type": event_type or "invoice.paid",
                "timestamp": iso_utc(sequence),
                "data": {"id": resource},
            }
        )

    def new_delivery_id(self, random_hex: str) -> str:
        return f"msg_{random_hex[:24]}"

    def random_secret(self, entropy: bytes) -> str:
        return SECRET_PREFIX + base64.b64encode(entropy[:24]).decode("ascii")
