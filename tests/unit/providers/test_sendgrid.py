"""SendGrid signed Event Webhook: the SDK's published vector (and its trailing CRLF), ECDSA
cross-checks both ways with ``sendgrid``'s ``EventWebhook``, key formats, the event array split."""

from __future__ import annotations

import base64

import pytest
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from sendgrid.helpers.eventwebhook import EventWebhook
from webhook_pipeline.errors import ConfigurationError, TimestampError, VerificationError
from webhook_pipeline.ingest.events import read_events
from webhook_pipeline.providers.builtin.sendgrid import (
    HEADER,
    TIMESTAMP_HEADER,
    SendGrid,
    private_key_text,
    public_key_text,
)
from webhook_pipeline.providers.model import Verified
from webhook_pipeline.sources import Source, resolve

from tests.unit.providers.conftest import build, make_request

pytestmark = pytest.mark.unit

VECTOR = SendGrid.vectors[0]
PUBLISHED_KEY = VECTOR.secret
NOW = 1_700_000_000
BODY = b'[{"email":"a@example.com","event":"delivered","sg_event_id":"e1","timestamp":1}]\r\n'

scheme = build("sendgrid")


def new_key() -> ec.EllipticCurvePrivateKey:
    return ec.generate_private_key(ec.SECP256R1())


def sdk_verifies(public: str, body: bytes, signature: str, ts: str) -> bool:
    return bool(EventWebhook(public).verify_signature(body.decode(), signature, ts))


def test_the_published_vector_verifies_and_needs_its_trailing_crlf() -> None:
    req = make_request(VECTOR.headers, VECTOR.body)
    assert scheme.verify(req, [PUBLISHED_KEY], VECTOR.now).timestamp == 1_600_112_502
    assert VECTOR.body.endswith(b"\r\n")
    stripped = make_request(VECTOR.headers, VECTOR.body.rstrip(b"\r\n"))
    with pytest.raises(VerificationError) as err:
        scheme.verify(stripped, [PUBLISHED_KEY], VECTOR.now)
    assert err.value.reason == "signature_invalid"
    # The SDK agrees on both.
    sig, ts = VECTOR.headers[HEADER], VECTOR.headers[TIMESTAMP_HEADER]
    assert sdk_verifies(PUBLISHED_KEY, VECTOR.body, sig, ts)
    assert not sdk_verifies(PUBLISHED_KEY, VECTOR.body.rstrip(b"\r\n"), sig, ts)


def test_a_signature_made_with_cryptography_verifies_with_ours_and_with_the_sdk() -> None:
    # Given a key pair of our own, a signature produced independently of our sign()
    key = new_key()
    public = public_key_text(key)
    der = key.sign(str(NOW).encode() + BODY, ec.ECDSA(hashes.SHA256()))
    headers = {HEADER: base64.b64encode(der).decode(), TIMESTAMP_HEADER: str(NOW)}
    # Then both verifiers accept it
    assert scheme.verify(make_request(headers, BODY), [public], NOW).secret_index == 0
    assert sdk_verifies(public, BODY, headers[HEADER], str(NOW))


def test_our_signature_verifies_with_the_sdk_and_theirs_rejects_what_we_reject() -> None:
    key = new_key()
    secret, public = private_key_text(key), public_key_text(key)
    headers = scheme.sign(BODY, secret, timestamp=NOW, delivery_id="e1")
    assert sdk_verifies(public, BODY, headers[HEADER], headers[TIMESTAMP_HEADER])
    assert scheme.verify(make_request(headers, BODY), [public], NOW).secret_index == 0
    tampered = BODY.replace(b"delivered", b"delivereD")
    assert not sdk_verifies(public, tampered, headers[HEADER], headers[TIMESTAMP_HEADER])
    with pytest.raises(VerificationError):
        scheme.verify(make_request(headers, tampered), [public], NOW)
    # A signature over another timestamp: both refuse.
    moved = {**headers, TIMESTAMP_HEADER: str(NOW + 1)}
    assert not sdk_verifies(public, BODY, moved[HEADER], moved[TIMESTAMP_HEADER])
    with pytest.raises(VerificationError) as err:
        scheme.verify(make_request(moved, BODY), [public], NOW)
    assert err.value.reason == "signature_invalid"


def test_our_signatures_are_deterministic_so_events_are_reproducible() -> None:
    secret = private_key_text(new_key())
    first = scheme.sign(BODY, secret, timestamp=NOW, delivery_id="e1")
    assert scheme.sign(BODY, secret, timestamp=NOW, delivery_id="e1") == first
    assert scheme.sign(BODY + b" ", secret, timestamp=NOW, delivery_id="e1") != first


