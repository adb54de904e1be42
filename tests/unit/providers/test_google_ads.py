"""Google Ads lead forms: ``google_key`` in the JSON body compared in constant time (a shared key
in the body, not a signature); ``lead_id`` is the delivery id."""

from __future__ import annotations

import json

import pytest
from webhook_pipeline.errors import VerificationError
from webhook_pipeline.ingest.events import read_events
from webhook_pipeline.sources import Source, resolve

from tests.unit.providers.conftest import build, make_request

pytestmark = pytest.mark.unit

scheme = build("google-ads")
KEY = "gk-long-random-key"


def lead(**fields: object) -> bytes:
    return json.dumps({"lead_id": "L-1", "form_id": 4, "is_test": True, **fields}).encode()


def verify(body: bytes, keys: list[str] | None = None):
    return scheme.verify(make_request({"content-type": "application/json"}, body), keys or [KEY], 0)


def test_the_right_key_verifies_with_the_current_or_previous_key() -> None:
    assert verify(lead(google_key=KEY)).secret_index == 0
    assert verify(lead(google_key=KEY), ["new-key", KEY]).secret_index == 1


@pytest.mark.parametrize(
    ("body", "reason"),
    [
        (lead(google_key="gk-long-random-keY"), "signature_invalid"),
        (lead(google_key=KEY + " "), "signature_invalid"),
        (lead(), "signature_missing"),
        (lead(google_key=""), "signature_missing"),
        (lead(google_key=None), "signature_missing"),
        (lead(google_key=12345), "signature_malformed"),
        (lead(google_key=[KEY]), "signature_malformed"),
        (b'{"lead_id":"L-1","google_key":"\\ud800"}', "signature_malformed"),
        (b"[]", "signature_missing"),
        (b"not json", "signature_missing"),
        (b"", "signature_missing"),
    ],
)
def test_wrong_missing_and_odd_keys(body: bytes, reason: str) -> None:
    with pytest.raises(VerificationError) as err:
        verify(body)
    assert err.value.reason == reason


def test_the_key_is_not_a_signature_so_the_rest_of_the_body_is_unprotected() -> None:
    assert verify(lead(google_key=KEY, lead_id="L-other", form_id=999)).secret_index == 0
    assert scheme.signs.body is False
    assert "shared key" in scheme.signs.note and "not signed" in scheme.signs.note


def test_sign_body_puts_the_key_in_the_body_and_no_header_is_sent() -> None:
    body = scheme.sign_body(lead(), KEY, timestamp=0, delivery_id="L-1")
    assert json.loads(body)["google_key"] == KEY
    assert scheme.sign(body, KEY, timestamp=0, delivery_id="L-1") == {}
    assert scheme.sign_body(b"[1]", KEY, timestamp=0, delivery_id="x") == b"[1]"
    assert scheme.signature_header == "" and scheme.signature_field == "google_key"


def test_lead_id_is_the_delivery_id_and_is_reported_unsigned() -> None:
    source = resolve(Source(name="ads", provider="google-ads"))
    request = make_request({}, lead(google_key=KEY))
    [event] = read_events(source, request, scheme.verify(request, [KEY], 0))
    assert event.delivery_id == "L-1"
    assert source.unsigned == ("delivery_id",)
