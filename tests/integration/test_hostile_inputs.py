"""Hostile and boundary inputs against the real ingest, processor and replay code (real Redis,
moto): odd headers, odd bodies, odd delivery ids and ordering values, size boundaries, the field
cases C01-C05 through the handler, dependency faults (Redis restarted empty, Secrets Manager
throttled or the secret deleted, SQS raising something unexpected after the claim), a processor
batch mixing every outcome, and replay requests that must be refused before anything is touched.

Every ingest answer checked here is a definite status; nothing may surface as an exception (which
API Gateway would turn into a 500).
"""

from __future__ import annotations

import base64
import hashlib
import importlib.util
import json
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import boto3
import pytest
import redis
from botocore.exceptions import ClientError
from webhook_pipeline.envelope import Envelope
from webhook_pipeline.errors import GateUnavailableError, InvalidReplayRequestError
from webhook_pipeline.hooks import registry
from webhook_pipeline.ingest.claims import gate_key
from webhook_pipeline.providers.crypto import hmac_digest
from webhook_pipeline.replay.request import ReplayRequest
from webhook_pipeline_ops.simulator.deliveries import (
    DEV_SECRETS,
    SampleDelivery,
    example_sources,
    http_api_event,
    rest_api_event,
    signed_delivery,
)

from tests.helpers import FakeContext, create_deliveries_table
from tests.integration.ingest_harness import SECRETS_PREFIX, IngestHarness

pytestmark = pytest.mark.integration

SOURCES = example_sources()
ROOT = Path(__file__).resolve().parents[2]


def delivery(source: str, **kw: Any) -> SampleDelivery:
    return signed_delivery(SOURCES[source], **kw)


def stripe_body(doc: dict[str, Any]) -> bytes:
    return json.dumps(doc, separators=(",", ":")).encode()


