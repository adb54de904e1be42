"""Slack: ``X-Slack-Signature: v0=<hex>`` over ``v0:{timestamp}:{body}``.

Source of the scheme: Slack's "Verifying requests from Slack"
(docs.slack.dev/authentication/verifying-requests-from-slack) and the official SDK,
``slackapi/python-slack-sdk`` ``slack_sdk/signature/__init__.py`` (``SignatureVerifier``).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from webhook_pipeline.errors import VerificationError
from webhook_pipeline.http import WebhookRequest
from webhook_pipeline.signatures.base import (
    SignatureScheme,
    Verification,
    decode_hex,
    hmac_digest,
    match_secrets,
    signature_header,
    timestamp_header,
)

HEADER = "X-Slack-Signature"
TIMESTAMP_HEADER = "X-Slack-Request-Timestamp"
PREFIX = "v0="


class SlackScheme(SignatureScheme):
    """Slack's ``v0`` request signing.

    Header shapes: ``X-Slack-Signature: v0=<64 hex>``, ``X-Slack-Request-Timestamp: <seconds>``.
    Signed bytes: ``v0:{timestamp}:{body}`` (timestamp exactly as sent, raw body bytes).
    HMAC-SHA256, hex. Key: the app's signing secret as UTF-8.
    Timestamp: Unix **seconds**, a plain integer; tolerance 300 s by default, both directions.
    """

    name = "slack"
    default_tolerance_seconds = 300

    def verify(self, request: WebhookRequest, secrets: Sequence[str], now: float) -> Verification:
        """Verify a Slack request.

        Parameters
        ----------
        request : WebhookRequest
            Needs ``X-Slack-Signature``, ``X-Slack-Request-Timestamp`` and the raw body bytes.
        secrets : Sequence[str]
            Signing secrets, current first.
        now : float
            Current Unix time in seconds.

        Returns
        -------
        Verification
            ``secret_index`` of the matching secret, ``timestamp`` in seconds.

        Raises
        ------
        VerificationError
            ``signature_missing`` (no signature header), ``signature_malformed`` (not
            ``v0=<hex>``), ``signature_invalid`` (no secret matches).
        TimestampError
            ``timestamp_missing``, ``timestamp_invalid`` (not a plain integer),
            ``timestamp_stale`` / ``timestamp_future`` (outside the tolerance).
        """
        value = signature_header(request, HEADER)
        digest = decode_hex(value.removeprefix(PREFIX)) if value.startswith(PREFIX) else None
        if digest is None:
            raise VerificationError("signature_malformed", f"{HEADER} is not v0=<hex>")
        raw_ts, timestamp = timestamp_header(request, TIMESTAMP_HEADER)
        signed = b"v0:" + raw_ts.encode("ascii") + b":" + request.body
        index = match_secrets(
            secrets, lambda secret: hmac_digest(secret.encode("utf-8"), signed), [digest]
        )
        self.check_fresh(timestamp, now)
        return Verification(secret_index=index, timestamp=timestamp)

    def handshake(self, request: WebhookRequest) -> dict[str, Any] | None:
        """Answer the Events API ``url_verification`` request with its ``challenge``.

        Slack sends ``{"type": "url_verification", "challenge": "..."}`` (signed like any
        request) when an endpoint is registered and expects the challenge back in a 200.
        Source: Slack Events API docs, "url_verification event".
        """
        if b"url_verification" not in request.body:
            return None
        try:
            doc = json.loads(request.body)
        except (ValueError, RecursionError):
            return None
        if isinstance(doc, dict) and doc.get("type") == "url_verification":
            challenge = doc.get("challenge")
            if isinstance(challenge, str):
                return {"challenge": challenge}
        return None

    def sign(self, body: bytes, secret: str, *, timestamp: int, delivery_id: str) -> dict[str, str]:
        """Return the two Slack headers; ``timestamp`` is Unix seconds, ``delivery_id`` unused
        (Slack's ``event_id`` is in the body)."""
        ts = str(int(timestamp))
        digest = hmac_digest(secret.encode("utf-8"), b"v0:" + ts.encode("ascii") + b":" + body)
        return {HEADER: PREFIX + digest.hex(), TIMESTAMP_HEADER: ts}
