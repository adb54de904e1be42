"""Shopify scheme: base64 HMAC of the raw body; case C04 (a hex digest is 401)."""

from __future__ import annotations

import base64
import hashlib
import hmac

import pytest
from webhook_pipeline.errors import VerificationError
from webhook_pipeline.webhook_request import WebhookRequest

from tests.unit.providers.conftest import build as build_scheme

pytestmark = pytest.mark.unit

SECRET = "shpss_0123456789abcdef"
BODY = b'{"id":820982911946154508,"email":"jon@example.com","updated_at":"2024-05-01T12:00:00Z"}'

scheme = build_scheme("shopify")


def expected_b64(body: bytes = BODY, secret: str = SECRET) -> str:
    """The digest as shopify.dev documents it: base64 of HMAC-SHA256(client secret, body)."""
    return base64.b64encode(hmac.new(secret.encode(), body, hashlib.sha256).digest()).decode()


def request(value: str | None, body: bytes = BODY) -> WebhookRequest:
    headers = {} if value is None else {"x-shopify-hmac-sha256": value}
    return WebhookRequest(method="POST", source="shopify", headers=headers, body=body)


def test_documented_construction_verifies() -> None:
    value = expected_b64()
    assert len(value) == 44 and value.endswith("=")
    result = scheme.verify(request(value), [SECRET], 0)
    assert result.secret_index == 0
    assert result.timestamp is None


def test_sign_matches_the_documented_construction() -> None:
    headers = scheme.sign(BODY, SECRET, timestamp=0, delivery_id="b54557e4-bdd9-4b37")
    assert headers == {
        "X-Shopify-Hmac-Sha256": expected_b64(),
        "X-Shopify-Webhook-Id": "b54557e4-bdd9-4b37",
    }


def test_c04_hex_digest_is_401() -> None:
    hex_digest = hmac.new(SECRET.encode(), BODY, hashlib.sha256).hexdigest()
    assert len(hex_digest) == 64
    with pytest.raises(VerificationError) as err:
        scheme.verify(request(hex_digest), [SECRET], 0)
    assert err.value.status == 401
    assert err.value.reason == "signature_invalid"  # 64 hex chars also parse as base64


@pytest.mark.parametrize(
    "value",
    [
        "sha256=" + expected_b64(),
        expected_b64().rstrip("="),
        "-" + expected_b64()[1:],  # URL-safe alphabet character
        "_" + expected_b64()[1:],
        expected_b64() + "\n",
        " " + expected_b64(),
        f"{expected_b64()},{expected_b64()}",
    ],
)
def test_not_base64_is_malformed(value: str) -> None:
    with pytest.raises(VerificationError) as err:
        scheme.verify(request(value), [SECRET], 0)
    assert err.value.reason == "signature_malformed"


@pytest.mark.parametrize("body", [BODY + b"\n", BODY.replace(b"jon", b"Jon"), b""])
def test_tampered_body(body: bytes) -> None:
    with pytest.raises(VerificationError) as err:
        scheme.verify(request(expected_b64(), body), [SECRET], 0)
    assert err.value.reason == "signature_invalid"


def test_rotation_old_and_new_client_secret() -> None:
    old = expected_b64(secret="shpss_old")
    assert scheme.verify(request(old), [SECRET, "shpss_old"], 0).secret_index == 1
    with pytest.raises(VerificationError):
        scheme.verify(request(old), [SECRET, "shpss_older"], 0)


def test_missing_header_is_signature_missing() -> None:
    with pytest.raises(VerificationError) as err:
        scheme.verify(request(None), [SECRET], 0)
    assert err.value.reason == "signature_missing"