def status(harness: IngestHarness, event: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    response = harness.invoke(event)
    return response["statusCode"], json.loads(response["body"])


def json_of_size(size: int) -> bytes:
    """A JSON object of exactly ``size`` bytes (``size`` >= 10)."""
    body = b'{"pad":"' + b"a" * (size - 10) + b'"}'
    assert len(body) == size
    return body


def gate_keys(redis_url: str) -> list[bytes]:
    keys: list[bytes] = redis.Redis.from_url(redis_url).keys("*")  # type: ignore[assignment]
    return sorted(keys)


# -- bodies -------------------------------------------------------------------------------------


def test_duplicate_json_keys_take_the_last_value_everywhere(ingest: IngestHarness) -> None:
    # Given an authentic Stripe body whose "id" key appears twice
    body = b'{"id":"evt_first","id":"evt_last","type":"customer.updated"}'
    # When it is posted
    code, answer = status(ingest, http_api_event(delivery("stripe", body=body)))
    # Then the last value is the delivery id (as json.loads and JSON.parse both read it), the
    # envelope carries the exact bytes, and exactly that one id is claimed
    assert (code, answer["delivery_id"]) == (202, "evt_last")
    [envelope] = ingest.envelopes()
    assert envelope["delivery_id"] == "evt_last"
    assert base64.b64decode(envelope["body_b64"]) == body


@pytest.mark.parametrize(
    ("body", "reason"),
    [
        *(
            (b, "delivery_id_missing")
            for b in (b"[1,2]", b"42", b"null", b'"evt_1"', b"{}", b"true")
        ),
        (b"", "body_not_json"),  # an empty body is not a JSON document
    ],
)
def test_authentic_body_that_is_not_an_object_is_400_and_touches_nothing(
    ingest: IngestHarness, redis_url: str, body: bytes, reason: str
) -> None:
    code, answer = status(ingest, http_api_event(delivery("stripe", body=body)))
    assert (code, answer["reason"]) == (400, reason)
    assert gate_keys(redis_url) == []
    assert ingest.messages() == []


@pytest.mark.parametrize("source", ["github", "standard-webhooks", "generic-hmac"])
def test_a_signed_empty_body_is_not_json_even_with_the_id_in_a_header(
    ingest: IngestHarness, redis_url: str, source: str
) -> None:
    # the id is in a header, so nothing but the declared format stops an empty body
    code, answer = status(ingest, http_api_event(delivery(source, body=b"")))
    assert (code, answer["reason"]) == (400, "body_not_json")
    assert gate_keys(redis_url) == []
    assert ingest.messages() == []


def test_body_that_is_not_utf8_is_400_unless_the_source_declares_raw_bodies(
    ingest: IngestHarness, make_ingest: Any, redis_url: str, tmp_path: Path
) -> None:
    raw = b'\xff\xfe{"id":"evt_x"}\x80'
    code, answer = status(ingest, http_api_event(delivery("stripe", body=raw), base64_body=True))
    assert (code, answer["reason"]) == (400, "body_not_utf8")
    # GitHub's body is declared JSON: a binary body is 400 even though the id is a header.
    gh = delivery("github", body=raw)
    code, answer = status(ingest, http_api_event(gh, base64_body=True))
    assert (code, answer["reason"]) == (400, "body_not_utf8")
    assert gate_keys(redis_url) == [] and ingest.messages() == []
    # A source that declares raw bodies accepts it and carries it byte for byte.
    sources = tmp_path / "sources.toml"
    sources.write_text('[sources.github]\nprovider = "github"\nbody_format = "raw"\n')
    raw_ingest = make_ingest(SOURCES_FILE=str(sources))
    assert status(raw_ingest, http_api_event(gh, base64_body=True))[0] == 202
    [envelope] = raw_ingest.envelopes()
    assert base64.b64decode(envelope["body_b64"]) == raw


@pytest.mark.parametrize("body", ["!!!not-base64", "dG9rZW4", "dG9r ZW49", "\u00e9"])
def test_invalid_base64_with_is_base64_encoded_is_400(ingest: IngestHarness, body: str) -> None:
    event = http_api_event(delivery("github"))
    event["isBase64Encoded"] = True
    event["body"] = body
    code, answer = status(ingest, event)
    assert (code, answer["reason"]) == (400, "body_not_base64")


@pytest.mark.parametrize("params", [None, {}, {"source": ""}, {"source": "GitHub"}])
def test_missing_or_odd_path_parameter_is_404(ingest: IngestHarness, params: Any) -> None:
    event = http_api_event(delivery("github"))
    if params is None:
        del event["pathParameters"]
    else:
        event["pathParameters"] = params
    assert status(ingest, event) == (404, {"status": "rejected", "reason": "unknown_source"})


def test_body_none_and_headers_none_are_401_not_500(ingest: IngestHarness) -> None:
    event = http_api_event(delivery("github"))
    event["body"] = None
    assert status(ingest, event)[0] == 401
    event = http_api_event(delivery("github"))
    event["headers"] = None
    assert status(ingest, event) == (401, {"status": "rejected", "reason": "signature_missing"})


# -- size boundaries ----------------------------------------------------------------------------


def test_body_exactly_at_the_limit_is_accepted_and_one_byte_over_is_413(
    make_ingest: Callable[..., IngestHarness], redis_url: str
) -> None:
    limit = 4096
    harness = make_ingest(MAX_BODY_BYTES=limit, INLINE_BODY_MAX_BYTES=1024)
    at_limit = delivery("github", body=json_of_size(limit))
    assert status(harness, http_api_event(at_limit))[0] == 202
    over = delivery("github", body=json_of_size(limit + 1))
    code, answer = status(harness, http_api_event(over))
    assert (code, answer["reason"]) == (413, "payload_too_large")
    # Only the accepted delivery reached the gate and the queue
    assert len(gate_keys(redis_url)) == 1
    assert [e["delivery_id"] for e in harness.envelopes()] == [at_limit.delivery_id]


def test_claim_check_threshold_is_inclusive(make_ingest: Callable[..., IngestHarness]) -> None:
    threshold = 2000
    harness = make_ingest(INLINE_BODY_MAX_BYTES=threshold)
    inline = delivery("github", body=json_of_size(threshold))
    pointer = delivery("github", body=json_of_size(threshold + 1))
    assert status(harness, http_api_event(inline))[0] == 202
    assert status(harness, http_api_event(pointer))[0] == 202
    by_id = {e["delivery_id"]: e for e in harness.envelopes()}
    assert base64.b64decode(by_id[inline.delivery_id]["body_b64"]) == inline.body
    assert "body_ref" not in by_id[inline.delivery_id]
    ref = by_id[pointer.delivery_id]["body_ref"]
    assert "body_b64" not in by_id[pointer.delivery_id]
    stored = harness.s3.get_object(Bucket=ref["bucket"], Key=ref["key"])["Body"].read()
    assert stored == pointer.body
    assert by_id[pointer.delivery_id]["body_sha256"] == hashlib.sha256(pointer.body).hexdigest()


# -- delivery ids -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("delivery_id", "expected"),
    [
        ("x" * 256, 202),
        ("x" * 257, 400),
        ("\u00e9" * 128, 202),  # 128 characters, 256 UTF-8 bytes: the limit counts bytes
        ("\u00e9" * 128 + "x", 400),
        ("\U0001f600" * 64, 202),
        ("\U0001f600" * 256, 400),  # 256 characters, 1,024 bytes: its time index key did not fit
    ],
)
def test_delivery_id_length_limit_counts_utf8_bytes(
    ingest: IngestHarness, redis_url: str, delivery_id: str, expected: int
) -> None:
    code, answer = status(ingest, http_api_event(delivery("github", delivery_id=delivery_id)))
    assert code == expected
    if expected == 202:
        assert answer["delivery_id"] == delivery_id
        [key] = gate_keys(redis_url)
        assert key == gate_key("whd:", "github", delivery_id).encode()
        assert len(key) < 100  # long or non-plain ids are hashed
    else:
        assert answer["reason"] == "delivery_id_too_long"
        assert gate_keys(redis_url) == []


