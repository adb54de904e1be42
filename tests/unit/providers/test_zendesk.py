"""Zendesk: ``X-Zendesk-Webhook-Signature`` (base64) over the ISO-8601 timestamp + body, no
separator; the timestamp is parsed strictly and checked for freshness because it is signed."""

from __future__ import annotations

import base64
import hashlib
import hmac

import pytest
from webhook_pipeline.errors import TimestampError, VerificationError
from webhook_pipeline.sources import Source, resolve

from tests.unit.providers.conftest import build, make_request

pytestmark = pytest.mark.unit

SECRET, TS, NOW = "zd_secret", "2024-01-01T00:00:00Z", 1_704_067_200
BODY = b'{"id":"evt_1","type":"test"}'
SIG = "0baS1hiySsgxyKhjmppRTpTrg5GBWCv1B5hL59qfCtg="
scheme = build("zendesk")


def b64(message: bytes, key: str = SECRET) -> str:
    return base64.b64encode(hmac.new(key.encode(), message, hashlib.sha256).digest()).decode()


def req(ts: str = TS, body: bytes = BODY, signature: str | None = None):
    return make_request(
        {
            "X-Zendesk-Webhook-Signature": signature or b64(ts.encode() + body),
            "X-Zendesk-Webhook-Signature-Timestamp": ts,
            "X-Zendesk-Webhook-Invocation-Id": "inv-1",
        },
        body,
    )


def test_the_recipe_computed_independently_verifies() -> None:
    assert b64(TS.encode() + BODY) == SIG
    result = scheme.verify(req(signature=SIG), [SECRET], NOW)
    assert (result.timestamp, result.raw_timestamp) == (NOW, TS)
    assert result.signed_headers == {"x-zendesk-webhook-signature-timestamp"}
    assert scheme.sign(BODY, SECRET, timestamp=NOW, delivery_id="inv-1") == {
        "X-Zendesk-Webhook-Signature": SIG,
        "X-Zendesk-Webhook-Signature-Timestamp": TS,
        "X-Zendesk-Webhook-Invocation-Id": "inv-1",
    }


def test_the_secret_is_used_as_text_not_base64_decoded() -> None:
    secret = "dGhpc19zZWNyZXRfaXNfZm9yX3Rlc3Rpbmdfb25seQ=="
    request = req(signature=b64(TS.encode() + BODY, secret))
    assert scheme.verify(request, [secret], NOW).secret_index == 0


def test_the_timestamp_is_signed() -> None:
    moved = req(ts="2024-01-01T00:00:01Z", signature=SIG)
    with pytest.raises(VerificationError) as err:
        scheme.verify(moved, [SECRET], NOW)
    assert err.value.reason == "signature_invalid"


@pytest.mark.parametrize(
    "ts",
    ["2024-01-01 00:00:00Z", "2024-01-01T00:00:00", "1704067200", "2024-01-01T00:00:00z", ""],
)
def test_timestamps_are_parsed_strictly(ts: str) -> None:
    with pytest.raises(TimestampError) as err:
        scheme.verify(req(ts=ts), [SECRET], NOW)
    assert err.value.reason == ("timestamp_missing" if ts == "" else "timestamp_invalid")


def test_300_seconds_either_way() -> None:
    for now in (NOW - 300, NOW + 300):
        scheme.verify(req(), [SECRET], now)
    for now, reason in ((NOW + 301, "timestamp_stale"), (NOW - 301, "timestamp_future")):
        with pytest.raises(TimestampError) as err:
            scheme.verify(req(), [SECRET], now)
        assert err.value.reason == reason


def test_a_tampered_byte_and_a_wrong_key_are_rejected() -> None:
    for request, key in (
        (req(body=BODY, signature=b64(TS.encode() + BODY + b" ")), SECRET),
        (req(), "zd"),
    ):
        with pytest.raises(VerificationError) as err:
            scheme.verify(request, [key], NOW)
        assert err.value.reason == "signature_invalid"


def test_a_hex_signature_is_malformed_or_invalid_never_accepted() -> None:
    digest = hmac.new(SECRET.encode(), TS.encode() + BODY, hashlib.sha256).hexdigest()
    with pytest.raises(VerificationError):
        scheme.verify(req(signature=digest), [SECRET], NOW)


def test_the_invocation_id_is_the_delivery_id_and_is_reported_unsigned() -> None:
    source = resolve(Source(name="zd", provider="zendesk"))
    assert source.delivery_id.header == "X-Zendesk-Webhook-Invocation-Id"
    assert source.unsigned == ("delivery_id",)
