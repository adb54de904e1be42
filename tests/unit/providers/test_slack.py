"""Slack scheme: the published vector, cross-checks with ``slack_sdk``'s ``SignatureVerifier``."""

from __future__ import annotations

from typing import Any

import pytest
from slack_sdk.signature import SignatureVerifier
from webhook_pipeline.errors import TimestampError, VerificationError
from webhook_pipeline.source_secrets import SourceSecret
from webhook_pipeline.webhook_request import WebhookRequest

from tests.unit.providers.conftest import build as build_scheme

pytestmark = pytest.mark.unit


def handshake(req: WebhookRequest) -> Any:
    """The answer body of Slack's POST handshake matching ``req``, or ``None``."""
    found = next((h for h in scheme.handshakes if h.method == "POST" and h.matches(req)), None)
    return None if found is None else found.answer(req, SourceSecret(["s"])).body


# Slack's "Verifying requests from Slack" example, as pinned by
# slackapi/python-slack-sdk tests/slack_sdk/signature/test_signature_verifier.py.
SECRET = "8f742231b10e8888abcd99yyyzzz85a5"
TS = "1531420618"
BODY = (
    b"token=xyzz0WbapA4vBCDEFasx0q6G&team_id=T1DC2JH3J&team_domain=testteamnow"
    b"&channel_id=G8PSS9T3V&channel_name=foobar&user_id=U2CERLKJA&user_name=roadrunner"
    b"&command=%2Fwebhook-collect&text=&response_url=https%3A%2F%2Fhooks.slack.com%2Fcommands"
    b"%2FT1DC2JH3J%2F397700885554%2F96rGlfmibIGlgcZRskXaIFfN"
    b"&trigger_id=398738663015.47445629121.803a0bc887a14d10d2c447fce8b6703c"
)
SIGNATURE = "v0=a2114d57b48eac39b9ad189dd8316235a7b4a8d21a10bd27519666489c69b503"
NOW = int(TS)

scheme = build_scheme("slack")


class FixedClock:
    def __init__(self, now: float) -> None:
        self._now = now

    def now(self) -> float:
        return self._now


def sdk(now: float = NOW, secret: str = SECRET) -> SignatureVerifier:
    return SignatureVerifier(secret, clock=FixedClock(now))  # type: ignore[arg-type]


def request(signature: str | None, ts: str | None = TS, body: bytes = BODY) -> WebhookRequest:
    headers = {}
    if signature is not None:
        headers["x-slack-signature"] = signature
    if ts is not None:
        headers["x-slack-request-timestamp"] = ts
    return WebhookRequest(method="POST", source="slack", headers=headers, body=body)


class TestPublishedVector:
    def test_vector_verifies(self) -> None:
        result = scheme.verify(request(SIGNATURE), [SECRET], NOW)
        assert result.secret_index == 0
        assert result.timestamp == NOW

    def test_sign_reproduces_the_vector(self) -> None:
        headers = scheme.sign(BODY, SECRET, timestamp=NOW, delivery_id="Ev1")
        assert headers == {"X-Slack-Signature": SIGNATURE, "X-Slack-Request-Timestamp": TS}

    def test_sdk_agrees_on_the_vector(self) -> None:
        assert sdk().generate_signature(timestamp=TS, body=BODY) == SIGNATURE