def test_delivery_ids_are_byte_exact_case_and_trailing_space_are_different_ids(
    ingest: IngestHarness,
) -> None:
    ids = ["evt-Case-1", "evt-case-1", "EVT-CASE-1", "evt-case-1 ", " evt-case-1"]
    for did in ids:
        code, answer = status(ingest, http_api_event(delivery("github", delivery_id=did)))
        assert (code, answer["delivery_id"]) == (202, did)
    # The exact same id again is a duplicate
    code, answer = status(ingest, http_api_event(delivery("github", delivery_id="evt-case-1 ")))
    assert (code, answer["status"]) == (200, "duplicate")
    assert sorted(e["delivery_id"] for e in ingest.envelopes()) == sorted(ids)


def test_repeated_delivery_id_header_with_two_values_is_ambiguous_in_both_formats(
    ingest: IngestHarness,
) -> None:
    # (once read as one joined id "id-a,id-b"; test_repeated_headers.py covers every source)
    d = delivery("github", delivery_id="id-a")
    rest = rest_api_event(d)
    rest["multiValueHeaders"]["X-GitHub-Delivery"] = ["id-a", "id-b"]
    http = http_api_event(d)
    http["headers"]["x-github-delivery"] = "id-a,id-b"
    ambiguous = (400, {"status": "rejected", "reason": "field_ambiguous"})
    assert status(ingest, rest) == ambiguous
    assert status(ingest, http) == ambiguous
    assert ingest.messages() == []


# -- ordering values ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("created", "expected"),
    [
        (2**70, 2**70),
        (-5, -5),
        (0, 0),
        ("17", 17),
    ],
)
def test_integer_sequences_are_carried_exactly(
    ingest: IngestHarness, created: Any, expected: int
) -> None:
    body = stripe_body(
        {
            "id": f"evt_seq_{uuid.uuid4().hex[:8]}",
            "created": created,
            "data": {"object": {"id": "c"}},
        }
    )
    assert status(ingest, http_api_event(delivery("stripe", body=body)))[0] == 202
    [envelope] = ingest.envelopes()
    assert envelope["sequence"] == expected
    assert Envelope.from_json(json.dumps(envelope)).sequence == expected


@pytest.mark.parametrize(
    "raw_created",
    [b"1.5", b"1e3", b"true", b"false", b"[]", b"{}", b'"1.5"', b'"-5"', b'" 17"', b"NaN"],
)
def test_sequence_of_the_wrong_shape_is_400(ingest: IngestHarness, raw_created: bytes) -> None:
    body = b'{"id":"evt_bad_seq","created":' + raw_created + b',"data":{"object":{"id":"c"}}}'
    code, answer = status(ingest, http_api_event(delivery("stripe", body=body)))
    assert (code, answer["reason"]) == (400, "sequence_invalid")
    assert ingest.messages() == []


@pytest.mark.parametrize(
    ("timestamp", "expected"),
    [
        ("2026-01-15T10:00:00Z", 202),
        ("2026-01-15T12:00:00+02:00", 202),
        ("2026-01-15T10:00:00", 400),  # no zone: refused, never guessed
        ("2026-01-15", 400),
        ("yesterday", 400),
    ],
)
def test_iso8601_sequence_needs_a_zone(
    ingest: IngestHarness, timestamp: str, expected: int
) -> None:
    body = stripe_body({"type": "invoice.paid", "timestamp": timestamp, "data": {"id": "inv_1"}})
    code, answer = status(ingest, http_api_event(delivery("standard-webhooks", body=body)))
    assert code == expected
    if expected == 202:
        [envelope] = ingest.envelopes()
        assert envelope["sequence"] == 1768471200 * 1_000_000  # 2026-01-15T10:00:00Z in µs
    else:
        assert answer["reason"] == "sequence_invalid"


