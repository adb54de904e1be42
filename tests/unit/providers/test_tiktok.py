"""TikTok: ``TikTok-Signature: t=<seconds>,s=<hex>`` over ``{t}.{body}`` with the client secret."""

from __future__ import annotations

import hashlib
import hmac

import pytest
from webhook_pipeline.errors import TimestampError, VerificationError
from webhook_pipeline.ingest.events import read_events
from webhook_pipeline.sources import Source, resolve

from tests.unit.providers.conftest import build, make_request

pytestmark = pytest.mark.unit

SECRET, T = "tt_secret", 1_700_000_000
BODY = b'{"id":"evt_1","type":"test"}'
SIG = "83f59e5ade87b1ce7d33b064549dc4d71df82a92abc7b16e2f0869eba4ff1286"
scheme = build("tiktok")


def req(value: str, body: bytes = BODY):
    return make_request({"TikTok-Signature": value}, body)


def test_the_recipe_computed_independently_verifies() -> None:
    digest = hmac.new(SECRET.encode(), f"{T}.".encode() + BODY, hashlib.sha256).hexdigest()
    assert digest == SIG
    result = scheme.verify(req(f"t={T},s={digest}"), [SECRET], T)
    assert (result.secret_index, result.timestamp, result.raw_timestamp) == (0, T, str(T))


def test_sign_reproduces_the_vector_header() -> None:
    assert scheme.sign(BODY, SECRET, timestamp=T, delivery_id="x") == {
        "TikTok-Signature": f"t={T},s={SIG}"
    }


def test_any_of_several_s_values_may_match_and_a_joined_header_with_one_t_is_fine() -> None:
    assert scheme.verify(req(f"t={T},s={'0' * 64},s={SIG}"), [SECRET], T).secret_index == 0
    assert scheme.verify(req(f"t={T},s={SIG}, t={T},s={SIG}"), [SECRET], T).secret_index == 0


@pytest.mark.parametrize(
    "value",
    [
        f"t={T},v1={SIG}",  # Stripe/Calendly's key, not TikTok's
        f"t={T},s={SIG.upper()}",
        f"t={T},s={SIG[:-1]}",
        f"t={T}",
        f"t={T},t={T + 1},s={SIG}",  # two headers with different t joined by API Gateway
    ],
)
def test_malformed_headers(value: str) -> None:
    with pytest.raises(VerificationError) as err:
        scheme.verify(req(value), [SECRET], T)
    assert err.value.reason == "signature_malformed"


def test_no_t_is_timestamp_missing() -> None:
    with pytest.raises(TimestampError) as err:
        scheme.verify(req(f"s={SIG}"), [SECRET], T)
    assert err.value.reason == "timestamp_missing"


def test_a_tampered_byte_and_a_wrong_key_are_rejected() -> None:
    for body, key in ((BODY.replace(b"1", b"2"), SECRET), (BODY, "tt_secreT")):
        with pytest.raises(VerificationError) as err:
            scheme.verify(req(f"t={T},s={SIG}", body), [key], T)
        assert err.value.reason == "signature_invalid"


@pytest.mark.parametrize(
    ("now", "reason"), [(T + 301, "timestamp_stale"), (T - 301, "timestamp_future")]
)
def test_300_seconds_either_way(now: int, reason: str) -> None:
    scheme.verify(req(f"t={T},s={SIG}"), [SECRET], T + 300)
    scheme.verify(req(f"t={T},s={SIG}"), [SECRET], T - 300)
    with pytest.raises(TimestampError) as err:
        scheme.verify(req(f"t={T},s={SIG}"), [SECRET], now)
    assert err.value.reason == reason


def test_the_delivery_id_is_built_from_signed_body_fields() -> None:
    source = resolve(Source(name="tt", provider="tiktok"))
    body = (
        b'{"client_key":"ck","event":"video.publish.completed","create_time":1700000000,'
        b'"user_openid":"act.abc","content":"{}"}'
    )
    request = make_request(scheme.sign(body, SECRET, timestamp=T, delivery_id=""), body)
    [event] = read_events(source, request, scheme.verify(request, [SECRET], T))
    assert event.delivery_id == "video.publish.completed:1700000000:act.abc"
    assert event.event_type == "video.publish.completed"
    assert source.unsigned == ()
