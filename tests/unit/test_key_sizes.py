"""Every key derived from a delivery id, a resource key or an event type fits DynamoDB's key
limits (partition 2,048 bytes, sort key 1,024, index keys included) for any value the ingest
accepts, and an envelope with a value over its bound is malformed with that reason."""

from __future__ import annotations

import base64
import hashlib
import json
from datetime import UTC, datetime

import pytest
from webhook_pipeline.adapters.dynamodb_items import (
    delivery_key,
    resource_key,
    time_index_key,
    time_index_shard,
)
from webhook_pipeline.bounds import MAX_DELIVERY_ID_BYTES, MAX_RESOURCE_KEY_BYTES, utf8_size
from webhook_pipeline.envelope import Envelope
from webhook_pipeline.errors import MalformedEnvelopeError

pytestmark = pytest.mark.unit

SOURCE = "s" * 64  # the longest source name sources.toml accepts
RECEIVED = datetime(2026, 12, 31, 23, 59, 59, 999_999, tzinfo=UTC)


def size(value: str) -> int:
    return len(value.encode("utf-8"))


@pytest.mark.parametrize("char", ["x", "\u00e9", "\u20ac", "\U0001f600"])
def test_the_longest_accepted_values_make_keys_dynamodb_accepts(char: str) -> None:
    delivery_id = char * (MAX_DELIVERY_ID_BYTES // size(char))
    key = char * (MAX_RESOURCE_KEY_BYTES // size(char))
    assert size(delivery_key(SOURCE, delivery_id)["pk"]["S"]) <= 2048
    assert size(resource_key(SOURCE, key)["pk"]["S"]) <= 2048
    assert size(time_index_key(SOURCE, delivery_id, RECEIVED)) <= 1024
    assert size(time_index_shard(SOURCE, delivery_id, RECEIVED)) <= 2048


def envelope_json(**fields: object) -> str:
    raw = b"{}"
    doc = {
        "source": "stripe",
        "delivery_id": "evt_1",
        "received_at": "2026-01-15T09:59:59Z",
        "body_b64": base64.b64encode(raw).decode(),
        "body_size": len(raw),
        "body_sha256": hashlib.sha256(raw).hexdigest(),
        **fields,
    }
    return json.dumps(doc)


@pytest.mark.parametrize(
    ("fields", "problem"),
    [
        ({"delivery_id": "\U0001f600" * 64 + "a"}, "delivery_id is over 256 UTF-8 bytes"),
        ({"event_type": "\u00e9" * 128 + "a"}, "event_type is over 256 UTF-8 bytes"),
        (
            {"resource_key": "\u20ac" * 341 + "ab", "sequence": 1},
            "resource_key is over 1024 UTF-8 bytes",
        ),
    ],
)
def test_an_envelope_over_a_byte_bound_is_malformed_with_the_bound_named(
    fields: dict[str, object], problem: str
) -> None:
    # Given an envelope no ingest of this version sends (one queued before the bound existed,
    # or a hand-made one): the value is within 256 characters but over its bound in bytes
    with pytest.raises(MalformedEnvelopeError) as caught:
        Envelope.from_json(envelope_json(**fields))
    assert problem in str(caught.value)
    # and one byte less is an envelope
    shorter = {k: v[:-1] if isinstance(v, str) else v for k, v in fields.items()}
    assert Envelope.from_json(envelope_json(**shorter)).source == "stripe"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("a", 1),
        ("\u00e9", 2),
        ("\u20ac", 3),
        ("\U0001f600", 4),
        ("\ud800", 3),  # a lone surrogate: the 3 bytes of its surrogatepass encoding
        ("x\udfffy\ud83d", 8),
        (json.loads('"\\ud83d\\ude00"'), 4),  # a valid pair decodes to one 4-byte character
    ],
)
def test_utf8_size_counts_every_character_in_its_encoded_bytes(text: str, expected: int) -> None:
    assert utf8_size(text) == expected
