"""LinkedIn: the ``challengeCode`` GET answered with the HMAC as JSON, and ``X-LI-Signature``
under both documented readings (option ``signature_reading``; the reading that matched is
``Verified.family``)."""

from __future__ import annotations

import hashlib
import hmac

import pytest
from webhook_pipeline.errors import ConfigurationError, VerificationError
from webhook_pipeline.source_secrets import SourceSecret
from webhook_pipeline.webhook_request import WebhookRequest

from tests.unit.providers.conftest import build, make_request

pytestmark = pytest.mark.unit

SECRET = "li_secret"
BODY = b'{"id":"evt_1","type":"test"}'
IN_HMAC = "a0b1f2a63803a2e4b8fe2a7d225bb9b1b0d51f5a3bcce216d308bcae252ec529"
ON_HEADER = "hmacsha256=6ef8d2c17c7c44148d6ee320d17326b40b262f55bf3f9e98af6498852bf81081"


def hx(message: bytes) -> str:
    return hmac.new(SECRET.encode(), message, hashlib.sha256).hexdigest()


def post(value: str, body: bytes = BODY):
    return make_request({"X-LI-Signature": value}, body)


def test_the_two_readings_computed_independently() -> None:
    assert hx(b"hmacsha256=" + BODY) == IN_HMAC
    assert "hmacsha256=" + hx(BODY) == ON_HEADER


@pytest.mark.parametrize(
    ("reading", "value", "matched"),
    [
        ("either", IN_HMAC, "prefix_in_hmac"),
        ("either", ON_HEADER, "prefix_on_header"),
        ("prefix_in_hmac", IN_HMAC, "prefix_in_hmac"),
        ("prefix_on_header", ON_HEADER, "prefix_on_header"),
    ],
)
def test_each_reading_verifies_and_says_which_matched(
    reading: str, value: str, matched: str
) -> None:
    result = build("linkedin", {"signature_reading": reading}).verify(post(value), [SECRET], 0)
    assert (result.secret_index, result.family) == (0, matched)


@pytest.mark.parametrize(
    ("reading", "value"), [("prefix_in_hmac", ON_HEADER), ("prefix_on_header", IN_HMAC)]
)
def test_a_pinned_reading_refuses_the_other_shape(reading: str, value: str) -> None:
    with pytest.raises(VerificationError) as err:
        build("linkedin", {"signature_reading": reading}).verify(post(value), [SECRET], 0)
    assert err.value.reason == "signature_malformed"


def test_the_prefix_is_not_both_in_the_input_and_on_the_header() -> None:
    mixed = "hmacsha256=" + IN_HMAC
    with pytest.raises(VerificationError) as err:
        build("linkedin").verify(post(mixed), [SECRET], 0)
    assert err.value.reason == "signature_invalid"


def test_sign_follows_the_reading() -> None:
    assert build("linkedin", {"signature_reading": "prefix_in_hmac"}).sign(
        BODY, SECRET, timestamp=0, delivery_id="x"
    ) == {"X-LI-Signature": IN_HMAC}
    for reading in ("either", "prefix_on_header"):
        assert build("linkedin", {"signature_reading": reading}).sign(
            BODY, SECRET, timestamp=0, delivery_id="x"
        ) == {"X-LI-Signature": ON_HEADER}


def test_an_unknown_reading_is_a_configuration_error() -> None:
    with pytest.raises(ConfigurationError, match="signature_reading"):
        build("linkedin", {"signature_reading": "both"})


def test_a_tampered_byte_and_a_wrong_key_are_rejected() -> None:
    for value in (IN_HMAC, ON_HEADER):
        for body, key in ((BODY + b" ", SECRET), (BODY, "li_secreT")):
            with pytest.raises(VerificationError) as err:
                build("linkedin").verify(post(value, body), [key], 0)
            assert err.value.reason == "signature_invalid"


def test_challenge_answer_is_exactly_the_documented_json() -> None:
    [challenge] = build("linkedin").handshakes
    code = "890e4665-4dfe-4ab1-b689-ed553bceeed0"
    request = WebhookRequest("GET", "li", {}, b"", {"challengeCode": code, "applicationId": "7"})
    answer = challenge.answer(request, SourceSecret([SECRET]))
    assert (answer.status, answer.content_type) == (200, "application/json")
    assert answer.body == {
        "challengeCode": code,
        "challengeResponse": "837ed67cdcdc9363b4d485f4532e98d3d0c58bdcaa665655377ae30f8a183edc",
    }
    assert answer.body["challengeResponse"] == hx(code.encode())


def test_a_get_without_a_challenge_code_is_handshake_invalid() -> None:
    [challenge] = build("linkedin").handshakes
    request = WebhookRequest("GET", "li", {}, b"", {"applicationId": "7"})
    assert challenge.matches(request)
    with pytest.raises(VerificationError) as err:
        challenge.answer(request, SourceSecret([SECRET]))
    assert err.value.reason == "handshake_invalid"
