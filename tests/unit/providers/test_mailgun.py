"""Mailgun: the signature inside the body (JSON object or declared form), only timestamp + token
signed (event-data is not, and the consequences show), the one-time token, subaccounts'
parent-signature, timestamp forms inside the body, 406 never answered."""

from __future__ import annotations

import hashlib
import hmac
import json
from typing import Any

import pytest
from webhook_pipeline.errors import ConfigurationError, TimestampError, VerificationError
from webhook_pipeline.ingest.events import read_events
from webhook_pipeline.providers.builtin.mailgun import Mailgun
from webhook_pipeline.sources import Source, resolve

from tests.unit.providers.conftest import build, make_request

pytestmark = pytest.mark.unit


def _pair(signed: Any) -> tuple[bytes, dict[str, str]]:
    return signed.body, signed.headers


KEY = "key-test"
NOW = 1_700_000_000
EVENT = {"id": "CPgfbmQMTCKtHW6uIWtuVe", "event": "delivered"}

scheme = build("mailgun")


def hex_hmac(key: str, message: str) -> str:
    return hmac.new(key.encode(), message.encode(), hashlib.sha256).hexdigest()


def body(
    timestamp: object = "1700000000",
    token: object = "abc123",
    signature: object | None = None,
    event: dict[str, object] | None = None,
    **extra: object,
) -> bytes:
    if signature is None:
        signature = hex_hmac(KEY, f"{timestamp}{token}")
    block = {"timestamp": timestamp, "token": token, "signature": signature, **extra}
    return json.dumps({"signature": block, "event-data": event or EVENT}).encode()


def verify(raw: bytes, keys: list[str] | None = None, now: float = NOW, provider=scheme):  # type: ignore[no-untyped-def]
    return provider.verify(make_request({}, raw), keys or [KEY], now)


def test_the_documented_recipe_verifies_and_the_token_is_returned_once_usable() -> None:
    assert (
        hex_hmac(KEY, "1700000000abc123")
        == json.loads(Mailgun.vectors[0].body)["signature"]["signature"]
    )
    verified = verify(body())
    assert (verified.timestamp, verified.replay_token) == (NOW, "abc123")
    assert verified.delivery_id is None


@pytest.mark.parametrize(
    "changed",
    [
        body(token="abc124", signature=hex_hmac(KEY, "1700000000abc123")),
        body(timestamp="1700000001", signature=hex_hmac(KEY, "1700000000abc123")),
        body(signature=hex_hmac("key-other", "1700000000abc123")),
    ],
)
def test_a_changed_token_timestamp_or_key_is_signature_invalid(changed: bytes) -> None:
    with pytest.raises(VerificationError) as err:
        verify(changed)
    assert err.value.reason == "signature_invalid"


def test_event_data_is_not_signed_so_a_rewritten_delivery_id_still_verifies() -> None:
    # The consequence of Mailgun's design, made visible: the same signature over other
    # event-data verifies, with another delivery id. Only the one-time token stands in the way.
    source = resolve(Source(name="mailgun", provider="mailgun"))
    genuine, forged = body(), body(event={"id": "FORGED", "event": "delivered"})
    ids = []
    for raw in (genuine, forged):
        verified = verify(raw)
        ids.append(read_events(source, make_request({}, raw), verified)[0].delivery_id)
        assert verified.replay_token == "abc123"  # the same token: the second is a replay
    assert ids == ["CPgfbmQMTCKtHW6uIWtuVe", "FORGED"]
    assert source.unsigned == ("delivery_id",) and source.provider.signs.id is None


def test_the_source_says_so_and_require_signed_id_refuses_it() -> None:
    with pytest.raises(ConfigurationError, match="not covered by mailgun's signature"):
        resolve(Source(name="mailgun", provider="mailgun", require_signed_id=True))


def test_a_subaccount_parent_signature_verifies_with_the_primary_key() -> None:
    raw = body(
        signature=hex_hmac("sub-key", "1700000000abc123"),
        **{"parent-signature": hex_hmac("primary-key", "1700000000abc123")},
    )
    assert verify(raw, ["primary-key"]).secret_index == 0
    assert verify(raw, ["sub-key"]).secret_index == 0
    with pytest.raises(VerificationError):
        verify(raw, [KEY])


@pytest.mark.parametrize(
    ("raw", "reason"),
    [
        (b'{"event-data":{"id":"x"}}', "signature_missing"),
        (b"not json", "signature_missing"),
        (b'["signature"]', "signature_missing"),
        (b'{"signature":"abc"}', "signature_missing"),
        (body(signature=hex_hmac(KEY, "1700000000abc123").upper()), "signature_malformed"),
        (body(signature="ab" * 20), "signature_malformed"),
        (body(signature=12), "signature_malformed"),
        (body(token=""), "signature_malformed"),
        (body(token=None), "signature_malformed"),
        (body(token="t" * 257), "signature_malformed"),
        (body(token="tök"), "signature_malformed"),
    ],
)
def test_malformed_signature_objects_are_401(raw: bytes, reason: str) -> None:
    with pytest.raises(VerificationError) as err:
        verify(raw)
    assert (err.value.reason, err.value.status) == (reason, 401)


