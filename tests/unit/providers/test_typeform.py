"""Typeform: ``Typeform-Signature: sha256=<base64>`` of the raw body; 404 and 410 disable the
webhook, so neither is ever answered."""

from __future__ import annotations

import base64
import hashlib
import hmac

import pytest
from webhook_pipeline.errors import VerificationError

from tests.unit.providers.conftest import build, make_request

pytestmark = pytest.mark.unit

SECRET = "tf_secret"
BODY = b'{"id":"evt_1","type":"test"}'
SIG = "sha256=BUp4mLPY6tAM2dBwDJYklUVPTmSGaHdQ30F5F64+L0Q="
scheme = build("typeform")


def req(value: str, body: bytes = BODY):
    return make_request({"Typeform-Signature": value}, body)


def test_the_recipe_computed_independently_verifies() -> None:
    digest = base64.b64encode(hmac.new(SECRET.encode(), BODY, hashlib.sha256).digest()).decode()
    assert f"sha256={digest}" == SIG
    assert scheme.verify(req(SIG), [SECRET], 0).secret_index == 0
    assert scheme.sign(BODY, SECRET, timestamp=0, delivery_id="x") == {"Typeform-Signature": SIG}


@pytest.mark.parametrize(
    "value",
    [
        SIG.removeprefix("sha256="),
        "sha1=" + SIG.removeprefix("sha256="),
        SIG.rstrip("="),  # unpadded
        SIG + " ",
    ],
)
def test_malformed_values(value: str) -> None:
    with pytest.raises(VerificationError) as err:
        scheme.verify(req(value), [SECRET], 0)
    assert err.value.reason == "signature_malformed"


def test_a_hex_digest_is_not_typeforms_encoding() -> None:
    # 64 hex digits are also valid base64 (of other bytes): refused as not matching.
    hex_digest = hmac.new(SECRET.encode(), BODY, hashlib.sha256).hexdigest()
    with pytest.raises(VerificationError) as err:
        scheme.verify(req("sha256=" + hex_digest), [SECRET], 0)
    assert err.value.reason == "signature_invalid"


def test_a_tampered_byte_and_a_wrong_key_are_rejected() -> None:
    for body, key in ((BODY[:-1] + b" }", SECRET), (BODY, "tf_Secret")):
        with pytest.raises(VerificationError) as err:
            scheme.verify(req(SIG, body), [key], 0)
        assert err.value.reason == "signature_invalid"


def test_no_timestamp_is_signed_so_now_does_not_matter() -> None:
    assert scheme.tolerance_seconds is None
    for now in (0, 1_700_000_000, 10**12):
        assert scheme.verify(req(SIG), [SECRET], now).timestamp is None


def test_404_and_410_disable_the_webhook_and_are_stop_statuses() -> None:
    assert scheme.stop_statuses == frozenset({404, 410})