def test_a_wrong_key_is_signature_invalid_and_rotation_finds_the_previous_key() -> None:
    signer, other = new_key(), new_key()
    headers = scheme.sign(BODY, private_key_text(signer), timestamp=NOW, delivery_id="e1")
    req = make_request(headers, BODY)
    with pytest.raises(VerificationError) as err:
        scheme.verify(req, [public_key_text(other)], NOW)
    assert err.value.reason == "signature_invalid"
    keys = [public_key_text(other), public_key_text(signer)]
    assert scheme.verify(req, keys, NOW).secret_index == 1


@pytest.mark.parametrize("offset", [-301, 301])
def test_outside_300_seconds_either_way_is_rejected(offset: int) -> None:
    key = new_key()
    headers = scheme.sign(BODY, private_key_text(key), timestamp=NOW + offset, delivery_id="e1")
    with pytest.raises(TimestampError) as err:
        scheme.verify(make_request(headers, BODY), [public_key_text(key)], NOW)
    assert err.value.reason == ("timestamp_stale" if offset < 0 else "timestamp_future")


@pytest.mark.parametrize(
    ("signature", "reason"),
    [
        ("not base64!", "signature_malformed"),
        ("MEUCIGHQVtG", "signature_malformed"),  # unpadded
        (base64.b64encode(b"\x30\x06\x02\x01\x01\x02\x01\x01").decode(), "signature_invalid"),
        (base64.b64encode(b"garbage that is no DER").decode(), "signature_invalid"),
    ],
)
def test_signatures_that_are_not_base64_der_ecdsa_are_401(signature: str, reason: str) -> None:
    headers = {**VECTOR.headers, HEADER: signature}
    with pytest.raises(VerificationError) as err:
        scheme.verify(make_request(headers, VECTOR.body), [PUBLISHED_KEY], VECTOR.now)
    assert (err.value.reason, err.value.status) == (reason, 401)


def _spki(key: object) -> str:
    der = key.public_key().public_bytes(  # type: ignore[attr-defined]
        serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    return base64.b64encode(der).decode()


@pytest.mark.parametrize(
    ("stored", "problem"),
    [
        ("not base64", "not standard base64"),
        (base64.b64encode(b"not a key").decode(), "not a DER SubjectPublicKeyInfo"),
        (_spki(ec.generate_private_key(ec.SECP384R1())), "not an ECDSA P-256 key"),
        (_spki(rsa.generate_private_key(public_exponent=65537, key_size=2048)), "P-256"),
        (f"-----BEGIN PUBLIC KEY-----\n{PUBLISHED_KEY}\n-----END PUBLIC KEY-----", "base64"),
    ],
)
def test_the_stored_key_must_be_a_base64_der_p256_public_key(stored: str, problem: str) -> None:
    with pytest.raises(ConfigurationError, match=problem) as err:
        scheme.validate_secret(stored)
    assert stored not in str(err.value)


def test_a_private_key_is_no_verification_key() -> None:
    # The development secret is the private key; what a source stores is its public key.
    with pytest.raises(ConfigurationError):
        scheme.validate_secret(scheme.dev_secret)
    scheme.validate_secret(scheme.verification_secret(scheme.dev_secret))
    scheme.validate_secret(PUBLISHED_KEY)


def test_the_array_is_split_into_one_delivery_per_sg_event_id() -> None:
    source = resolve(Source(name="sendgrid", provider="sendgrid"))
    body = (
        b'[{"event":"processed","sg_event_id":"a1","timestamp":1},'
        b' {"event":"open","sg_event_id":"a2","timestamp":2}]\r\n'
    )
    events = read_events(source, make_request({}, body), Verified(secret_index=0))
    assert [(e.delivery_id, e.event_type) for e in events] == [("a1", "processed"), ("a2", "open")]
    # Each event keeps its exact bytes (the space before the second is not part of it).
    assert events[1].body == b'{"event":"open","sg_event_id":"a2","timestamp":2}'
    assert source.resource_key is None and source.unsigned == ()


def test_a_source_may_not_declare_a_form_body() -> None:
    with pytest.raises(ConfigurationError, match="cannot verify a 'form' body"):
        resolve(Source(name="sendgrid", provider="sendgrid", body_format="form"))


def test_the_sample_ends_with_crlf_and_carries_two_events() -> None:
    sample = scheme.sample(
        delivery_id="ZGV2", resource="msg1", sequence=NOW, event_type=None, timestamp=NOW
    )
    assert sample.body.endswith(b"]\r\n")
    source = resolve(Source(name="sendgrid", provider="sendgrid"))
    events = read_events(source, make_request({}, sample.body), Verified(secret_index=0))
    assert events[0].delivery_id == "ZGV2" and len(events) == 2