class TestSdkCrossCheck:
    BODIES = (BODY, b'{"type":"event_callback","event_id":"Ev1"}', "ü ✓".encode(), b"")

    @pytest.mark.parametrize("body", BODIES)
    def test_sdk_generated_signatures_verify(self, body: bytes) -> None:
        signature = sdk().generate_signature(timestamp=TS, body=body)
        assert signature is not None
        assert scheme.verify(request(signature, body=body), [SECRET], NOW).secret_index == 0

    @pytest.mark.parametrize("body", BODIES)
    def test_sdk_verifier_accepts_our_signature(self, body: bytes) -> None:
        headers = scheme.sign(body, SECRET, timestamp=NOW, delivery_id="Ev1")
        assert sdk().is_valid_request(body, headers)

    def test_tampered_body_rejected_by_both(self) -> None:
        tampered = BODY + b"------"
        assert not sdk().is_valid(tampered, TS, SIGNATURE)
        with pytest.raises(VerificationError) as err:
            scheme.verify(request(SIGNATURE, body=tampered), [SECRET], NOW)
        assert err.value.reason == "signature_invalid"

    def test_wrong_secret_rejected_by_both(self) -> None:
        assert not sdk(secret="other").is_valid(BODY, TS, SIGNATURE)
        with pytest.raises(VerificationError) as err:
            scheme.verify(request(SIGNATURE), ["other"], NOW)
        assert err.value.reason == "signature_invalid"

    def test_changed_timestamp_rejected_by_both(self) -> None:
        moved = str(NOW + 1)
        assert not sdk().is_valid(BODY, moved, SIGNATURE)
        with pytest.raises(VerificationError) as err:
            scheme.verify(request(SIGNATURE, ts=moved), [SECRET], NOW)
        assert err.value.reason == "signature_invalid"

    @pytest.mark.parametrize(
        ("offset", "reason"), [(301, "timestamp_stale"), (-301, "timestamp_future")]
    )
    def test_outside_300_s_rejected_by_both(self, offset: int, reason: str) -> None:
        now = NOW + offset
        assert not sdk(now=now).is_valid(BODY, TS, SIGNATURE)
        with pytest.raises(TimestampError) as err:
            scheme.verify(request(SIGNATURE), [SECRET], now)
        assert err.value.reason == reason

    @pytest.mark.parametrize("offset", [300, -300])
    def test_at_300_s_accepted_by_both(self, offset: int) -> None:
        assert sdk(now=NOW + offset).is_valid(BODY, TS, SIGNATURE)
        scheme.verify(request(SIGNATURE), [SECRET], NOW + offset)

    def test_padded_timestamp_we_are_stricter_than_the_sdk(self) -> None:
        # The SDK's int() accepts " 1531420618 " when that exact string was signed; we accept
        # only plain integers (case C05).
        padded = f" {TS} "
        signature = sdk().generate_signature(timestamp=padded, body=BODY)
        assert sdk().is_valid(BODY, padded, signature)
        with pytest.raises(TimestampError) as err:
            scheme.verify(request(signature, ts=padded), [SECRET], NOW)
        assert err.value.reason == "timestamp_invalid"


class TestHeaderShape:
    @pytest.mark.parametrize(
        "value",
        [
            SIGNATURE.removeprefix("v0="),
            "v1=" + SIGNATURE[3:],
            "V0=" + SIGNATURE[3:],
            SIGNATURE[:-1],
            SIGNATURE + "a",
            "v0=" + SIGNATURE[3:].upper(),
            "v0=",
            SIGNATURE + " ",
        ],
    )
    def test_malformed_signature(self, value: str) -> None:
        with pytest.raises(VerificationError) as err:
            scheme.verify(request(value), [SECRET], NOW)
        assert err.value.reason == "signature_malformed"

    def test_missing_signature(self) -> None:
        with pytest.raises(VerificationError) as err:
            scheme.verify(request(None), [SECRET], NOW)
        assert err.value.reason == "signature_missing"

    def test_missing_timestamp(self) -> None:
        with pytest.raises(TimestampError) as err:
            scheme.verify(request(SIGNATURE, ts=None), [SECRET], NOW)
        assert err.value.reason == "timestamp_missing"

    def test_rotation(self) -> None:
        assert scheme.verify(request(SIGNATURE), ["new", SECRET], NOW).secret_index == 1
        with pytest.raises(VerificationError):
            scheme.verify(request(SIGNATURE), ["new", "newer"], NOW)


class TestUrlVerificationHandshake:
    def test_challenge_is_returned(self) -> None:
        body = b'{"token":"t","challenge":"3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P",'
        body += b'"type":"url_verification"}'
        answer = handshake(request(None, body=body))
        assert answer == {"challenge": "3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P"}

    @pytest.mark.parametrize(
        "body",
        [
            BODY,
            b'{"type":"event_callback","event_id":"Ev1","text":"url_verification"}',
            b'{"type":"url_verification"}',
            b'{"type":"url_verification","challenge":42}',
            b"url_verification",
            b'["url_verification"]',
        ],
    )
    def test_ordinary_deliveries_have_no_handshake(self, body: bytes) -> None:
        assert handshake(request(None, body=body)) is None
