"""Calendly: ``Calendly-Webhook-Signature: t=<seconds>,v1=<hex>`` over ``{t}.{body}``; 410
deletes the subscription, so it is never answered."""

from __future__ import annotations

import hashlib
import hmac

import pytest
from webhook_pipeline.errors import TimestampError, VerificationError
from webhook_pipeline.ingest.events import read_events
from webhook_pipeline.sources import Source, resolve

from tests.unit.providers.conftest import build, make_request

pytestmark = pytest.mark.unit

SECRET, T = "cal_key", 1_700_000_000
BODY = b'{"id":"evt_1","type":"test"}'
SIG = "9bbad6e0709f0607fd1b19bf963f23039b13113d381bfd438e28cec898ca0db6"
scheme = build("calendly")


def req(value: str, body: bytes = BODY):
    return make_request({"Calendly-Webhook-Signature": value}, body)


def test_the_recipe_computed_independently_verifies() -> None:
    assert hmac.new(SECRET.encode(), f"{T}.".encode() + BODY, hashlib.sha256).hexdigest() == SIG
    assert scheme.verify(req(f"t={T},v1={SIG}"), [SECRET], T).timestamp == T
    assert scheme.sign(BODY, SECRET, timestamp=T, delivery_id="x") == {
        "Calendly-Webhook-Signature": f"t={T},v1={SIG}"
    }


@pytest.mark.parametrize(
    "value", [f"t={T},s={SIG}", f"t={T},v1=", f"t={T},v0={SIG}", f"t={T},t=1,v1={SIG}"]
)
def test_malformed_headers(value: str) -> None:
    with pytest.raises(VerificationError) as err:
        scheme.verify(req(value), [SECRET], T)
    assert err.value.reason == "signature_malformed"


def test_a_tampered_byte_and_a_wrong_key_are_rejected() -> None:
    for body, key in ((BODY + b"\n", SECRET), (BODY, "other")):
        with pytest.raises(VerificationError) as err:
            scheme.verify(req(f"t={T},v1={SIG}", body), [key], T)
        assert err.value.reason == "signature_invalid"


def test_three_minutes_either_way() -> None:
    assert scheme.tolerance_seconds == 180
    for now in (T - 180, T + 180):
        scheme.verify(req(f"t={T},v1={SIG}"), [SECRET], now)
    for now, reason in ((T + 181, "timestamp_stale"), (T - 181, "timestamp_future")):
        with pytest.raises(TimestampError) as err:
            scheme.verify(req(f"t={T},v1={SIG}"), [SECRET], now)
        assert err.value.reason == reason


def test_410_is_a_stop_status() -> None:
    assert scheme.stop_statuses == frozenset({410})


def test_the_delivery_id_is_the_event_and_the_payload_uri() -> None:
    source = resolve(Source(name="cal", provider="calendly"))
    body = (
        b'{"event":"invitee.canceled","payload":{"uri":'
        b'"https://api.calendly.com/scheduled_events/E1/invitees/I1"}}'
    )
    request = make_request(scheme.sign(body, SECRET, timestamp=T, delivery_id=""), body)
    [event] = read_events(source, request, scheme.verify(request, [SECRET], T))
    assert event.delivery_id == (
        "invitee.canceled:https://api.calendly.com/scheduled_events/E1/invitees/I1"
    )
    assert source.unsigned == ()
