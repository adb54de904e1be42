"""Twitch EventSub: message id + RFC 3339 timestamp (nanoseconds) + body, ``sha256=<hex>``; the
signed ``webhook_callback_verification`` challenge; ``revocation`` messages; the published vector
of twitch_api."""

from __future__ import annotations

import hashlib
import hmac
import json

import pytest
from webhook_pipeline.errors import ConfigurationError, TimestampError, VerificationError
from webhook_pipeline.ingest.events import read_events
from webhook_pipeline.source_secrets import SourceSecret
from webhook_pipeline.sources import Source, resolve

from tests.unit.providers.conftest import build, make_request

pytestmark = pytest.mark.unit

scheme = build("twitch")
[VECTOR] = scheme.vectors
[challenge] = scheme.handshakes
SECRET, MSG_ID, TS = (
    "secretabcd",
    "ae2ff348-e102-16be-a3eb-6830c1bf38d2",
    "2021-02-19T23:47:00.8091512Z",
)
NOW = 1_613_778_420


def headers(ts: str = TS, msg_id: str = MSG_ID, body: bytes = VECTOR.body, **extra: str) -> dict:
    digest = hmac.new(SECRET.encode(), (msg_id + ts).encode() + body, hashlib.sha256).hexdigest()
    return {
        "Twitch-Eventsub-Message-Id": msg_id,
        "Twitch-Eventsub-Message-Timestamp": ts,
        "Twitch-Eventsub-Message-Signature": f"sha256={digest}",
        "Twitch-Eventsub-Message-Type": "notification",
        **extra,
    }


def test_the_published_vector_is_reproduced_with_stdlib_hmac() -> None:
    assert (
        headers()["Twitch-Eventsub-Message-Signature"]
        == VECTOR.headers["Twitch-Eventsub-Message-Signature"]
    )
    result = scheme.verify(make_request(VECTOR.headers, VECTOR.body), [SECRET], NOW)
    assert (result.delivery_id, result.timestamp, result.raw_timestamp) == (MSG_ID, NOW, TS)
    assert result.signed_headers == {
        "twitch-eventsub-message-id",
        "twitch-eventsub-message-timestamp",
    }


def test_the_message_id_is_signed_so_changing_it_breaks_the_signature() -> None:
    forged = {**VECTOR.headers, "Twitch-Eventsub-Message-Id": "another-id"}
    with pytest.raises(VerificationError) as err:
        scheme.verify(make_request(forged, VECTOR.body), [SECRET], NOW)
    assert err.value.reason == "signature_invalid"


def test_moving_characters_between_id_and_timestamp_is_refused() -> None:
    # id+ts is unseparated: "…d2" + "2021-…" could be re-split as "…d22" + "021-…".
    shifted = {
        **VECTOR.headers,
        "Twitch-Eventsub-Message-Id": MSG_ID + TS[0],
        "Twitch-Eventsub-Message-Timestamp": TS[1:],
    }
    with pytest.raises(TimestampError) as err:
        scheme.verify(make_request(shifted, VECTOR.body), [SECRET], NOW)
    assert err.value.reason == "timestamp_invalid"


@pytest.mark.parametrize(
    "ts",
    [
        "2021-02-19T23:47:00Z",
        "2021-02-19T23:47:00.1Z",
        "2021-02-19T23:47:00.123456789Z",
        "2021-02-20T00:47:00.8091512+01:00",
    ],
)
def test_rfc3339_forms_twitch_may_send(ts: str) -> None:
    result = scheme.verify(make_request(headers(ts), VECTOR.body), [SECRET], NOW)
    assert result.timestamp == NOW and result.raw_timestamp == ts


@pytest.mark.parametrize(
    "ts",
    [
        "2021-02-19 23:47:00Z",
        "2021-02-19t23:47:00Z",
        "2021-02-19T23:47:00z",
        "2021-02-19T23:47:00",
        "2021-02-19T23:47:00.1234567890Z",
        "2021-13-19T23:47:00Z",
        "2021-02-19T23:47:60Z",
        "2021-02-19T23:47:00+24:00",
        " 2021-02-19T23:47:00Z",
        "1613778420",
        "\uff12\uff10\uff12\uff11-02-19T23:47:00Z",  # full-width digits
    ],
)
def test_anything_else_is_timestamp_invalid(ts: str) -> None:
    with pytest.raises(TimestampError) as err:
        scheme.verify(make_request(headers(ts), VECTOR.body), [SECRET], NOW)
    assert err.value.reason == "timestamp_invalid"


def test_ten_minutes_either_way() -> None:
    assert scheme.tolerance_seconds == 600
    request = make_request(VECTOR.headers, VECTOR.body)
    for now in (NOW - 599, NOW + 600):
        scheme.verify(request, [SECRET], now)
    for now, reason in ((NOW + 601, "timestamp_stale"), (NOW - 600, "timestamp_future")):
        with pytest.raises(TimestampError) as err:
            scheme.verify(request, [SECRET], now)
        assert err.value.reason == reason


def test_the_challenge_is_answered_with_the_raw_challenge_as_text_plain() -> None:
    body = json.dumps({"challenge": "pogchamp-kappa", "subscription": {"id": "s"}}).encode()
    hdrs = headers(body=body, **{"Twitch-Eventsub-Message-Type": "webhook_callback_verification"})
    request = make_request(hdrs, body)
    assert challenge.signed and challenge.matches(request)
    scheme.verify(request, [SECRET], NOW)  # the ingest verifies signed handshakes first
    answer = challenge.answer(request, SourceSecret([SECRET]))
    assert (answer.status, answer.content_type, answer.text()) == (
        200,
        "text/plain",
        "pogchamp-kappa",
    )


def test_a_challenge_body_under_another_message_type_is_not_the_handshake() -> None:
    body = b'{"challenge":"x"}'
    assert not challenge.matches(make_request(headers(body=body), body))


def test_a_revocation_is_a_signed_delivery_told_apart_by_its_forwarded_type() -> None:
    body = json.dumps(
        {"subscription": {"id": "s1", "status": "authorization_revoked", "type": "channel.follow"}}
    ).encode()
    hdrs = headers(body=body, **{"Twitch-Eventsub-Message-Type": "revocation"})
    request = make_request(hdrs, body)
    source = resolve(Source(name="twitch", provider="twitch"))
    assert not challenge.matches(request)
    [event] = read_events(source, request, scheme.verify(request, [SECRET], NOW))
    assert (event.delivery_id, event.event_type) == (MSG_ID, "channel.follow")
    assert "twitch-eventsub-message-type" in source.forward_headers
    assert source.delivery_id.signed == "id" and source.unsigned == ()


@pytest.mark.parametrize("secret", ["short", "x" * 101, "sécret-1234"])
def test_secrets_outside_10_to_100_ascii_characters_are_refused(secret: str) -> None:
    with pytest.raises(ConfigurationError, match="10 to 100 ASCII"):
        scheme.validate_secret(secret)


def test_sign_writes_nanoseconds_and_round_trips() -> None:
    hdrs = scheme.sign(b"{}", SECRET, timestamp=NOW, delivery_id="m-1")
    assert hdrs["Twitch-Eventsub-Message-Timestamp"] == "2021-02-19T23:47:00.000000000Z"
    assert scheme.verify(make_request(hdrs, b"{}"), [SECRET], NOW).delivery_id == "m-1"
