"""Twitch EventSub (webhook transport): ``sha256=<hex>`` over message id + timestamp + body.

Source of the scheme: dev.twitch.tv/docs/eventsub/handling-webhook-events ("Verifying the event
message": HMAC-SHA256 of ``Twitch-Eventsub-Message-Id`` + ``Twitch-Eventsub-Message-Timestamp``
+ raw body, keyed with the subscription's secret, ``sha256=<hex>``; "Responding to a challenge
request": a ``webhook_callback_verification`` message is answered 200 with the raw ``challenge``
as ``text/plain``; "Revoking your subscription": ``revocation`` messages; "Handling duplicate
events": a resent message keeps its id; "Guarding against replay attacks": reject old
timestamps). The published vector is the community SDK's test (twitch-rs/twitch_api
``src/eventsub/mod.rs`` ``verify_request``); Twitch has no official Python SDK.

What is signed: the message id (so the delivery id IS that id: ``signed = "id"``), the RFC 3339
timestamp exactly as sent, and the body. The strict timestamp parse keeps the id/timestamp
boundary of the unseparated signed string unambiguous (a timestamp must start with a four-digit
year and end with its zone). NOT signed: ``Twitch-Eventsub-Message-Type`` (it is forwarded so a
hook tells notifications from revocations), ``-Message-Retry``, ``-Subscription-Type`` and
``-Subscription-Version``.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence

from webhook_pipeline.errors import ConfigurationError, VerificationError
from webhook_pipeline.fields import FieldLocation
from webhook_pipeline.providers.base import Provider
from webhook_pipeline.providers.crypto import header_digest, match_hmac, utf8_hmac
from webhook_pipeline.providers.json_body import json_object
from webhook_pipeline.providers.model import (
    DAY,
    Answer,
    Defaults,
    Handshake,
    LazyVectors,
    Signs,
    Verified,
    samples,
)
from webhook_pipeline.providers.registry import register
from webhook_pipeline.providers.schemes import format_rfc3339, parse_rfc3339
from webhook_pipeline.source_secrets import SourceSecret
from webhook_pipeline.webhook_request import WebhookRequest

HEADER = "Twitch-Eventsub-Message-Signature"
ID_HEADER = "Twitch-Eventsub-Message-Id"
TIMESTAMP_HEADER = "Twitch-Eventsub-Message-Timestamp"
TYPE_HEADER = "Twitch-Eventsub-Message-Type"
PREFIX = "sha256="
VERIFICATION = "webhook_callback_verification"


def signed_content(message_id: str, timestamp: str, body: bytes) -> bytes:
    """The bytes Twitch signs: ``{message id}{timestamp}{body}``, no separators."""
    return message_id.encode("ascii") + timestamp.encode("ascii") + body


class CallbackVerification(Handshake):
    """``Twitch-Eventsub-Message-Type: webhook_callback_verification``, signed like any message:
    answered 200 with the raw ``challenge`` as ``text/plain``."""

    name = VERIFICATION
    method = "POST"
    signed = True

    def matches(self, request: WebhookRequest) -> bool:
        if request.header(TYPE_HEADER) != VERIFICATION:
            return False
        doc = json_object(request.body)
        return doc is not None and isinstance(doc.get("challenge"), str)

    def answer(self, request: WebhookRequest, secret: SourceSecret) -> Answer:
        return Answer(200, json.loads(request.body)["challenge"], "text/plain")

    def sample(self, secret: SourceSecret) -> samples.HandshakeSample:
        body = {
            "challenge": "pogchamp-kappa-360noscope-vohiyo",
            "subscription": {
                "id": "f1c2a387-161a-49f9-a165-0f21d7a4e1c4",
                "status": "webhook_callback_verification_pending",
                "type": "channel.follow",
                "version": "2",
                "condition": {"broadcaster_user_id": "12826"},
                "transport": {"method": "webhook", "callback": "https://example.com/webhooks"},
                "created_at": "2019-11-16T10:11:12.634234626Z",
            },
        }
        return samples.HandshakeSample.json(body, **{TYPE_HEADER: VERIFICATION})


@register
class Twitch(Provider):
    """Twitch EventSub's webhook signature.

    Header shapes: ``Twitch-Eventsub-Message-Signature: sha256=<64 hex>``,
    ``Twitch-Eventsub-Message-Id: <uuid>``, ``Twitch-Eventsub-Message-Timestamp:
    2021-02-19T23:47:00.8091512Z`` (RFC 3339, up to nine fraction digits). Signed bytes:
    id + timestamp + body, exactly as sent. HMAC-SHA256, lower-case hex. Key: the subscription
    secret as UTF-8 (10 to 100 ASCII characters).

    Tolerance: 600 s both ways, the 10 minutes Twitch's replay-attack advice is recalled to name
    (not seen in the retrieved text: UNVERIFIED); the ingest function verifies on arrival.
    """

    name = "twitch"
    title = "Twitch EventSub"
    reference = "dev.twitch.tv/docs/eventsub/handling-webhook-events; twitch-rs/twitch_api"
    signs = Signs(
        id="Twitch-Eventsub-Message-Id header",
        timestamp="Twitch-Eventsub-Message-Timestamp header, RFC 3339",
        note="Message-Type, Message-Retry, Subscription-Type and -Version are not signed",
    )
    defaults = Defaults(
        delivery_id=FieldLocation(signed="id"),
        event_type=FieldLocation(body="subscription.type"),
        forward_headers=("twitch-eventsub-message-type", "twitch-eventsub-message-retry"),
    )
    default_tolerance_seconds = 600
    timestamp_unit = "rfc3339"
    retry_horizon_seconds = 1 * DAY
    retry_horizon_reference = (
        "Twitch resends a message with the same id but documents no schedule; repeated "
        "failures revoke the subscription (notification_failures_exceeded): one day (UNVERIFIED)"
    )
    handshakes = (CallbackVerification(),)
    signature_header = HEADER
    timestamp_header = TIMESTAMP_HEADER
    dev_secret = "dev-twitch-eventsub-secret-local"
    vectors = LazyVectors(
        lambda: (
            samples.Vector(
                secret="secretabcd",
                headers={
                    ID_HEADER: "ae2ff348-e102-16be-a3eb-6830c1bf38d2",
                    TIMESTAMP_HEADER: "2021-02-19T23:47:00.8091512Z",
                    HEADER: (
                        "sha256=d10f5bd9474b7ac7bd7105eb79c2d52768b4d0cd2a135982c3bf5a1d59a78823"
                    ),
                    TYPE_HEADER: "notification",
                },
                body=(
                    b'{"subscription":{"id":"ae2ff348-e102-16be-a3eb-6830c1bf38d2","status":"enabled",'
                    b'"type":"channel.follow","version":"1","condition":{"broadcaster_user_id":'
                    b'"44429626"},"transport":{"method":"webhook","callback":"null"},"created_at":'
                    b'"2021-02-19T23:47:00.7621315Z"},"event":{"user_id":"28408015","user_login":'
                    b'"testFromUser","user_name":"testFromUser","broadcaster_user_id":"44429626",'
                    b'"broadcaster_user_login":"44429626","broadcaster_user_name":"testBroadcaster"}}'
                ),
                now=1_613_778_420,
                origin="published",
                reference="twitch-rs/twitch_api src/eventsub/mod.rs test verify_request (community "
                "SDK, not Twitch's own)",
                delivery_id="ae2ff348-e102-16be-a3eb-6830c1bf38d2",
            ),
        )
    )

    def validate_secret(self, secret: str) -> None:
        """10 to 100 ASCII characters, as Create EventSub Subscription requires (raises
        ConfigurationError naming the problem)."""
        if not secret.isascii() or not 10 <= len(secret) <= 100:
            raise ConfigurationError("an EventSub secret is 10 to 100 ASCII characters")

    def signed_header_names(self) -> frozenset[str]:
        return frozenset({ID_HEADER.lower(), TIMESTAMP_HEADER.lower()})

    def verify(self, request: WebhookRequest, secrets: Sequence[str], now: float) -> Verified:
        """Verify an EventSub message (notification, revocation or challenge).

        Returns
        -------
        Verified
            ``delivery_id`` = the signed message id; ``timestamp`` in whole seconds;
            ``raw_timestamp`` as sent.

        Raises
        ------
        VerificationError
            ``signature_missing``, ``signature_malformed`` (not ``sha256=<hex>``; message id
            missing or not ASCII), ``signature_invalid``.
        TimestampError
            ``timestamp_missing``, ``timestamp_invalid`` (not strict RFC 3339),
            ``timestamp_stale`` / ``timestamp_future``.
        """
        digest = header_digest(request, HEADER, prefix=PREFIX)
        message_id = request.header(ID_HEADER)
        if not message_id or not message_id.isascii():
            raise VerificationError("signature_malformed", f"{ID_HEADER} missing or not ASCII")
        raw_ts = request.header(TIMESTAMP_HEADER)
        seconds = parse_rfc3339(raw_ts)  # raises for an absent or empty value
        signed = signed_content(message_id, str(raw_ts), request.body)
        index = match_hmac(secrets, signed, [digest])
        self.check_fresh(seconds, now)
        return Verified(
            secret_index=index,
            timestamp=math.floor(seconds),
            delivery_id=message_id,
            signed_headers=self.signed_header_names(),
            raw_timestamp=raw_ts,
        )

    def sign(
        self, body: bytes, secret: str, *, timestamp: int, delivery_id: str, url: str = ""
    ) -> dict[str, str]:
        """The id, timestamp (RFC 3339 with nine fraction digits) and signature headers."""
        ts = format_rfc3339(int(timestamp), 0)
        digest = utf8_hmac(secret, signed_content(delivery_id, ts, body))
        return {ID_HEADER: delivery_id, TIMESTAMP_HEADER: ts, HEADER: PREFIX + digest.hex()}

    def sample(
        self,
        *,
        delivery_id: str,
        resource: str,
        sequence: int,
        event_type: str | None,
        timestamp: int,
    ) -> samples.Sample:
        kind = event_type or "channel.follow"
        subscription = {
            "id": "f1c2a387-161a-49f9-a165-0f21d7a4e1c4",
            "status": "enabled",
            "type": kind,
            "version": "2",
            "condition": {"broadcaster_user_id": resource},
            "transport": {"method": "webhook", "callback": "https://example.com/webhooks"},
            "created_at": format_rfc3339(timestamp, 0),
        }
        event = {
            "user_id": "1337",
            "user_login": "awesome_user",
            "broadcaster_user_id": resource,
            "followed_at": format_rfc3339(sequence, 0),
        }
        return samples.Sample.json(
            {"subscription": subscription, "event": event},
            **{
                TYPE_HEADER: "notification",
                "Twitch-Eventsub-Message-Retry": "0",
                "Twitch-Eventsub-Subscription-Type": kind,
                "Twitch-Eventsub-Subscription-Version": "2",
            },
        )