@pytest.mark.parametrize(
    "timestamp",
    ["nan", "1e9", " 1700000000", "1700000000.0", "-1", "+1700000000", "1" * 20,
     "\u0661\u0667", 1.7e9, True, -5, [1700000000]],
)  # fmt: skip
def test_a_timestamp_that_is_not_plain_digits_is_timestamp_invalid(timestamp: object) -> None:
    with pytest.raises(TimestampError) as err:
        verify(body(timestamp=timestamp, signature="ab" * 32))
    assert err.value.reason == "timestamp_invalid"


@pytest.mark.parametrize("timestamp", [None, ""])
def test_an_absent_timestamp_is_timestamp_missing(timestamp: object) -> None:
    with pytest.raises(TimestampError) as err:
        verify(body(timestamp=timestamp, signature="ab" * 32))
    assert err.value.reason == "timestamp_missing"


def test_a_json_integer_timestamp_is_read_as_its_digits() -> None:
    raw = body(timestamp=NOW, signature=hex_hmac(KEY, f"{NOW}abc123"))
    assert verify(raw).timestamp == NOW


@pytest.mark.parametrize(
    ("offset", "reason"), [(-301, "timestamp_stale"), (301, "timestamp_future")]
)
def test_freshness_is_checked_both_ways(offset: int, reason: str) -> None:
    with pytest.raises(TimestampError) as err:
        verify(body(), now=NOW - offset)
    assert err.value.reason == reason
    verify(body(), now=NOW - offset + (1 if offset > 0 else -1))


def test_sign_request_writes_the_signature_first_and_keeps_the_rest_byte_for_byte() -> None:
    original = b'{"event-data": {"id": "e1", "event": "opened"}}'
    signed, headers = _pair(scheme.sign_request(original, KEY, timestamp=NOW, delivery_id="e1"))
    assert headers == {} and scheme.sign(original, KEY, timestamp=NOW, delivery_id="e1") == {}
    assert signed.startswith(b'{"signature":{"timestamp":"1700000000","token":"')
    assert signed.endswith(b',"event-data": {"id": "e1", "event": "opened"}}')
    assert verify(signed).replay_token == json.loads(signed)["signature"]["token"]
    empty, _ = _pair(scheme.sign_request(b"{}", KEY, timestamp=NOW, delivery_id="e1"))
    assert json.loads(empty).keys() == {"signature"}
    # A new timestamp makes a new token (Mailgun signs each attempt afresh).
    again, _ = _pair(scheme.sign_request(original, KEY, timestamp=NOW + 1, delivery_id="e1"))
    assert json.loads(again)["signature"]["token"] != json.loads(signed)["signature"]["token"]
    with pytest.raises(ConfigurationError):
        scheme.sign_request(b"[1]", KEY, timestamp=NOW, delivery_id="e1")


def test_retries_of_one_event_have_the_same_duplicate_hash() -> None:
    # The signature changes with every attempt; the body-consistency hash leaves it out.
    source = resolve(Source(name="mailgun", provider="mailgun"))
    original = scheme.sample(
        delivery_id="e1", resource="m1", sequence=NOW, event_type=None, timestamp=NOW
    ).body
    digests = set()
    for attempt in range(3):
        signed, _ = _pair(
            scheme.sign_request(original, KEY, timestamp=NOW + attempt, delivery_id="e1")
        )
        req = make_request({}, signed)
        digests.add(read_events(source, req, verify(signed, now=NOW))[0].digest)
    assert len(digests) == 1


def test_the_form_shape_is_read_only_when_the_source_declares_it() -> None:
    form_source = resolve(
        Source.model_validate(
            {"name": "mg", "provider": "mailgun", "body_format": "form",
             "delivery_id": {"body": "Message-Id"}}
        )
    )  # fmt: skip
    form = form_source.provider
    original = b"event=delivered&recipient=a%40example.com&Message-Id=m1"
    signed, _ = _pair(form.sign_request(original, KEY, timestamp=NOW, delivery_id="m1"))
    assert signed.startswith(original + b"&timestamp=1700000000&token=")
    verified = form.verify(make_request({}, signed), [KEY], NOW)
    events = read_events(form_source, make_request({}, signed), verified)
    assert (events[0].delivery_id, events[0].event_type) == ("m1", "delivered")
    # The same form at a JSON source carries no signature (never sniffed from Content-Type).
    with pytest.raises(VerificationError) as err:
        scheme.verify(make_request({"content-type": "application/x-www-form-urlencoded"}, signed),
                      [KEY], NOW)  # fmt: skip
    assert err.value.reason == "signature_missing"
    # And a JSON body at a form source neither.
    with pytest.raises(VerificationError) as err:
        form.verify(make_request({"content-type": "application/json"}, body()), [KEY], NOW)
    assert err.value.reason == "signature_missing"


def test_a_form_source_must_say_where_its_delivery_id_is_and_raw_is_refused() -> None:
    with pytest.raises(ConfigurationError, match="set delivery_id"):
        resolve(Source(name="mg", provider="mailgun", body_format="form"))
    with pytest.raises(ConfigurationError, match="cannot verify a 'raw' body"):
        resolve(Source(name="mg", provider="mailgun", body_format="raw"))


def test_406_is_never_answered_and_the_retry_horizon_is_8_hours() -> None:
    assert Mailgun.stop_statuses == frozenset({406})
    assert Mailgun.retry_horizon_seconds == 8 * 3600


@pytest.mark.parametrize("key", ["", "key with\nnewline", "clé"])
def test_signing_keys_are_printable_ascii(key: str) -> None:
    with pytest.raises(ConfigurationError):
        scheme.validate_secret(key)
