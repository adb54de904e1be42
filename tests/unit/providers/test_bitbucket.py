"""Bitbucket Cloud: ``X-Hub-Signature: sha256=<hex>`` of the raw body; ``X-Request-UUID`` is the
(unsigned) delivery id."""

from __future__ import annotations

import hashlib
import hmac

import pytest
from webhook_pipeline.errors import VerificationError
from webhook_pipeline.sources import Source, resolve

from tests.unit.providers.conftest import build, make_request

pytestmark = pytest.mark.unit

SECRET = "bb_secret"
BODY = b'{"id":"evt_1","type":"test"}'
SIG = "sha256=500570a40c8091944422ffc1de743afb5cfc9d0a1589fa6b21aae2e0689e687c"
scheme = build("bitbucket")


def req(headers: dict[str, str], body: bytes = BODY):
    return make_request(headers, body)


def test_the_recipe_computed_independently_verifies() -> None:
    assert "sha256=" + hmac.new(SECRET.encode(), BODY, hashlib.sha256).hexdigest() == SIG
    assert scheme.verify(req({"X-Hub-Signature": SIG}), [SECRET], 0).secret_index == 0
    assert scheme.sign(BODY, SECRET, timestamp=0, delivery_id="{u-1}") == {
        "X-Hub-Signature": SIG,
        "X-Request-UUID": "{u-1}",
    }


def test_githubs_header_name_is_not_read() -> None:
    with pytest.raises(VerificationError) as err:
        scheme.verify(req({"X-Hub-Signature-256": SIG}), [SECRET], 0)
    assert err.value.reason == "signature_missing"


@pytest.mark.parametrize(
    "value", [SIG.removeprefix("sha256="), "sha1=" + SIG[7:], "SHA256=" + SIG[7:], SIG[:-1]]
)
def test_malformed_values(value: str) -> None:
    with pytest.raises(VerificationError) as err:
        scheme.verify(req({"X-Hub-Signature": value}), [SECRET], 0)
    assert err.value.reason == "signature_malformed"


def test_a_tampered_byte_and_a_wrong_key_are_rejected() -> None:
    for body, key in ((BODY + b" ", SECRET), (BODY, "bb_secret ")):
        with pytest.raises(VerificationError) as err:
            scheme.verify(req({"X-Hub-Signature": SIG}, body), [key], 0)
        assert err.value.reason == "signature_invalid"


def test_request_uuid_is_the_delivery_id_and_is_reported_unsigned() -> None:
    source = resolve(Source(name="bb", provider="bitbucket"))
    assert source.delivery_id.header == "X-Request-UUID"
    assert source.unsigned == ("delivery_id",)
