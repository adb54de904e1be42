"""Intercom: ``X-Hub-Signature: sha1=<hex>`` over the body, checked against stdlib hmac (no
official verifier exists), header shapes, the delivery fields left out of the duplicate hash."""

from __future__ import annotations

import hashlib
import hmac
import json

import pytest
from webhook_pipeline.errors import VerificationError
from webhook_pipeline.ingest.events import read_events
from webhook_pipeline.providers.builtin.intercom import HEADER
from webhook_pipeline.sources import Source, resolve

from tests.unit.providers.conftest import build, make_request

pytestmark = pytest.mark.unit

SECRET = "ic_secret"
BODY = b'{"id":"evt_1","type":"test"}'
scheme = build("intercom")


def sha1_header(body: bytes, secret: str = SECRET) -> str:
    return "sha1=" + hmac.new(secret.encode(), body, hashlib.sha1).hexdigest()


def test_the_self_vector_is_the_stdlib_hmac_sha1_of_the_body() -> None:
    assert sha1_header(BODY) == "sha1=960b86c8d40780977fddc097c938bd9e6d44d96b"
    assert scheme.verify(make_request({HEADER: sha1_header(BODY)}, BODY), [SECRET], 0)
    assert scheme.sign(BODY, SECRET, timestamp=0, delivery_id="x") == {HEADER: sha1_header(BODY)}


@pytest.mark.parametrize(
    "value",
    [
        sha1_header(BODY).upper(),
        sha1_header(BODY).replace("sha1=", "sha256="),
        sha1_header(BODY).removeprefix("sha1="),
        "sha1=" + hmac.new(SECRET.encode(), BODY, hashlib.sha256).hexdigest(),  # 64 hex
        sha1_header(BODY)[:-2],
    ],
)
def test_anything_but_sha1_and_40_lower_case_hex_is_malformed(value: str) -> None:
    with pytest.raises(VerificationError) as err:
        scheme.verify(make_request({HEADER: value}, BODY), [SECRET], 0)
    assert err.value.reason == "signature_malformed"


def test_a_wrong_secret_or_a_changed_byte_is_invalid() -> None:
    for headers, body in (({HEADER: sha1_header(BODY, "other")}, BODY),
                          ({HEADER: sha1_header(BODY)}, BODY.replace(b"1", b"2"))):  # fmt: skip
        with pytest.raises(VerificationError) as err:
            scheme.verify(make_request(headers, body), [SECRET], 0)
        assert err.value.reason == "signature_invalid"


def test_a_retry_that_only_counts_its_attempts_has_the_same_duplicate_hash() -> None:
    source = resolve(Source(name="intercom", provider="intercom"))
    sample = scheme.sample(
        delivery_id="notif_1", resource="c1", sequence=1, event_type=None, timestamp=1
    )
    retry = json.loads(sample.body) | {"delivery_attempts": 2, "delivered_at": 5}
    digests = set()
    for body in (sample.body, json.dumps(retry).encode()):
        req = make_request({HEADER: sha1_header(body)}, body)
        [event] = read_events(source, req, scheme.verify(req, [SECRET], 0))
        assert (event.delivery_id, event.event_type) == ("notif_1", "conversation.user.created")
        digests.add(event.digest)
    assert len(digests) == 1
    assert source.unsigned == ()  # the id is inside the signed body
