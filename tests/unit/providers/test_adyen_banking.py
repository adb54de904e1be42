"""Adyen Banking and Management webhooks: ``HmacSignature`` (base64 HMAC-SHA256 of the raw body,
hex-decoded key), the SDK's published vector, cross-checks both ways with ``Adyen.util``, and
identity and ordering read only from the signed body."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
from collections.abc import Callable

import pytest
from Adyen.util import generate_payload_sig, is_valid_hmac_payload
from webhook_pipeline.errors import ConfigurationError, VerificationError
from webhook_pipeline.fields import FieldLocation
from webhook_pipeline.ingest.events import read_events
from webhook_pipeline.providers.builtin.adyen_banking import _VECTOR_BODY, _VECTOR_KEY
from webhook_pipeline.sources import Source, resolve

from tests.unit.providers.conftest import build, make_request

pytestmark = pytest.mark.unit

KEY = "00112233445566778899AABBCCDDEEFF00112233445566778899AABBCCDDEEFF"
OTHER_KEY = "FFEEDDCCBBAA99887766554433221100FFEEDDCCBBAA99887766554433221100"
VECTOR_SIGNATURE = "NiqA5vsdV5etZMOaR27+GBSG4i6JeP6j1wkCM6t53vA="
scheme = build("adyen-banking")


def transfer(transfer_id: str, sequence: int, status: str = "booked") -> bytes:
    """A ``balancePlatform.transfer.updated`` body as Adyen's API explorer shows it."""
    return json.dumps(
        {
            "data": {"id": transfer_id, "sequenceNumber": sequence, "status": status},
            "environment": "test",
            "timestamp": "2026-01-01T10:00:00+01:00",
            "type": "balancePlatform.transfer.updated",
        },
        indent=2,
    ).encode()


def sdk_signed(body: bytes, key: str = KEY) -> dict[str, str]:
    return {"HmacSignature": generate_payload_sig(body, key).decode()}


def test_the_sdks_published_vector_verifies_and_we_sign_it_alike() -> None:
    assert is_valid_hmac_payload(VECTOR_SIGNATURE, _VECTOR_KEY, _VECTOR_BODY)
    request = make_request({"HmacSignature": VECTOR_SIGNATURE}, _VECTOR_BODY)
    assert scheme.verify(request, [_VECTOR_KEY], 0).secret_index == 0
    assert scheme.sign(_VECTOR_BODY, _VECTOR_KEY, timestamp=0, delivery_id="x") == {
        "HmacSignature": VECTOR_SIGNATURE
    }


@pytest.mark.parametrize("body", [transfer("TR1", 3), _VECTOR_BODY, b"{}", b'{"a":"\\u00e9"}\n'])
def test_sdk_signatures_verify_and_ours_verify_with_the_sdk(body: bytes) -> None:
    assert scheme.verify(make_request(sdk_signed(body), body), [KEY], 0).secret_index == 0
    ours = scheme.sign(body, KEY, timestamp=0, delivery_id="x")["HmacSignature"]
    assert is_valid_hmac_payload(ours, KEY, body)


def test_the_key_is_the_hex_decoded_key_not_its_text() -> None:
    # Adyen.util decodes the hex key (binascii.a2b_hex): an HMAC keyed with the text is refused
    body = transfer("TR1", 1)
    text_keyed = base64.b64encode(hmac.new(KEY.encode(), body, hashlib.sha256).digest()).decode()
    assert not is_valid_hmac_payload(text_keyed, KEY, body)
    with pytest.raises(VerificationError) as err:
        scheme.verify(make_request({"HmacSignature": text_keyed}, body), [KEY], 0)
    assert err.value.reason == "signature_invalid"


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        (lambda b: b.replace(b'"sequenceNumber": 3', b'"sequenceNumber": 4'), "signature_invalid"),
        (lambda b: b.replace(b'"test"', b'"live"'), "signature_invalid"),
        (lambda b: b + b" ", "signature_invalid"),
    ],
)
def test_any_changed_body_byte_is_refused_by_both(
    change: Callable[[bytes], bytes], reason: str
) -> None:
    body = transfer("TR1", 3)
    headers = sdk_signed(body)
    changed = change(body)
    assert changed != body
    assert not is_valid_hmac_payload(headers["HmacSignature"], KEY, changed)
    with pytest.raises(VerificationError) as err:
        scheme.verify(make_request(headers, changed), [KEY], 0)
    assert err.value.reason == reason


@pytest.mark.parametrize(
    ("value", "reason"),
    [
        (None, "signature_missing"),
        ("", "signature_missing"),
        ("not base64!", "signature_malformed"),
        ("AAAA", "signature_malformed"),  # base64 of 3 bytes
        (VECTOR_SIGNATURE.rstrip("="), "signature_malformed"),  # unpadded
        (VECTOR_SIGNATURE[:-2] + "B=", "signature_malformed"),  # the same bytes, re-spelled
    ],
)
def test_a_missing_or_malformed_header(value: str | None, reason: str) -> None:
    headers = {} if value is None else {"HmacSignature": value}
    if value is not None and value.endswith("B="):
        assert not is_valid_hmac_payload(value, _VECTOR_KEY, _VECTOR_BODY)
    with pytest.raises(VerificationError) as err:
        scheme.verify(make_request(headers, _VECTOR_BODY), [_VECTOR_KEY], 0)
    assert err.value.reason == reason


def test_rotation_reports_the_previous_key() -> None:
    body = transfer("TR1", 1)
    request = make_request(sdk_signed(body, OTHER_KEY), body)
    assert scheme.verify(request, [KEY, OTHER_KEY], 0).secret_index == 1


@pytest.mark.parametrize("secret", ["", "not hex", "ABC", "00" * 31])
def test_a_key_that_is_not_32_hex_bytes_is_a_configuration_error(secret: str) -> None:
    with pytest.raises(ConfigurationError):
        scheme.validate_secret(secret)


@pytest.mark.parametrize("body_format", ["form", "raw"])
def test_only_json_sources_load(body_format: str) -> None:
    source = Source(name="b", provider="adyen-banking", body_format=body_format)
    with pytest.raises(ConfigurationError, match="cannot verify"):
        resolve(source)


def test_identity_and_ordering_come_from_the_signed_body() -> None:
    # Given a source ordering transfers by their signed sequenceNumber
    source = resolve(
        Source(
            name="banking",
            provider="adyen-banking",
            resource_key=FieldLocation(body="data.id"),
            sequence=FieldLocation(body="data.sequenceNumber", format="int"),
        )
    )
    assert source.unsigned == ()
    first, second = transfer("TR1", 3), transfer("TR1", 4, "settled")
    events = []
    for body in (first, second):
        request = make_request(sdk_signed(body), body)
        events += read_events(source, request, source.provider.verify(request, [KEY], 0))
    # Then each is its own delivery (the body's digest), typed and ordered by signed fields
    assert [e.event_type for e in events] == ["balancePlatform.transfer.updated"] * 2
    assert [(e.resource_key, e.sequence) for e in events] == [("TR1", 3), ("TR1", 4)]
    assert events[0].delivery_id != events[1].delivery_id
    assert [len(e.delivery_id) for e in events] == [64, 64]


def test_the_default_source_reads_no_unsigned_field() -> None:
    source = resolve(Source(name="banking", provider="adyen-banking"))
    assert source.unsigned == ()
    assert source.resource_key is None and source.sequence is None
