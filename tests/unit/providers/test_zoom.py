"""Zoom: ``v0:{ts}:{body}`` HMAC hex and the URL validation handshake. No independent signer
exists (no official SDK verifies Zoom events, no published vector): the SELF vectors are checked
against stdlib ``hmac`` computing the documented recipe."""

from __future__ import annotations

import hashlib
import hmac
import json

import pytest
from webhook_pipeline.errors import TimestampError, VerificationError
from webhook_pipeline.providers.builtin.zoom import HEADER, TIMESTAMP_HEADER, UrlValidation
from webhook_pipeline.source_secrets import SourceSecret

from tests.unit.providers.conftest import build, make_request

pytestmark = pytest.mark.unit

SECRET = "zoom_secret"
TS = 1_700_000_000
BODY = b'{"id":"evt_1","type":"test"}'
scheme = build("zoom")


def stdlib_v0(body: bytes, ts: int = TS, secret: str = SECRET) -> str:
    message = b"v0:" + str(ts).encode() + b":" + body
    return "v0=" + hmac.new(secret.encode(), message, hashlib.sha256).hexdigest()


def test_the_self_vectors_are_the_documented_recipe() -> None:
    assert stdlib_v0(BODY) == scheme.vectors[0].headers[HEADER]
    assert scheme.sign(BODY, SECRET, timestamp=TS, delivery_id="x") == {
        HEADER: stdlib_v0(BODY),
        TIMESTAMP_HEADER: str(TS),
    }
    plain = "qgg8vlvZRS6UYooatFL8Aw"
    expected = "46a324cfb7c2ec760e4cd561586a53aadb6fc7561eb8d626d6ee1b71d808b3c0"
    assert hmac.new(SECRET.encode(), plain.encode(), hashlib.sha256).hexdigest() == expected


def validation(plain: str = "qgg8vlvZRS6UYooatFL8Aw") -> bytes:
    doc = {"payload": {"plainToken": plain}, "event_ts": 1654503849680,
           "event": "endpoint.url_validation"}  # fmt: skip
    return json.dumps(doc).encode()


def test_url_validation_is_answered_with_the_plain_and_the_encrypted_token() -> None:
    body = validation()
    req = make_request(scheme.sign(body, SECRET, timestamp=TS, delivery_id="x"), body)
    handshake = scheme.handshakes[0]
    assert isinstance(handshake, UrlValidation) and handshake.signed and handshake.matches(req)
    scheme.verify(req, [SECRET], TS)
    answer = handshake.answer(req, SourceSecret([SECRET]))
    assert answer.status == 200 and answer.content_type == "application/json"
    assert json.loads(answer.text()) == {
        "plainToken": "qgg8vlvZRS6UYooatFL8Aw",
        "encryptedToken": "46a324cfb7c2ec760e4cd561586a53aadb6fc7561eb8d626d6ee1b71d808b3c0",
    }


@pytest.mark.parametrize(
    "body",
    [
        b'{"event":"meeting.started","payload":{"plainToken":"x"}}',
        b'{"event":"endpoint.url_validation","payload":{"plainToken":5}}',
        b'{"event":"endpoint.url_validation","payload":"x"}',
        b"endpoint.url_validation",
    ],
)
def test_only_a_well_formed_validation_is_the_handshake(body: bytes) -> None:
    assert not scheme.handshakes[0].matches(make_request({}, body))


def test_an_empty_plain_token_is_handshake_invalid() -> None:
    req = make_request({}, validation(""))
    with pytest.raises(VerificationError) as err:
        scheme.handshakes[0].answer(req, SourceSecret([SECRET]))
    assert err.value.reason == "handshake_invalid"


@pytest.mark.parametrize(
    "value",
    [stdlib_v0(BODY).upper(), stdlib_v0(BODY).replace("v0=", "v1="), stdlib_v0(BODY)[3:], "v0="],
)
def test_signature_shapes_other_than_v0_and_64_hex_are_malformed(value: str) -> None:
    req = make_request({HEADER: value, TIMESTAMP_HEADER: str(TS)}, BODY)
    with pytest.raises(VerificationError) as err:
        scheme.verify(req, [SECRET], TS)
    assert err.value.reason == "signature_malformed"


def test_wrong_secret_stale_and_future_are_rejected() -> None:
    req = make_request({HEADER: stdlib_v0(BODY, secret="other"), TIMESTAMP_HEADER: str(TS)}, BODY)
    with pytest.raises(VerificationError) as err:
        scheme.verify(req, [SECRET], TS)
    assert err.value.reason == "signature_invalid"
    for ts, reason in ((TS - 301, "timestamp_stale"), (TS + 301, "timestamp_future")):
        req = make_request({HEADER: stdlib_v0(BODY, ts), TIMESTAMP_HEADER: str(ts)}, BODY)
        with pytest.raises(TimestampError) as terr:
            scheme.verify(req, [SECRET], TS)
        assert terr.value.reason == reason


@pytest.mark.parametrize("value", [stdlib_v0(BODY)[:-2], stdlib_v0(BODY) + "ab"])
def test_a_digest_that_is_not_32_bytes_is_malformed(value: str) -> None:
    # A truncated or lengthened hex digest is not a Zoom signature at all (not merely a mismatch)
    req = make_request({HEADER: value, TIMESTAMP_HEADER: str(TS)}, BODY)
    with pytest.raises(VerificationError) as err:
        scheme.verify(req, [SECRET], TS)
    assert err.value.reason == "signature_malformed"
