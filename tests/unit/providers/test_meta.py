"""Meta (WhatsApp/Messenger): X-Hub-Signature-256 over the body with the app secret, and the GET
hub.challenge endpoint verification."""

from __future__ import annotations

import hashlib
import hmac
from typing import Any

import pytest
from webhook_pipeline.errors import VerificationError
from webhook_pipeline.providers import Provider, all_providers
from webhook_pipeline.source_secrets import SourceSecret
from webhook_pipeline.webhook_request import WebhookRequest

from tests.unit.providers.conftest import build as build_scheme

pytestmark = pytest.mark.unit


def challenge(provider: Provider, request: WebhookRequest, verify_token: str | None) -> Any:
    """The answer body of the provider's GET handshake matching ``request``, or ``None``."""
    handshake = next(
        (h for h in provider.handshakes if h.method == "GET" and h.matches(request)), None
    )
    if handshake is None:
        return None
    return handshake.answer(request, SourceSecret(["app-secret"], verify_token)).body


BODY = b'{"object":"whatsapp_business_account","entry":[{"id":"1"}]}'
SECRET = "app-secret"


def post(headers: dict[str, str], body: bytes = BODY) -> WebhookRequest:
    return WebhookRequest("POST", "meta", {k.lower(): v for k, v in headers.items()}, body)


def get(query: dict[str, str]) -> WebhookRequest:
    return WebhookRequest("GET", "meta", {}, b"", query)


def test_meta_is_registered() -> None:
    assert "meta" in all_providers()


def test_signature_made_independently_with_hmac_verifies() -> None:
    digest = hmac.new(SECRET.encode(), BODY, hashlib.sha256).hexdigest()
    result = build_scheme("meta").verify(
        post({"X-Hub-Signature-256": f"sha256={digest}"}), [SECRET], 0
    )
    assert result.secret_index == 0
    assert result.timestamp is None


def test_own_sign_round_trips_and_a_changed_byte_fails() -> None:
    scheme = build_scheme("meta")
    headers = scheme.sign(BODY, SECRET, timestamp=0, delivery_id="x")
    assert set(headers) == {"X-Hub-Signature-256"}
    scheme.verify(post(headers), [SECRET], 0)
    with pytest.raises(VerificationError) as err:
        scheme.verify(post(headers, BODY.replace(b"1", b"2")), [SECRET], 0)
    assert err.value.reason == "signature_invalid"


def test_challenge_is_echoed_when_the_verify_token_matches() -> None:
    query = {"hub.mode": "subscribe", "hub.verify_token": "tok", "hub.challenge": "1158201444"}
    assert challenge(build_scheme("meta"), get(query), "tok") == "1158201444"


@pytest.mark.parametrize(
    ("query", "configured", "reason"),
    [
        (
            {"hub.mode": "subscribe", "hub.verify_token": "bad", "hub.challenge": "1"},
            "tok",
            "verify_token_invalid",
        ),
        (
            {"hub.mode": "unsubscribe", "hub.verify_token": "tok", "hub.challenge": "1"},
            "tok",
            "handshake_invalid",
        ),
        ({"hub.mode": "subscribe", "hub.verify_token": "tok"}, "tok", "handshake_invalid"),
        ({"hub.mode": "subscribe", "hub.challenge": "1"}, "tok", "handshake_invalid"),
        (
            {"hub.mode": "subscribe", "hub.verify_token": "", "hub.challenge": "1"},
            None,
            "handshake_invalid",
        ),
        ({}, "tok", "handshake_invalid"),
    ],
)
def test_bad_handshakes_are_rejected(query, configured, reason) -> None:
    with pytest.raises(VerificationError) as err:
        challenge(build_scheme("meta"), get(query), configured)
    assert err.value.reason == reason


def test_schemes_without_a_get_handshake_answer_none() -> None:
    query = {"hub.mode": "subscribe", "hub.verify_token": "tok", "hub.challenge": "1"}
    assert challenge(build_scheme("github"), get(query), "tok") is None