def test_resource_key_over_1024_characters_is_400(ingest: IngestHarness) -> None:
    for length, expected in ((1024, 202), (1025, 400)):
        body = stripe_body(
            {"id": f"evt_rk_{length}", "created": 1, "data": {"object": {"id": "r" * length}}}
        )
        assert status(ingest, http_api_event(delivery("stripe", body=body)))[0] == expected


def test_ordering_fields_half_present_is_400(ingest: IngestHarness) -> None:
    body = stripe_body({"id": "evt_half", "created": 5, "data": {"object": {}}})
    code, answer = status(ingest, http_api_event(delivery("stripe", body=body)))
    assert (code, answer["reason"]) == (400, "ordering_fields_incomplete")


# -- headers ------------------------------------------------------------------------------------


def test_two_signature_values_in_rest_multi_value_headers_are_401_not_500(
    ingest: IngestHarness, redis_url: str
) -> None:
    d = delivery("github")
    good = d.headers["X-Hub-Signature-256"]
    for values in ([good, "sha256=" + "0" * 64], [good, good]):
        event = rest_api_event(d)
        event["multiValueHeaders"]["X-Hub-Signature-256"] = values
        code, answer = status(ingest, event)
        assert (code, answer["reason"]) == (401, "signature_malformed")
    assert gate_keys(redis_url) == []


def test_header_names_match_in_any_case_in_both_event_formats(ingest: IngestHarness) -> None:
    d = delivery("github")
    rest = rest_api_event(d)
    rest["multiValueHeaders"] = {k.upper(): [v] for k, v in d.headers.items()}
    rest["headers"] = {k.upper(): v for k, v in d.headers.items()}
    assert status(ingest, rest)[0] == 202
    # REST 1.0 without multiValueHeaders falls back to headers
    d2 = delivery("github")
    rest2 = rest_api_event(d2)
    rest2["multiValueHeaders"] = None
    rest2["headers"] = {k.swapcase(): v for k, v in d2.headers.items()}
    assert status(ingest, rest2)[0] == 202


def test_stripe_header_repeated_with_the_same_t_is_accepted_with_two_t_values_401(
    ingest: IngestHarness,
) -> None:
    d = delivery("stripe")
    header = d.headers["Stripe-Signature"]
    event = http_api_event(d)
    event["headers"]["stripe-signature"] = f"{header},{header}"
    assert status(ingest, event)[0] == 202
    event = http_api_event(delivery("stripe"))
    event["headers"]["stripe-signature"] += ",t=1700000000,v1=" + "a" * 64
    assert status(ingest, event) == (401, {"status": "rejected", "reason": "signature_malformed"})


def test_non_ascii_signature_header_is_401(ingest: IngestHarness) -> None:
    event = http_api_event(delivery("github"))
    event["headers"]["x-hub-signature-256"] = "sha256=\u00e9" + "0" * 63
    assert status(ingest, event) == (401, {"status": "rejected", "reason": "signature_malformed"})


def test_forwarded_headers_with_control_characters_stay_data(ingest: IngestHarness) -> None:
    d = delivery("github", extra_headers={"User-Agent": "ua\r\nX-Evil: 1\x00"})
    assert status(ingest, http_api_event(d))[0] == 202
    [envelope] = ingest.envelopes()
    assert envelope["headers"]["user-agent"] == "ua\r\nX-Evil: 1\x00"
    assert "x-evil" not in envelope["headers"]
    assert "x-hub-signature-256" not in envelope["headers"]


# -- field cases C01-C05 through the handler ---------------------------------------------------


def test_c01_exact_bytes_are_verified_and_reserialized_bytes_are_401(ingest: IngestHarness) -> None:
    body = b'{"id":"evt_1","amount":1.50}'
    d = delivery("stripe", body=body)
    assert status(ingest, http_api_event(d)) == (
        202,
        {"status": "accepted", "delivery_id": "evt_1"},
    )
    [envelope] = ingest.envelopes()
    assert base64.b64decode(envelope["body_b64"]) == body
    event = http_api_event(d)
    event["body"] = json.dumps(json.loads(body))  # '{"id": "evt_1", "amount": 1.5}'
    assert status(ingest, event)[0] == 401


