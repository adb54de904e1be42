"""Postmark: no signature at all; HTTP Basic credentials in the webhook URL Postmark calls.

Source of the scheme: Postmark "Webhooks overview" (postmarkapp.com/developer/webhooks/
webhooks-overview: "protect your webhook with basic HTTP authentication" by putting
``https://user:password@host/...`` in the webhook URL, plus Postmark's published source IP
ranges) and the support article "Understanding inbound webhook retries" (10 retries over about
10.5 hours; **a 403 answer stops the retries**).

What is "signed": nothing. Postmark turns the credentials in the URL into an ``Authorization:
Basic base64(user:password)`` header, and that is the only proof a request comes from Postmark.
The body, the message id, the record type, everything is unsigned; the credentials travel in
every request (inside TLS) and never expire. A source stores ``user:password`` exactly as put in
the URL, and the header is compared with it in constant time (digests of equal length, so not
even the length leaks).

Identity: Postmark sends no delivery id header. Record types differ (Delivery, Bounce, Open,
Click, SpamComplaint, SubscriptionChange, Inbound...) and so do their id fields, so the default
delivery id is the SHA-256 of the body (a retry resends the same body: UNVERIFIED); a source
receiving one record type may use ``delivery_id = { body = ["RecordType", "MessageID"] }``.
"""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Sequence

from webhook_pipeline.errors import ConfigurationError, VerificationError
from webhook_pipeline.fields import FieldLocation
from webhook_pipeline.providers.base import Provider
from webhook_pipeline.providers.crypto import decode_base64, match_secrets, signature_header
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


def basic_credentials(value: str) -> bytes:
    """The decoded ``user:password`` of an ``Authorization: Basic <base64>`` value.

    Raises
    ------
    VerificationError
        ``signature_malformed``: another scheme, or a credential that is not padded base64.
    """
    scheme, _, credential = value.partition(" ")
    # A credential, not a signature: any spelling of its bytes, as HTTP servers decode it.
    encoded = credential.strip(" ")
    decoded = decode_base64(encoded, canonical=False) if scheme.lower() == "basic" else None
    if decoded is None:
        raise VerificationError("signature_malformed", f"{HEADER} is not Basic <base64>")
    return decoded


@register
class Postmark(Provider):
    """Postmark webhooks protected by Basic credentials in the URL.

    Header shape: ``Authorization: Basic <base64 of user:password>`` (the scheme name in any
    case, RFC 7617). Stored secret: ``user:password``. No signature, no timestamp.
    """

    name = "postmark"
    title = "Postmark"
    reference = (
        "postmarkapp.com/developer/webhooks/webhooks-overview (basic auth in the URL); "
        "postmarkapp.com support: understanding inbound webhook retries"
    )
    signs = Signs(
        id=None,
        timestamp=None,
        body=False,
        note=(
            "nothing is signed: Basic credentials prove the sender knows them; the body, its ids "
            "and record type are unsigned and a captured request can be replayed at any time"
        ),
    )
    defaults = Defaults(
        delivery_id=FieldLocation(digest="sha256"),
        event_type=FieldLocation(body="RecordType"),
    )
    retry_horizon_seconds = 11 * HOUR
    retry_horizon_reference = (
        "postmarkapp.com support: inbound webhooks retried 10 times over about 10.5 h "
        "(1, 5, 10, 10, 10, 15, 30 min, 1, 2, 6 h)"
    )
    stop_statuses = frozenset({403})
    signature_header = HEADER
    dev_secret = "postmark-dev:dev-postmark-password-local"
    vectors = LazyVectors(
        lambda: (
            samples.Vector(
                secret="Aladdin:open sesame",
                headers={HEADER: "Basic QWxhZGRpbjpvcGVuIHNlc2FtZQ=="},
                body=b'{"RecordType":"Delivery","MessageID":"00000000-0000-0000-0000-000000000000"}',
                now=0,
                origin="published",
                reference=(
                    "RFC 7617 section 2 example (HTTP Basic, which Postmark's URL credentials "
                    "produce); Postmark publishes no vector of its own"
                ),
            ),
        )
    )

    def validate_secret(self, secret: str) -> None:
        """``user:password`` in printable characters, both parts non-empty, no ``:`` in the user
        (raises ConfigurationError)."""
        user, sep, password = secret.partition(":")
        if not sep or not user or not password:
            raise ConfigurationError(
                "a Postmark secret is a user and a password joined by a colon, both non-empty"
            )
        if not secret.isprintable():
            raise ConfigurationError("a Postmark secret has control characters")

    def verify(self, request: WebhookRequest, secrets: Sequence[str], now: float) -> Verified:
        """Compare the Basic credentials with the stored ``user:password`` (constant time).

        Raises
        ------
        VerificationError
            ``signature_missing`` (no ``Authorization``), ``signature_malformed`` (not Basic
            with padded base64), ``signature_invalid`` (no stored credential matches).
        """
        received = basic_credentials(signature_header(request, HEADER))
        index = match_secrets(
            secrets,
            lambda secret: hashlib.sha256(secret.encode("utf-8")).digest(),
            [hashlib.sha256(received).digest()],
        )
        return Verified(secret_index=index, signed_headers=frozenset({HEADER.lower()}))

    def sign(
        self, body: bytes, secret: str, *, timestamp: int, delivery_id: str, url: str = ""
    ) -> dict[str, str]:
        """``Authorization: Basic ...`` as an HTTP client makes it from the URL's credentials."""
        return {HEADER: "Basic " + base64.b64encode(secret.encode("utf-8")).decode("ascii")}

    def random_secret(self, entropy: bytes) -> str:
        return f"postmark:{entropy.hex()[:40]}"

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
                "RecordType": event_type or "Delivery",
                "ServerID": 23,
                "MessageStream": "outbound",
                "MessageID": delivery_id,
                "Recipient": f"{resource}@example.com",
                "Tag": "welcome-email",
                "DeliveredAt": iso_utc(sequence),
                "Details": "Test delivery webhook details",
                "Metadata": {},
            }
        )
