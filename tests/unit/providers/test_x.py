"""X Account Activity: ``x-twitter-webhooks-signature: sha256=<base64>`` of the body, and the CRC
``GET ?crc_token=`` answered ``{"response_token": "sha256=<base64 HMAC>"}``."""

from __future__ import annotations

import base64
import hashlib
import hmac

import pytest
from webhook_pipeline.errors import VerificationError
from webhook_pipeline.source_secrets import SourceSecret
from webhook_pipeline.webhook_request import WebhookRequest

from tests.unit.providers.conftest import build, make_request

pytestmark = pytest.mark.unit

SECRET = "cs_test"
BODY = b'{"id":"evt_1","type":"test"}'
SIG = "sha256=f23rFHLEnblz2bAh4AvvpVm7+3J7xDEqo/suNihTMyI="
scheme = build("x")
[crc] = scheme.handshakes


def b64_hmac(key: str, message: bytes) -> str:
    return base64.b64encode(hmac.new(key.encode(), message, hashlib.sha256).digest()).decode()


def get(**query: str) -> WebhookRequest:
    return WebhookRequest("GET", "x", {}, b"", query)


def test_the_signature_computed_independently_verifies() -> None:
    assert "sha256=" + b64_hmac(SECRET, BODY) == SIG
    request = make_request({"x-twitter-webhooks-signature": SIG}, BODY)
    assert scheme.verify(request, [SECRET], 0).secret_index == 0
    assert scheme.sign(BODY, SECRET, timestamp=0, delivery_id="1") == {
        "x-twitter-webhooks-signature": SIG
    }


def test_crc_answer_is_exactly_the_documented_json() -> None:
    answer = crc.answer(get(crc_token="crc123"), SourceSecret([SECRET]))
    assert (answer.status, answer.content_type) == (200, "application/json")
    assert answer.body == {"response_token": "sha256=lLWJbuO6Wpc1Xm+QN/BdpxsZEEi+Zm1OcEDotW4bkrA="}
    assert answer.body == {"response_token": "sha256=" + b64_hmac(SECRET, b"crc123")}
    assert (
        answer.text() == '{"response_token":"sha256=lLWJbuO6Wpc1Xm+QN/BdpxsZEEi+Zm1OcEDotW4bkrA="}'
    )


def test_crc_uses_the_current_secret_during_a_rotation() -> None:
    answer = crc.answer(get(crc_token="t"), SourceSecret(["new", "old"]))
    assert answer.body == {"response_token": "sha256=" + b64_hmac("new", b"t")}


def test_crc_token_is_percent_decoded_once_from_the_raw_query() -> None:
    request = WebhookRequest(
        "GET", "x", {}, b"", {"crc_token": "a+b%2F"}, raw_query="crc_token=a%2Bb%252F"
    )
    assert crc.answer(request, SourceSecret([SECRET])).body == {
        "response_token": "sha256=" + b64_hmac(SECRET, b"a+b%2F")
    }


@pytest.mark.parametrize("query", [{}, {"crc_token": ""}, {"crc_token": "x" * 1025}])
def test_a_get_without_a_usable_token_is_handshake_invalid(query: dict[str, str]) -> None:
    request = get(**query)
    assert crc.matches(request)
    with pytest.raises(VerificationError) as err:
        crc.answer(request, SourceSecret([SECRET]))
    assert err.value.reason == "handshake_invalid"


@pytest.mark.parametrize(
    "value", [SIG.removeprefix("sha256="), SIG.rstrip("="), "sha256=" + "0" * 64 + "!"]
)
def test_malformed_signatures(value: str) -> None:
    with pytest.raises(VerificationError) as err:
        scheme.verify(make_request({"x-twitter-webhooks-signature": value}, BODY), [SECRET], 0)
    assert err.value.reason == "signature_malformed"


def test_a_tampered_byte_and_a_wrong_key_are_rejected() -> None:
    for body, key in ((BODY + b"\n", SECRET), (BODY, "cs_tesT")):
        with pytest.raises(VerificationError) as err:
            scheme.verify(make_request({"x-twitter-webhooks-signature": SIG}, body), [key], 0)
        assert err.value.reason == "signature_invalid"