@pytest.mark.parametrize("make_event", [http_api_event, rest_api_event])
def test_c02_base64_form_body_is_decoded_before_verification(
    make_ingest: Callable[..., IngestHarness],
    make_event: Callable[..., dict[str, Any]],
    tmp_path: Path,
) -> None:
    # GitHub sends form bodies when a hook is configured so: the source declares it.
    sources = tmp_path / "sources.toml"
    sources.write_text('[sources.github]\nprovider = "github"\nbody_format = "form"\n')
    ingest = make_ingest(SOURCES_FILE=str(sources))
    raw = base64.b64decode("dG9rZW49eHl6JnRleHQ9aGk=")
    assert raw == b"token=xyz&text=hi"
    d = delivery(
        "github",
        body=raw,
        extra_headers={"content-type": "application/x-www-form-urlencoded"},
    )
    event = make_event(d, base64_body=True)
    assert event["body"] == "dG9rZW49eHl6JnRleHQ9aGk="
    assert status(ingest, event)[0] == 202
    [envelope] = ingest.envelopes()
    assert base64.b64decode(envelope["body_b64"]) == raw


def test_c03_header_case_missing_signature_and_joined_stripe_headers(
    ingest: IngestHarness,
) -> None:
    d = delivery("github")
    rest = rest_api_event(d)  # X-Hub-Signature-256 as a local run sends it
    assert "X-Hub-Signature-256" in rest["multiValueHeaders"]
    assert status(ingest, rest)[0] == 202
    missing = http_api_event(delivery("github"))
    del missing["headers"]["x-hub-signature-256"]
    assert status(ingest, missing)[0] == 401
    joined = http_api_event(delivery("stripe"))
    joined["headers"]["stripe-signature"] = "t=1700000000,v1=aaa,t=1700000001,v1=bbb"
    assert status(ingest, joined)[0] == 401


def test_c04_shopify_hex_digest_is_401(ingest: IngestHarness) -> None:
    d = delivery("shopify")
    hex_digest = hmac_digest(DEV_SECRETS["shopify"].encode(), d.body).hex()
    assert len(hex_digest) == 64
    event = http_api_event(d)
    assert len(event["headers"]["x-shopify-hmac-sha256"]) == 44
    event["headers"]["x-shopify-hmac-sha256"] = hex_digest
    assert status(ingest, event)[0] == 401


@pytest.mark.parametrize(
    "raw_t", ["1767267099257", "nan", "inf", "1e9", " 1700000000 ", "", "-1", "0x10", "\u0661"]
)
def test_c05_odd_timestamps_are_401_for_stripe_and_slack(ingest: IngestHarness, raw_t: str) -> None:
    body = b'{"id":"evt_c05","type":"t"}'
    secret = DEV_SECRETS["stripe"].encode()
    digest = hmac_digest(secret, raw_t.encode("utf-8") + b"." + body).hex()
    event = http_api_event(delivery("stripe", body=body))
    event["headers"]["stripe-signature"] = f"t={raw_t},v1={digest}"
    assert status(ingest, event)[0] == 401
    slack = http_api_event(delivery("slack"))
    slack["headers"]["x-slack-request-timestamp"] = raw_t
    assert status(ingest, slack)[0] == 401
    assert ingest.messages() == []


# -- faults -------------------------------------------------------------------------------------


def test_redis_restarted_empty_lets_a_retry_through_to_the_queue_never_a_5xx(
    make_ingest: Callable[..., IngestHarness], redis_factory: Callable[[], Any]
) -> None:
    server = redis_factory()
    harness = make_ingest(REDIS_URL=server.url)
    event = http_api_event(delivery("github", delivery_id="restart-1"))
    assert status(harness, event)[0] == 202
    assert status(harness, event)[0] == 200
    server.stop()  # this test's own redis-server
    during = status(harness, http_api_event(delivery("github", delivery_id="restart-2")))
    assert during[0] == 202
    server.start()  # same port, empty
    # The gate forgot restart-1: the retry is enqueued again (the processor dedups), not lost
    assert status(harness, event)[0] == 202
    envelopes = harness.envelopes()
    assert sorted(e["delivery_id"] for e in envelopes) == ["restart-1", "restart-1", "restart-2"]
    gates = {(e["delivery_id"], e["gate"]) for e in envelopes}
    assert ("restart-2", "bypassed") in gates
    assert ("restart-1", "claimed") in gates
    # And the gate works again
    assert status(harness, event)[0] == 200


