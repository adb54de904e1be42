"""SendGrid (Twilio SendGrid) signed Event Webhook: ECDSA P-256 over ``{timestamp}{body}``.

Source of the scheme: Twilio SendGrid "Getting Started with the Event Webhook Security Features"
(twilio.com/docs/sendgrid/for-developers/tracking-events/getting-started-event-webhook-security-
features) and the official SDK, ``sendgrid/sendgrid-python``
``sendgrid/helpers/eventwebhook/__init__.py`` (``EventWebhook.verify_signature``) with its test
vector in ``test/unit/test_eventwebhook.py``.

What is signed: the timestamp header and the raw body, byte for byte, **including the trailing
``\\r\\n``** SendGrid appends (the published vector fails without it). The body is a JSON array of
events; each event is its own delivery with its own ``sg_event_id`` (inside the signed body).
SendGrid signs no delivery id header.

Keys: SendGrid keeps the private key; the account's verification key (``GET
/v3/user/webhooks/event/settings/signed``, ``public_key``) is the base64 of a DER
SubjectPublicKeyInfo of a P-256 key, and that is what a source stores. The development secret
is a private key (base64 of an unencrypted DER PKCS#8 P-256 key) from which the stored public
key is derived (:meth:`SendGrid.verification_secret`).

Ordering: none by default. Events are a stream (processed, delivered, open, click...) rather
than states of one resource: marking a late ``delivered`` stale behind an ``open`` would keep it
from the hook. A source that wants per-message order sets
``resource_key = { body = "sg_message_id" }`` and ``sequence = { body = "timestamp",
format = "int" }`` (every event of its POSTs must then carry both, or the POST is 400).
"""

from __future__ import annotations

import base64
import functools
import hashlib
from collections.abc import Sequence

from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec

from webhook_pipeline.errors import ConfigurationError, VerificationError
from webhook_pipeline.fields import FieldLocation
from webhook_pipeline.providers.crypto import (
    decode_base64,
    signature_header,
    timestamp_header,
)
from webhook_pipeline.providers.key_pairs import KeyPairProvider
from webhook_pipeline.providers.model import HOUR, Defaults, LazyVectors, Signs, Verified, samples
from webhook_pipeline.providers.registry import register
from webhook_pipeline.webhook_request import WebhookRequest

HEADER = "X-Twilio-Email-Event-Webhook-Signature"
TIMESTAMP_HEADER = "X-Twilio-Email-Event-Webhook-Timestamp"
#: The order of the P-256 group (private scalars are 1 .. N-1).
_P256_ORDER = 0xFFFFFFFF00000000FFFFFFFFFFFFFFFFBCE6FAADA7179E84F3B9CAC2FC632551


@functools.lru_cache(maxsize=64)
def load_public_key(stored: str) -> ec.EllipticCurvePublicKey:
    """The P-256 public key of a stored verification key (base64 DER SubjectPublicKeyInfo).

    Raises
    ------
    ConfigurationError
        Not base64, not a DER public key, or not a P-256 (secp256r1) EC key; the key itself is
        never put in the message.
    """
    der = decode_base64(stored, canonical=False)
    if der is None:
        raise ConfigurationError("the SendGrid verification key is not standard base64")
    try:
        key = serialization.load_der_public_key(der)
    except (ValueError, TypeError) as exc:
        raise ConfigurationError(
            "the SendGrid verification key is not a DER SubjectPublicKeyInfo"
        ) from exc
    if not isinstance(key, ec.EllipticCurvePublicKey) or key.curve.name != "secp256r1":
        raise ConfigurationError("the SendGrid verification key is not an ECDSA P-256 key")
    return key


@functools.lru_cache(maxsize=16)
def load_private_key(secret: str) -> ec.EllipticCurvePrivateKey:
    """The P-256 private key of a development signing secret (base64 DER PKCS#8).

    Raises
    ------
    ConfigurationError
        Not base64 DER PKCS#8 of an unencrypted P-256 key.
    """
    der = decode_base64(secret, canonical=False)
    try:
        key = serialization.load_der_private_key(der or b"", password=None)
    except (ValueError, TypeError) as exc:
        raise ConfigurationError(
            "a SendGrid signing key is base64 DER PKCS#8 (the private key; sources store the "
            "public key)"
        ) from exc
    if not isinstance(key, ec.EllipticCurvePrivateKey) or key.curve.name != "secp256r1":
        raise ConfigurationError("a SendGrid signing key is an ECDSA P-256 private key")
    return key


