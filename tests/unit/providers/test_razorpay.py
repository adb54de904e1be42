"""Razorpay: the documented recipe's vector, what is not signed (the event id header), and a
cross-check with the ``razorpay`` SDK's verifier (it has no signer: the SDK accepts ours, and we
accept and reject exactly what it accepts and rejects)."""

from __future__ import annotations

import hashlib
import hmac

import pytest
from razorpay.errors import SignatureVerificationError
from razorpay.utility.utility import Utility
from webhook_pipeline.errors import VerificationError
from webhook_pipeline.sources import Source, resolve
from webhook_pipeline.webhook_request import WebhookRequest

from tests.unit.providers.conftest import build

pytestmark = pytest.mark.unit

SECRET = "rzp_secret"
BODY = b'{"id":"evt_1","type":"test"}'
VECTOR = "e35d523d3afccebd333d6d2367b2a8775a003623a5895972a55b63cf4664c7c3"

razorpay = build("razorpay")


def request(signature: str | None, body: bytes = BODY, **headers: str) -> WebhookRequest:
    h = {k.replace("_", "-"): v for k, v in headers.items()}
    if signature is not None:
        h["x-razorpay-signature"] = signature
    return WebhookRequest(method="POST", source="razorpay", headers=h, body=body)


def sdk_accepts(body: bytes, signature: str, secret: str = SECRET) -> bool:
    try:
        return bool(Utility().verify_webhook_signature(body.decode(), signature, secret))
    except SignatureVerificationError:
        return False


def ours_accepts(body: bytes, signature: str, secret: str = SECRET) -> bool:
    try:
        razorpay.verify(request(signature, body), [secret], 0)
    except VerificationError:
        return False
    return True


def test_the_recipe_vector_verifies_and_is_what_sign_makes() -> None:
    assert razorpay.verify(request(VECTOR), [SECRET], 0).secret_index == 0
    assert razorpay.sign(BODY, SECRET, timestamp=0, delivery_id="evt_x") == {
        "X-Razorpay-Signature": VECTOR,
        "X-Razorpay-Event-Id": "evt_x",
    }


def test_the_event_id_header_is_not_signed_and_a_source_says_so() -> None:
    # Any x-razorpay-event-id verifies with the same signature: it is outside the HMAC.
    for event_id in ("evt_A", "evt_B", "anything"):
        verified = razorpay.verify(request(VECTOR, x_razorpay_event_id=event_id), [SECRET], 0)
        assert verified.delivery_id is None and verified.signed_headers == frozenset()
    source = resolve(Source(name="rzp", provider="razorpay"))
    assert source.unsigned == ("delivery_id",) and not source.id_is_signed


def test_a_source_may_read_the_signed_body_digest_instead() -> None:
    source = resolve(
        Source(name="rzp", provider="razorpay", delivery_id={"digest": "sha256"})  # type: ignore[arg-type]
    )
    assert source.unsigned == () and source.id_is_signed


@pytest.mark.parametrize(
    ("signature", "reason"),
    [
        (VECTOR.upper(), "signature_malformed"),
        ("sha256=" + VECTOR, "signature_malformed"),
        (VECTOR[:-1], "signature_malformed"),
        (" " + VECTOR, "signature_malformed"),
        ("0" * 64, "signature_invalid"),
        ("", "signature_missing"),
    ],
)
def test_malformed_and_wrong_signatures(signature: str, reason: str) -> None:
    with pytest.raises(VerificationError) as err:
        razorpay.verify(request(signature), [SECRET], 0)
    assert err.value.reason == reason


def test_a_tampered_byte_and_a_wrong_key_are_rejected() -> None:
    assert not ours_accepts(BODY.replace(b"test", b"tesT"), VECTOR)
    assert not ours_accepts(BODY, VECTOR, secret="rzp_other")


def test_rotation_replays_signed_with_the_current_secret_retries_with_the_old() -> None:
    old = hmac.new(b"rzp_old_secret", BODY, hashlib.sha256).hexdigest()
    assert razorpay.verify(request(old), ["rzp_new_secret", "rzp_old_secret"], 0).secret_index == 1


BODIES = (BODY, b'{"amount":1.50}', '{"n":"Zoë ✓"}'.encode(), b"{}\n")


@pytest.mark.parametrize("body", BODIES)
def test_the_sdk_accepts_our_signature(body: bytes) -> None:
    ours = razorpay.sign(body, SECRET, timestamp=0, delivery_id="e")["X-Razorpay-Signature"]
    assert sdk_accepts(body, ours)


@pytest.mark.parametrize("body", BODIES)
def test_we_accept_and_reject_exactly_what_the_sdk_does(body: bytes) -> None:
    good = hmac.new(SECRET.encode(), body, hashlib.sha256).hexdigest()
    candidates = [good, good[:-1] + ("0" if good[-1] != "0" else "1"), VECTOR, "0" * 64]
    for signature in candidates:
        assert ours_accepts(body, signature) is sdk_accepts(body, signature), signature
    assert ours_accepts(body, good)