def test_lost_confirm_keeps_the_pending_claim_so_retries_are_503_not_duplicate(
    ingest: IngestHarness, monkeypatch: pytest.MonkeyPatch, redis_url: str
) -> None:
    gate = ingest.app.service().gate

    def confirm_fails(*_a: Any, **_k: Any) -> bool:
        raise GateUnavailableError("ConnectionError: injected")

    monkeypatch.setattr(gate, "confirm", confirm_fails)
    event = http_api_event(delivery("github", delivery_id="lost-confirm"))
    assert status(ingest, event)[0] == 202  # enqueued: the sender is done
    monkeypatch.undo()
    response = ingest.invoke(event)
    assert response["statusCode"] == 503
    assert response["headers"]["retry-after"]
    assert json.loads(response["body"])["reason"] == "delivery_in_flight"
    ttl = redis.Redis.from_url(redis_url).ttl(gate_key("whd:", "github", "lost-confirm"))
    assert 0 < ttl <= 30
    assert len(ingest.messages()) == 1


@pytest.mark.parametrize(
    "error",
    [
        RuntimeError("unexpected"),
        ValueError("bad"),
        KeyError("MessageId"),
        ClientError({"Error": {"Code": "InternalError", "Message": "x"}}, "SendMessage"),
    ],
)
def test_any_exception_from_send_message_after_the_claim_is_503_and_released(
    ingest: IngestHarness, monkeypatch: pytest.MonkeyPatch, redis_url: str, error: Exception
) -> None:
    def boom(*_a: Any, **_k: Any) -> Any:
        raise error

    monkeypatch.setattr(ingest.app.service().queue.client, "send_message", boom)
    event = http_api_event(delivery("stripe"))
    response = ingest.invoke(event)
    assert response["statusCode"] == 503
    assert response["headers"]["retry-after"] == "5"
    assert gate_keys(redis_url) == []
    monkeypatch.undo()
    assert status(ingest, event)[0] == 202
    assert status(ingest, event)[0] == 200
    assert len(ingest.messages()) == 1


def test_secrets_manager_throttled_or_secret_deleted_is_503_and_touches_nothing(
    make_ingest: Callable[..., IngestHarness], monkeypatch: pytest.MonkeyPatch, redis_url: str
) -> None:
    harness = make_ingest(SECRETS_MAX_AGE_SECONDS="0")
    client = harness.app.service().secrets.provider.client

    def throttled(*_a: Any, **_k: Any) -> Any:
        raise ClientError(
            {"Error": {"Code": "ThrottlingException", "Message": "Rate exceeded"}},
            "GetSecretValue",
        )

    monkeypatch.setattr(client, "get_secret_value", throttled)
    response = harness.invoke(http_api_event(delivery("slack")))
    assert response["statusCode"] == 503
    assert response["headers"]["retry-after"] == "5"
    assert json.loads(response["body"]) == {"status": "rejected", "reason": "secret_unavailable"}
    monkeypatch.undo()
    boto3.client("secretsmanager").delete_secret(
        SecretId=f"{SECRETS_PREFIX}shopify", ForceDeleteWithoutRecovery=True
    )
    response = harness.invoke(http_api_event(delivery("shopify")))
    assert response["statusCode"] == 503
    assert "whsec" not in response["body"] and "dev-" not in response["body"]
    assert gate_keys(redis_url) == []
    assert harness.messages() == []
    # Other sources are unaffected
    assert status(harness, http_api_event(delivery("github")))[0] == 202


def test_malformed_secret_json_is_503_not_500(
    make_ingest: Callable[..., IngestHarness],
) -> None:
    harness = make_ingest(SECRETS_MAX_AGE_SECONDS="0")
    sm = boto3.client("secretsmanager")
    for value in ("{not json", '{"previous": "x"}', '{"current": ""}', '{"current": 5}', "   "):
        sm.put_secret_value(SecretId=f"{SECRETS_PREFIX}github", SecretString=value)
        response = harness.invoke(http_api_event(delivery("github")))
        assert response["statusCode"] == 503, value
        assert json.loads(response["body"])["reason"] == "secret_invalid"


# -- processor: a batch mixing every outcome ----------------------------------------------------

TABLE = "hostile-deliveries"
BUCKET = "hostile-payloads"


def _Context() -> FakeContext:
    return FakeContext(function_name="ProcessorFunction")


