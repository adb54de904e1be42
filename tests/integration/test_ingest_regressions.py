"""Inputs that once broke the ingest function, each with the exact input that failed: authentic
(correctly signed) requests must get a definite 4xx, never a 500 or a 503 that can never clear."""

from __future__ import annotations

import json

import boto3
import pytest
from webhook_pipeline_ops.simulator.deliveries import (
    example_sources,
    http_api_event,
    signed_delivery,
)

from tests.integration.ingest_harness import SECRETS_PREFIX, IngestHarness

pytestmark = pytest.mark.integration
SOURCES = example_sources()


def post(ingest: IngestHarness, source: str, body: bytes, **kw) -> dict:
    return ingest.invoke(http_api_event(signed_delivery(SOURCES[source], body=body, **kw)))


def reason(response: dict) -> str:
    return json.loads(response["body"])["reason"]


def test_json_nested_past_the_recursion_limit_is_400_not_500(ingest: IngestHarness) -> None:
    body = b'{"id":"evt_deep","x":' + b"[" * 10_000 + b"]" * 10_000 + b"}"
    response = post(ingest, "stripe", body)
    assert response["statusCode"] == 400
    assert ingest.messages() == []


def test_deeply_nested_slack_url_verification_is_not_a_500(ingest: IngestHarness) -> None:
    body = b'{"type":"url_verification","challenge":"c","x":' + b"[" * 10_000 + b"]" * 10_000 + b"}"
    assert post(ingest, "slack", body)["statusCode"] == 400


@pytest.mark.parametrize(
    "body",
    [
        b'{"id":"\\ud800"}',  # lone surrogate in the delivery id
        b'{"id":"evt_s3","type":"\\ud800"}',  # ... in the event type
        b'{"id":"evt_s4","type":"t","created":1,"data":{"object":{"id":"\\udfff"}}}',  # resource
    ],
)
def test_lone_surrogates_in_extracted_fields_are_400(ingest: IngestHarness, body: bytes) -> None:
    response = post(ingest, "stripe", body)
    assert response["statusCode"] == 400
    assert reason(response) == "field_not_utf8"
    # and the retry gets the same definite answer (not a 503 forever)
    assert post(ingest, "stripe", body)["statusCode"] == 400


@pytest.mark.parametrize(
    "created",
    ['"' + "9" * 5000 + '"', '"' + "9" * 39 + '"', str(2**130), str(-(10**38))],
)
def test_sequences_beyond_38_digits_are_400(ingest: IngestHarness, created: str) -> None:
    body = f'{{"id":"evt_hd","type":"t","created":{created},"data":{{"object":{{"id":"c"}}}}}}'
    response = post(ingest, "stripe", body.encode())
    assert response["statusCode"] == 400
    assert reason(response) == "sequence_invalid"


def test_a_38_digit_sequence_is_accepted(ingest: IngestHarness) -> None:
    body = '{"id":"evt_38","type":"t","created":' + "9" * 38 + ',"data":{"object":{"id":"c"}}}'
    assert post(ingest, "stripe", body.encode())["statusCode"] == 202


def test_event_type_over_256_bytes_is_400(ingest: IngestHarness) -> None:
    ok = post(ingest, "stripe", json.dumps({"id": "evt_t1", "type": "é" * 128}).encode())
    too_long = post(ingest, "stripe", json.dumps({"id": "evt_t2", "type": "é" * 129}).encode())
    assert ok["statusCode"] == 202
    assert too_long["statusCode"] == 400
    assert reason(too_long) == "event_type_too_long"


def test_huge_event_type_in_a_1_mib_body_is_400_not_a_503_forever(make_ingest) -> None:
    harness = make_ingest()
    body = json.dumps({"id": "evt_big_type", "type": "x" * 1_048_500}).encode()
    assert len(body) <= 1_048_576
    response = harness.invoke(http_api_event(signed_delivery(SOURCES["stripe"], body=body)))
    assert response["statusCode"] == 400


def test_resource_key_limit_counts_utf8_bytes(ingest: IngestHarness) -> None:
    def body(key: str, did: str) -> bytes:
        return json.dumps(
            {"id": did, "type": "t", "created": 1, "data": {"object": {"id": key}}}
        ).encode()

    assert post(ingest, "stripe", body("é" * 512, "evt_r1"))["statusCode"] == 202  # 1024 bytes
    response = post(ingest, "stripe", body("é" * 513, "evt_r2"))  # 1026 bytes, 513 characters
    assert response["statusCode"] == 400
    assert reason(response) == "resource_key_too_long"


def test_a_malformed_previous_secret_is_503_for_forged_requests_not_500(make_ingest) -> None:
    from webhook_pipeline_ops.simulator.deliveries import DEV_SECRETS

    boto3.client("secretsmanager").put_secret_value(
        SecretId=f"{SECRETS_PREFIX}standard-webhooks",
        SecretString=json.dumps(
            {"current": DEV_SECRETS["standard-webhooks"], "previous": "whsec_!!!"}
        ),
    )
    harness = make_ingest()
    valid = harness.invoke(http_api_event(signed_delivery(SOURCES["standard-webhooks"])))
    forged = harness.invoke(
        http_api_event(signed_delivery(SOURCES["standard-webhooks"], secret="whsec_" + "A" * 32))
    )
    assert valid["statusCode"] == 202
    assert forged["statusCode"] == 503
    assert reason(forged) == "secret_invalid"
    assert "retry-after" in forged["headers"]


def test_the_same_delivery_id_from_two_sources_is_two_deliveries(ingest: IngestHarness) -> None:
    # Given one delivery id sent by two sources (ids are unique per sender, not across them)
    same = "d-0000-shared-by-two-senders"
    answers = [
        ingest.invoke(http_api_event(signed_delivery(SOURCES[name], delivery_id=same)))
        for name in ("github", "standard-webhooks", "github")
    ]
    # Then each source's first is accepted (the gate key names the source); the repeat is not
    assert [a["statusCode"] for a in answers] == [202, 202, 200]
    assert sorted(e["source"] for e in ingest.envelopes()) == ["github", "standard-webhooks"]
