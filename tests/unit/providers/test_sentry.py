"""Sentry: ``Sentry-Hook-Signature: <hex>`` of the raw body; ``Sentry-Hook-Timestamp`` is not
signed and is never used for freshness."""

from __future__ import annotations

import hashlib
import hmac

import pytest
from webhook_pipeline.errors import VerificationError
from webhook_pipeline.sources import Source, resolve

from tests.unit.providers.conftest import build, make_request

pytestmark = pytest.mark.unit

SECRET = "sentry_secret"
BODY = b'{"id":"evt_1","type":"test"}'
SIG = "161e4584368043adf6856fd277bb7011f5ecee72653bbc8ab7429365fcc91316"
scheme = build("sentry")


def req(headers: dict[str, str], body: bytes = BODY):
    return make_request(headers, body)


def test_the_recipe_computed_independently_verifies() -> None:
    assert hmac.new(SECRET.encode(), BODY, hashlib.sha256).hexdigest() == SIG
    assert scheme.verify(req({"Sentry-Hook-Signature": SIG}), [SECRET], 0).secret_index == 0
    assert scheme.sign(BODY, SECRET, timestamp=0, delivery_id="r-1") == {
        "Sentry-Hook-Signature": SIG,
        "Request-ID": "r-1",
    }


def test_an_old_or_odd_timestamp_header_changes_nothing_because_it_is_unsigned() -> None:
    # A stale value must not be rejected as stale (it proves nothing), nor a fresh one trusted.
    for ts in ("1", "nan", "2020-01-01", "9" * 30):
        headers = {"Sentry-Hook-Signature": SIG, "Sentry-Hook-Timestamp": ts}
        result = scheme.verify(req(headers), [SECRET], 1_700_000_000)
        assert result.timestamp is None and result.signed_headers == frozenset()
    assert scheme.timestamp_header is None and scheme.signs.timestamp is None
    assert "timestamp" in scheme.signs.note


@pytest.mark.parametrize("value", ["sha256=" + SIG, SIG.upper(), SIG[:-1], SIG + "0", " " + SIG])
def test_malformed_values(value: str) -> None:
    with pytest.raises(VerificationError) as err:
        scheme.verify(req({"Sentry-Hook-Signature": value}), [SECRET], 0)
    assert err.value.reason == "signature_malformed"


def test_a_tampered_byte_and_a_wrong_key_are_rejected() -> None:
    for body, key in ((BODY.replace(b"evt", b"evT"), SECRET), (BODY, "sentry_secret2")):
        with pytest.raises(VerificationError) as err:
            scheme.verify(req({"Sentry-Hook-Signature": SIG}, body), [key], 0)
        assert err.value.reason == "signature_invalid"


def test_request_id_is_the_delivery_id_and_is_reported_unsigned() -> None:
    source = resolve(Source(name="sentry", provider="sentry"))
    assert source.delivery_id.header == "Request-ID"
    assert source.unsigned == ("delivery_id",)