@pytest.fixture
def processor(aws: None, monkeypatch: pytest.MonkeyPatch) -> Iterator[ModuleType]:
    ddb = boto3.client("dynamodb")
    create_deliveries_table(ddb, TABLE)
    boto3.client("s3").create_bucket(Bucket=BUCKET)
    for name, value in {
        "TABLE_NAME": TABLE,
        "PAYLOAD_BUCKET": BUCKET,
        "MAX_WORKERS": "1",
    }.items():
        monkeypatch.setenv(name, value)
    registry.clear()
    name = f"hostile_processor_{uuid.uuid4().hex}"
    spec = importlib.util.spec_from_file_location(name, ROOT / "functions/processor/app.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    yield module
    if module.service.cache_info().currsize:
        module.service()._executor.shutdown(wait=True)
    registry.clear()


def _envelope(
    delivery_id: str, resource: str | None = "cus_h", seq: int | None = 1, **over: Any
) -> str:
    raw = json.dumps({"id": delivery_id}).encode()
    data: dict[str, Any] = {
        "source": "stripe",
        "delivery_id": delivery_id,
        "received_at": "2026-01-15T09:59:59Z",
        "event_type": "customer.updated",
        "body_b64": base64.b64encode(raw).decode(),
        "body_size": len(raw),
        "body_sha256": hashlib.sha256(raw).hexdigest(),
    }
    if resource is not None:
        data |= {"resource_key": resource, "sequence": seq}
    data |= over
    return json.dumps({k: v for k, v in data.items() if v is not None})


def _record(body: str, message_id: str) -> dict[str, Any]:
    return {
        "messageId": message_id,
        "receiptHandle": "AQEB" + message_id,
        "body": body,
        "attributes": {"ApproximateReceiveCount": "1"},
        "messageAttributes": {},
        "md5OfBody": hashlib.md5(body.encode()).hexdigest(),
        "eventSource": "aws:sqs",
        "eventSourceARN": "arn:aws:sqs:us-east-1:123456789012:MainQueue",
        "awsRegion": "us-east-1",
    }


def test_batch_mixing_every_outcome_reports_exactly_the_failed_message_ids(
    processor: ModuleType,
) -> None:
    # Given a resource at watermark 10 and a delivery already recorded
    seed = processor.lambda_handler(
        {
            "Records": [
                _record(_envelope("evt_seed", seq=10), "seed-1"),
                _record(_envelope("evt_dup", resource=None), "seed-2"),
            ]
        },
        _Context(),
    )
    assert seed == {"batchItemFailures": []}
    deep = '{"a":' + "[" * 50_000 + "]" * 50_000 + "}"
    batch = {
        "m-applied": _envelope("evt_new", seq=11),
        "m-stale": _envelope("evt_old", seq=9),
        "m-equal": _envelope("evt_equal", seq=10),
        "m-duplicate": _envelope("evt_dup", resource=None),
        "m-other-resource": _envelope("evt_other", resource="cus_other", seq=1),
        "m-schema-2": _envelope("evt_s2", schema_version=2),
        "m-extra-field": _envelope("evt_extra", unexpected=True),
        "m-sha-mismatch": _envelope("evt_sha", body_sha256="0" * 64),
        "m-size-mismatch": _envelope("evt_size", body_size=1),
        "m-missing-object": _envelope(
            "evt_ref", body_b64=None, body_ref={"bucket": BUCKET, "key": "bodies/stripe/missing"}
        ),
        "m-both-bodies": _envelope("evt_both", body_ref={"bucket": BUCKET, "key": "k"}),
        "m-not-json": "this is not an envelope",
        "m-array": "[1,2,3]",
        "m-empty": "",
        "m-deep": deep,
        "m-seq-without-resource": _envelope("evt_half", resource=None, sequence=5),
    }
    failing = {
        "m-schema-2",
        "m-extra-field",
        "m-sha-mismatch",
        "m-size-mismatch",
        "m-missing-object",
        "m-both-bodies",
        "m-not-json",
        "m-array",
        "m-empty",
        "m-deep",
        "m-seq-without-resource",
    }
    response = processor.lambda_handler(
        {"Records": [_record(body, mid) for mid, body in batch.items()]}, _Context()
    )
    # Then exactly the poison messages are reported, by exact messageId, in camelCase
    assert set(response) == {"batchItemFailures"}
    reported = [item["itemIdentifier"] for item in response["batchItemFailures"]]
    assert all(set(item) == {"itemIdentifier"} for item in response["batchItemFailures"])
    assert sorted(reported) == sorted(failing)
    store = processor.service()._store
    assert store.get_resource("stripe", "cus_h")["watermark"] == 11
    assert store.get_delivery("stripe", "evt_new")["outcome"] == "applied"
    assert store.get_delivery("stripe", "evt_old")["outcome"] == "stale"
    assert store.get_delivery("stripe", "evt_equal")["outcome"] == "applied"
    assert store.get_delivery("stripe", "evt_other")["outcome"] == "applied"
    for poison in ("evt_s2", "evt_extra", "evt_sha", "evt_size", "evt_ref", "evt_both"):
        assert store.get_delivery("stripe", poison) is None


def test_huge_batch_of_one_resource_out_of_order_ends_at_the_highest_sequence(
    processor: ModuleType,
) -> None:
    sequences = [7, 3, 10, 1, 10, 9, 2, 8, 4, 6, 5, 10]
    records = [
        _record(_envelope(f"evt_h{i}", resource="cus_big", seq=s), f"h-{i}")
        for i, s in enumerate(sequences)
    ]
    response = processor.lambda_handler({"Records": records}, _Context())
    assert response == {"batchItemFailures": []}
    store = processor.service()._store
    assert store.get_resource("stripe", "cus_big")["watermark"] == 10
    outcomes = [store.get_delivery("stripe", f"evt_h{i}")["outcome"] for i in range(len(sequences))]
    # Sorted by sequence with ties in arrival order, every delivery is applied: nothing older
    # than the watermark ever arrives after it, and equal sequences (three deliveries at 10)
    # all apply (docs/data-model.md).
    assert outcomes == ["applied"] * len(sequences)
    assert store.get_resource("stripe", "cus_big")["last_delivery_id"] == "evt_h11"


# -- replay requests ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "request_data",
    [
        {"max_messages": -1},
        {"max_messages": 0},
        {"max_messages": 2**70},
        {"max_messages": "5"},
        {"max_messages": 5.5},
        {"max_messages": True},
        {"dry_run": "true"},
        {"rate_per_second": 0},
        {"rate_per_second": 1e-300},
        {"rate_per_second": 0.009},
        {"rate_per_second": -1},
        {"rate_per_second": float("nan")},
        {"rate_per_second": float("inf")},
        {"unknown": 1},
        {"filter": {"unknown": 1}},
        {"filter": {"received_after": "2024-05-02", "received_before": "2024-05-01"}},
        {"filter": {"received_after": "2024-05-01T00:00:00Z", "received_before": "2024-05-01"}},
        {"filter": {"received_after": "not a date"}},
        {"filter": {"received_after": "2024-13-01"}},
        {"filter": {"received_after": ""}},
        {"filter": {"source": ""}},
        {"filter": {"delivery_id": "x" * 257}},
        {"filter": None},
        [],
        42,
        "[]",
        "null",
        b"\xff",
    ],
)
def test_hostile_replay_requests_are_refused_with_a_typed_error(request_data: Any) -> None:
    with pytest.raises(InvalidReplayRequestError):
        ReplayRequest.parse(request_data)