def public_key_text(key: ec.EllipticCurvePrivateKey) -> str:
    """The base64 DER SubjectPublicKeyInfo of ``key``'s public half (what SendGrid shows)."""
    der = key.public_key().public_bytes(
        serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    return base64.b64encode(der).decode("ascii")


def private_key_text(key: ec.EllipticCurvePrivateKey) -> str:
    """``key`` as base64 DER PKCS#8 (unencrypted): the development secret format."""
    der = key.private_bytes(
        serialization.Encoding.DER,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )
    return base64.b64encode(der).decode("ascii")


def _key_from_entropy(entropy: bytes) -> ec.EllipticCurvePrivateKey:
    scalar = int.from_bytes(hashlib.sha256(entropy).digest(), "big") % (_P256_ORDER - 1) + 1
    return ec.derive_private_key(scalar, ec.SECP256R1())


@register
class SendGrid(KeyPairProvider[ec.EllipticCurvePublicKey, ec.EllipticCurvePrivateKey]):
    """SendGrid's signed Event Webhook.

    Header shapes: ``X-Twilio-Email-Event-Webhook-Signature: <base64 DER ECDSA signature>``,
    ``X-Twilio-Email-Event-Webhook-Timestamp: <seconds>``.
    Signed bytes: ``{timestamp}{body}`` (no separator; timestamp exactly as sent, the raw body
    with its trailing CRLF). ECDSA P-256 with SHA-256. Key: the account's public key.
    Timestamp: Unix **seconds**, a plain integer. SendGrid's SDK checks no freshness at all;
    ours is 300 s both ways: the timestamp is set when a POST is signed and we verify at the
    edge as the request arrives, so 300 s covers clock skew with room, and a captured batch
    cannot be replayed after five minutes (within them the gate's per-event ids answer it).
    """

    name = "sendgrid"
    title = "SendGrid Event Webhook"
    reference = (
        "twilio.com/docs/sendgrid getting-started-event-webhook-security-features; "
        "sendgrid/sendgrid-python sendgrid/helpers/eventwebhook/__init__.py"
    )
    signs = Signs(
        id="per event sg_event_id, inside the signed body",
        timestamp="X-Twilio-Email-Event-Webhook-Timestamp header, seconds",
        note="timestamp and body (trailing CRLF included) are signed; no id header is sent",
    )
    defaults = Defaults(
        delivery_id=FieldLocation(body="sg_event_id"),
        event_type=FieldLocation(body="event"),
    )
    body_formats = frozenset({"json"})
    # One POST when the batch reaches 768 KB or after about 30 s (SendGrid Event Webhook docs):
    # no count, bounded by MAX_BODY_BYTES (1 MiB by default), not by a number of events.
    batch_path = ""
    default_tolerance_seconds = 300
    retry_horizon_seconds = 30 * HOUR
    retry_horizon_reference = (
        "no retry window published (UNVERIFIED); duplicates observed over 29 h "
        "(sendgrid/docs#2933): 30 h covers them"
    )
    signature_header = HEADER
    timestamp_header = TIMESTAMP_HEADER
    #: ``_key_from_entropy(b"development sendgrid event webhook key (local only)")``.
    dev_secret = (
        "MIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQgdRn+XiLYkHM86A0SPSrBu5kY+WXrnaJgQVjE/gfJ"
        "08ahRANCAARssCensXWNTtlniVj19KSctQ0mU+6650gvPkxm1t+KnscKpPPPjMJ5ianYTaASvBOKkqt6+8NqelpPUcZ1S+0X"
    )
    vectors = LazyVectors(
        lambda: (
            samples.Vector(
                secret=(
                    "MFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAE83T4O/n84iotIvIW4mdBgQ/7dAfSmpqIM8kF9mN1flpVKS3G"
                    "Rqe62gw+2fNNRaINXvVpiglSI8eNEc6wEA3F+g=="
                ),
                headers={
                    HEADER: (
                        "MEUCIGHQVtGj+Y3LkG9fLcxf3qfI10QysgDWmMOVmxG0u6ZUAiEAyBiXDWzM+uOe5W0JuG+luQAb"
                        "PIqHh89M15TluLtEZtM="
                    ),
                    TIMESTAMP_HEADER: "1600112502",
                },
                body=(
                    b'[{"email":"hello@world.com","event":"dropped","reason":"Bounced Address",'
                    b'"sg_event_id":"ZHJvcC0xMDk5NDkxOS1MUnpYbF9OSFN0T0doUTRrb2ZTbV9BLTA",'
                    b'"sg_message_id":"LRzXl_NHStOGhQ4kofSm_A.filterdrecv-p3mdw1-756b745b58-kmzbl-'
                    b'18-5F5FC76C-9.0","smtp-id":"<LRzXl_NHStOGhQ4kofSm_A@ismtpd0039p1iad1.sendgrid'
                    b'.net>","timestamp":1600112492}]\r\n'
                ),
                now=1_600_112_502,
                origin="published",
                reference="sendgrid/sendgrid-python test/unit/test_eventwebhook.py",
            ),
        )
    )

    def public_key(self, stored: str) -> ec.EllipticCurvePublicKey:
        """The account's verification key: base64 DER SubjectPublicKeyInfo of a P-256 key
        (raises ConfigurationError)."""
        return load_public_key(stored)

    def private_key(self, secret: str) -> ec.EllipticCurvePrivateKey:
        """A development signing key: base64 DER PKCS#8 of an unencrypted P-256 key."""
        return load_private_key(secret)

    def public_key_text(self, key: ec.EllipticCurvePrivateKey) -> str:
        """The base64 DER SubjectPublicKeyInfo of ``key``'s public half (what SendGrid shows)."""
        return public_key_text(key)

    def verify(self, request: WebhookRequest, secrets: Sequence[str], now: float) -> Verified:
        """Verify a SendGrid Event Webhook POST against the stored public key(s).

        Raises
        ------
        VerificationError
            ``signature_missing``, ``signature_malformed`` (not base64), ``signature_invalid``
            (no key verifies it, or it is not a DER ECDSA signature).
        TimestampError
            ``timestamp_missing``, ``timestamp_invalid``, ``timestamp_stale`` /
            ``timestamp_future``.
        """
        # SendGrid's SDK decodes the header (base64.b64decode) before verifying: another
        # spelling of the same DER bytes verifies there, so it does here.
        der = decode_base64(signature_header(request, HEADER), canonical=False)
        if der is None:
            raise VerificationError("signature_malformed", f"{HEADER} is not base64")
        raw_ts, timestamp = timestamp_header(request, TIMESTAMP_HEADER)
        signed = raw_ts.encode("ascii") + request.body
        index = self.match_keys(
            secrets, lambda key: key.verify(der, signed, ec.ECDSA(hashes.SHA256()))
        )
        self.check_fresh(timestamp, now)
        return Verified(
            secret_index=index,
            timestamp=timestamp,
            signed_headers=frozenset({TIMESTAMP_HEADER.lower()}),
        )

    def sign(
        self, body: bytes, secret: str, *, timestamp: int, delivery_id: str, url: str = ""
    ) -> dict[str, str]:
        """The two SendGrid headers, signed with the private key ``secret`` (base64 DER PKCS#8).

        The nonce is derived from the key and the message (RFC 6979), so the same request is
        signed the same way every time (``events/`` is reproducible); SendGrid's own
        signatures are randomised, and both kinds verify alike.
        """
        ts = str(int(timestamp))
        signature = load_private_key(secret).sign(
            ts.encode("ascii") + body, ec.ECDSA(hashes.SHA256(), deterministic_signing=True)
        )
        return {HEADER: base64.b64encode(signature).decode("ascii"), TIMESTAMP_HEADER: ts}

    def random_secret(self, entropy: bytes) -> str:
        return private_key_text(_key_from_entropy(entropy))

    def sample(
        self,
        *,
        delivery_id: str,
        resource: str,
        sequence: int,
        event_type: str | None,
        timestamp: int,
    ) -> samples.Sample:
        message = f"{resource}.filterdrecv-5645d9c87f-l7jtc-1-64B2A1C3-2.0"
        second = base64.urlsafe_b64encode(hashlib.sha256(delivery_id.encode()).digest()[:24])
        events = [
            {
                "email": "user@example.com",
                "event": event_type or "processed",
                "sg_event_id": delivery_id,
                "sg_message_id": message,
                "smtp-id": f"<{resource}@ismtpd0001p1iad2.sendgrid.net>",
                "timestamp": sequence,
            },
            {
                "email": "user@example.com",
                "event": "delivered",
                "response": "250 OK",
                "sg_event_id": second.decode("ascii"),
                "sg_message_id": message,
                "timestamp": sequence + 1,
            },
        ]
        sample = samples.Sample.json(events)
        # SendGrid ends its body with CRLF, and signs it.
        return samples.Sample(sample.body + b"\r\n", sample.headers)

    def new_delivery_id(self, random_hex: str) -> str:
        return base64.urlsafe_b64encode(bytes.fromhex(random_hex)).decode("ascii").rstrip("=")
