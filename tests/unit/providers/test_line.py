"""LINE: the SDK's published vector, cross-checks both ways with ``line-bot-sdk``'s
``SignatureValidator``, the events array split per webhookEventId, the console's Verify request."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json

import pytest
from linebot.v3 import WebhookParser
from linebot.v3.exceptions import InvalidSignatureError
from linebot.v3.webhook import SignatureValidator
from webhook_pipeline.errors import VerificationError
from webhook_pipeline.ingest.events import read_events
from webhook_pipeline.providers.builtin.line import HEADER, LineVerify
from webhook_pipeline.source_secrets import SourceSecret
from webhook_pipeline.sources import Source, resolve

from tests.unit.providers.conftest import build, make_request

pytestmark = pytest.mark.unit

SECRET = "channel_secret"
scheme = build("line")


def body_with(*event_ids: str, redelivery: bool = False) -> bytes:
    events = [
        {
            "type": "message",
            "message": {"type": "text", "id": "1", "text": "hi"},
            "webhookEventId": event_id,
            "deliveryContext": {"isRedelivery": redelivery},
            "timestamp": 1_700_000_000_000,
            "source": {"type": "user", "userId": "U1"},
            "replyToken": "r",
            "mode": "active",
        }
        for event_id in event_ids
    ]
    return json.dumps({"destination": "Uxxx", "events": events}).encode()


def test_the_published_vector_verifies_and_the_sdk_agrees() -> None:
    signature = "/gg9a+LvFevTH1sd7XCQycD7tsWclCsInj7MhBHxN7k="
    assert scheme.verify(make_request({HEADER: signature}, b"bodybodybodybody"), [SECRET], 0)
    assert SignatureValidator(SECRET).validate("bodybodybodybody", signature)


def test_sdk_signatures_verify_with_ours_and_ours_with_the_sdk() -> None:
    body = body_with("01HXYZ")
    # The SDK has no signer: its validator computes the same HMAC, which we present as the
    # sender would; ours signs and the SDK's validator and parser accept it.
    sdk_digest = base64.b64encode(hmac.new(SECRET.encode(), body, hashlib.sha256).digest())
    assert SignatureValidator(SECRET).validate(body.decode(), sdk_digest.decode())
    assert scheme.verify(make_request({HEADER: sdk_digest.decode()}, body), [SECRET], 0)
    ours = scheme.sign(body, SECRET, timestamp=0, delivery_id="x")[HEADER]
    assert SignatureValidator(SECRET).validate(body.decode(), ours)
    assert len(WebhookParser(SECRET).parse(body.decode(), ours)) == 1
    # And both reject a changed byte.
    tampered = body.replace(b'"hi"', b'"ho"')
    assert not SignatureValidator(SECRET).validate(tampered.decode(), ours)
    with pytest.raises(InvalidSignatureError):
        WebhookParser(SECRET).parse(tampered.decode(), ours)
    with pytest.raises(VerificationError) as err:
        scheme.verify(make_request({HEADER: ours}, tampered), [SECRET], 0)
    assert err.value.reason == "signature_invalid"


@pytest.mark.parametrize(
    "value", ["not base64", "AAAA", "/gg9a+LvFevTH1sd7XCQycD7tsWclCsInj7MhBHxN7k"]
)
def test_signatures_that_are_not_padded_base64_of_32_bytes_are_malformed(value: str) -> None:
    with pytest.raises(VerificationError) as err:
        scheme.verify(make_request({HEADER: value}, b"{}"), [SECRET], 0)
    assert err.value.reason == "signature_malformed"


def test_the_events_are_split_per_webhook_event_id_and_redelivery_is_not_a_new_body() -> None:
    source = resolve(Source(name="line", provider="line"))
    first = body_with("01A", "01B")
    again = body_with("01A", "01B", redelivery=True)
    digests = []
    for body in (first, again):
        req = make_request(scheme.sign(body, SECRET, timestamp=0, delivery_id="x"), body)
        events = read_events(source, req, scheme.verify(req, [SECRET], 0))
        assert [(e.delivery_id, e.event_type) for e in events] == [
            ("01A", "message"),
            ("01B", "message"),
        ]
        digests.append([e.digest for e in events])
    assert digests[0] == digests[1]  # isRedelivery is volatile


def test_the_console_verify_request_is_a_signed_handshake_answered_200() -> None:
    handshake = scheme.handshakes[0]
    assert isinstance(handshake, LineVerify) and handshake.signed
    sample = handshake.sample(SourceSecret([SECRET]))
    req = make_request(
        sample.headers | scheme.sign(sample.body, SECRET, timestamp=0, delivery_id="x"),
        sample.body,
    )
    assert handshake.matches(req) and scheme.verify(req, [SECRET], 0)
    assert handshake.answer(req, SourceSecret([SECRET])).status == 200
    # A delivery with events is no handshake, nor is a body that only mentions "events".
    assert not handshake.matches(make_request({}, body_with("01A")))
    assert not handshake.matches(make_request({}, b'{"x":"\\"events\\": []"}'))
    assert not handshake.matches(make_request({}, b'"events"'))