def test_replay_time_range_is_half_open_and_naive_times_are_utc() -> None:
    request = ReplayRequest.parse(
        {
            "filter": {
                "received_after": "2026-01-15T09:00:00",
                "received_before": "2026-01-15T10:00Z",
            }
        }
    )
    env = Envelope.from_json(_envelope("evt_r", received_at="2026-01-15T09:00:00Z"))
    assert request.filter.matches(env)
    at_end = Envelope.from_json(_envelope("evt_r", received_at="2026-01-15T10:00:00Z"))
    assert not request.filter.matches(at_end)


@pytest.mark.parametrize("api", ["http", "rest"])
def test_event_body_with_a_lone_surrogate_is_400_not_500(
    ingest: IngestHarness, redis_url: str, api: str
) -> None:
    # Given an API Gateway event whose (not base64) body string holds a lone surrogate: a JSON
    # event text with "\ud800" in "body" decodes to such a string in the Lambda runtime
    build = http_api_event if api == "http" else rest_api_event
    event = build(delivery("stripe", body=b'{"id":"evt_sur","x":"?"}'))
    event["body"] = event["body"].replace('"?"', '"\ud800"')
    event = json.loads(json.dumps(event))  # what the runtime hands over (the escape decoded)
    assert "\ud800" in event["body"]
    code, answer = status(ingest, event)
    assert (code, answer["reason"]) == (400, "body_not_utf8")
    assert gate_keys(redis_url) == [] and ingest.messages() == []
