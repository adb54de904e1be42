"""Slack: ``X-Slack-Signature: v0=<hex>`` over ``v0:{timestamp}:{body}``.

Source of the scheme: Slack's "Verifying requests from Slack"
(docs.slack.dev/authentication/verifying-requests-from-slack) and the official SDK,
``slackapi/python-slack-sdk`` ``slack_sdk/signature/__init__.py`` (``SignatureVerifier``).
Retries: the Events API retries a failed delivery 3 times (immediately, after 1 minute, after 5
minutes) with ``X-Slack-Retry-Num``; the endpoint must answer within 3 seconds.

What is signed: the timestamp and the body. The delivery id is the body's ``event_id`` (signed).
The Events API sends JSON; slash commands and interactivity send forms: the body format is the
source's (``json`` by default; a source for commands sets ``body_format = "form"``), never the
unsigned ``Content-Type``, so user text such as ``&event_id=EvX`` can never become a field.
"""

from __future__ import annotations

import json

from webhook_pipeline.fields import FieldLocation
from webhook_pipeline.providers.json_body import json_object
from webhook_pipeline.providers.model import (
    HOUR,
    Answer,
    Defaults,
    Handshake,
    LazyVectors,
    Signs,
    samples,
)
from webhook_pipeline.providers.registry import register
from webhook_pipeline.providers.schemes import V0HmacProvider
from webhook_pipeline.source_secrets import SourceSecret
from webhook_pipeline.webhook_request import WebhookRequest

HEADER = "X-Slack-Signature"
TIMESTAMP_HEADER = "X-Slack-Request-Timestamp"


class UrlVerification(Handshake):
    """The Events API ``url_verification`` request (signed like any request): answered with its
    ``challenge`` in a 200 JSON body. Source: Slack Events API docs, "url_verification event"."""

    name = "url_verification"
    method = "POST"
    signed = True

    def matches(self, request: WebhookRequest) -> bool:
        if b"url_verification" not in request.body:
            return False
        doc = json_object(request.body)
        return (
            doc is not None
            and doc.get("type") == "url_verification"
            and isinstance(doc.get("challenge"), str)
        )

    def answer(self, request: WebhookRequest, secret: SourceSecret) -> Answer:
        return Answer(200, {"challenge": json.loads(request.body)["challenge"]})

    def sample(self, secret: SourceSecret) -> samples.HandshakeSample:
        body = {
            "type": "url_verification",
            "token": "legacy",
            "challenge": "3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P",
        }
        return samples.HandshakeSample.json(body)


@register
class Slack(V0HmacProvider):
    """Slack's ``v0`` request signing.

    Header shapes: ``X-Slack-Signature: v0=<64 hex>``, ``X-Slack-Request-Timestamp: <seconds>``.
    Signed bytes: ``v0:{timestamp}:{body}`` (timestamp exactly as sent, raw body bytes).
    HMAC-SHA256, hex. Key: the app's signing secret as UTF-8.
    Timestamp: Unix **seconds**, a plain integer; tolerance 300 s by default, both directions.
    """

    name = "slack"
    title = "Slack"
    reference = (
        "docs.slack.dev verifying-requests-from-slack; "
        "slackapi/python-slack-sdk slack_sdk/signature/__init__.py"
    )
    signs = Signs(
        id="body event_id, inside the signed body",
        timestamp="X-Slack-Request-Timestamp header, seconds",
        note="X-Slack-Retry-Num and X-Slack-Retry-Reason are not signed",
    )
    defaults = Defaults(
        delivery_id=FieldLocation(body="event_id"),
        event_type=FieldLocation(body="event.type"),
        forward_headers=("x-slack-retry-num", "x-slack-retry-reason"),
    )
    default_tolerance_seconds = 300
    retry_horizon_seconds = 1 * HOUR
    retry_horizon_reference = "Events API: 3 retries (immediately, 1 min, 5 min)"
    handshakes = (UrlVerification(),)
    signature_header = HEADER
    # the Events API's deprecated verification token, still sent in every body
    credential_fields = ("token",)
    timestamp_header = TIMESTAMP_HEADER
    dev_secret = "dev-slack-signing-secret-local"
    vectors = LazyVectors(
        lambda: (
            samples.Vector(
                secret="8f742231b10e8888abcd99yyyzzz85a5",
                headers={
                    HEADER: "v0=a2114d57b48eac39b9ad189dd8316235a7b4a8d21a10bd27519666489c69b503",
                    TIMESTAMP_HEADER: "1531420618",
                },
                body=(
                    b"token=xyzz0WbapA4vBCDEFasx0q6G&team_id=T1DC2JH3J&team_domain=testteamnow&"
                    b"channel_id=G8PSS9T3V&channel_name=foobar&user_id=U2CERLKJA&user_name=roadrunner&"
                    b"command=%2Fwebhook-collect&text=&response_url=https%3A%2F%2Fhooks.slack.com%2F"
                    b"commands%2FT1DC2JH3J%2F397700885554%2F96rGlfmibIGlgcZRskXaIFfN&"
                    b"trigger_id=398738663015.47445629121.803a0bc887a14d10d2c447fce8b6703c"
                ),
                now=1_531_420_618,
                origin="published",
                reference="docs.slack.dev verifying-requests-from-slack (slash command example)",
            ),
        )
    )

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
                "type": "event_callback",
                "event_id": delivery_id,
                "event_time": timestamp,
                "event": {"type": event_type or "message", "text": "hi", "channel": "C1"},
            }
        )

    def new_delivery_id(self, random_hex: str) -> str:
        return f"Ev{random_hex[:10].upper()}"
