"""The payment and URL-signing providers (Paddle, Square, Adyen, Razorpay, Mollie, Twilio,
HubSpot) through the real ingest handler (real Redis, moto): one valid delivery each is accepted
and enqueued with its delivery id, resource key and sequence, its duplicate is 200; Adyen's
batch and every-item rule, HubSpot's retries and transient failures, Mollie's per-request ids;
and the public URL of the URL-signing providers when API Gateway sees another one."""

from __future__ import annotations

import base64
import json
import time
from pathlib import Path
from typing import Any

import boto3
import botocore.client
import pytest
import redis
from botocore.exceptions import ClientError
from webhook_pipeline.errors import ConfigurationError
from webhook_pipeline_ops.simulator.deliveries import (
    example_sources,
    http_api_event,
    signed_delivery,
)

from tests.helpers import metric_total
from tests.integration.ingest_harness import SECRETS_PREFIX, IngestHarness

pytestmark = pytest.mark.integration

SOURCES = example_sources()
#: What API Gateway reports as the domain when a custom domain or proxy is in front of it.
GATEWAY = "abc123def4.execute-api.eu-west-1.amazonaws.com"


def answer(harness: IngestHarness, event: dict[str, Any]) -> tuple[int, Any, str]:
    response = harness.invoke(event)
    body = response["body"]
    try:
        parsed: Any = json.loads(body)
    except ValueError:
        parsed = body
    return response["statusCode"], parsed, response["headers"].get("content-type", "")


def sources_file(tmp_path: Path, text: str) -> str:
    path = tmp_path / "sources.toml"
    path.write_text(text)
    return str(path)


# -- one valid delivery per provider, and its duplicate -----------------------------------------

SINGLE = {
    # source: (resource key read, sequence read) for resource "r-7" at sequence 1_700_000_000
    "paddle": ("r-7", 1_700_000_000 * 1_000_000),
    "square": ("r-7", 1_700_000_000 * 1_000_000),
    "razorpay": (None, None),
    "twilio": (None, None),
}


@pytest.mark.parametrize("name", sorted(SINGLE))
def test_a_delivery_is_accepted_with_its_ids_and_its_duplicate_is_200(
    ingest: IngestHarness, name: str
) -> None:
    source = SOURCES[name]
    delivery = signed_delivery(source, resource="r-7", sequence=1_700_000_000)
    event = http_api_event(delivery)
    ack = source.provider.acknowledgement(202, {})
    code, body, content_type = answer(ingest, event)
    assert (code, content_type) == (202, ack.content_type)
    if ack.content_type == "application/json":
        assert body == {"status": "accepted", "delivery_id": delivery.delivery_id}
    else:
        assert body == ack.text()
    code, body, _ = answer(ingest, event)
    assert code == 200
    assert body == (
        {"status": "duplicate", "delivery_id": delivery.delivery_id}
        if ack.content_type == "application/json"
        else ack.text()
    )
    [envelope] = ingest.envelopes()
    assert envelope["delivery_id"] == delivery.delivery_id
    assert (envelope.get("resource_key"), envelope.get("sequence")) == SINGLE[name]
    assert base64.b64decode(envelope["body_b64"]) == delivery.body


def test_the_ids_are_the_providers_own(ingest: IngestHarness) -> None:
    paddle = signed_delivery(SOURCES["paddle"], delivery_id="evt_01abc")
    twilio = signed_delivery(SOURCES["twilio"], delivery_id="SM" + "1" * 32, event_type="sent")
    razorpay = signed_delivery(SOURCES["razorpay"], delivery_id="evt_R1")
    for delivery in (paddle, twilio, razorpay):
        assert answer(ingest, http_api_event(delivery))[0] == 202
    ids = sorted(e["delivery_id"] for e in ingest.envelopes())
    assert ids == sorted(["evt_01abc", "SM" + "1" * 32 + ":sent", "evt_R1"])


@pytest.mark.parametrize("name", ["adyen", "hubspot"])
def test_a_batch_is_one_delivery_per_event_and_its_duplicate_is_200(
    ingest: IngestHarness, name: str
) -> None:
    source = SOURCES[name]
    delivery = signed_delivery(source)
    assert len(delivery.delivery_ids) == 2
    event = http_api_event(delivery)
    ack = source.provider.acknowledgement(202, {})
    code, body, _ = answer(ingest, event)
    assert code == 202
    assert body == (
        {"status": "accepted", "events": 2, "accepted": 2, "duplicates": 0}
        if ack.content_type == "application/json"
        else "[accepted]"
    )
    code, body, _ = answer(ingest, event)
    assert code == 200
    if ack.content_type == "application/json":
        assert body == {"status": "duplicate", "events": 2, "accepted": 0, "duplicates": 2}
    envelopes = ingest.envelopes()
    assert sorted(e["delivery_id"] for e in envelopes) == sorted(delivery.delivery_ids)
    for envelope in envelopes:
        assert base64.b64decode(envelope["body_b64"]) in delivery.body


# -- Adyen: every item verified before the split -------------------------------------------------


def test_adyen_one_forged_item_refuses_the_post_and_touches_nothing(
    ingest: IngestHarness, redis_url: str, aws_calls: list[tuple[str, str]]
) -> None:
    delivery = signed_delivery(SOURCES["adyen"])
    document = json.loads(delivery.body)
    document["notificationItems"][1]["NotificationRequestItem"]["amount"]["value"] = 1
    forged = type(delivery)(delivery.source, delivery.delivery_id, json.dumps(document).encode())
    client = redis.Redis.from_url(redis_url)
    client.config_resetstat()
    aws_calls.clear()
    code, body, _ = answer(ingest, http_api_event(forged))
    assert (code, body["reason"]) == (401, "signature_invalid")
    stats = client.info("commandstats")
    assert {k for k in stats if not k.startswith(("cmdstat_config", "cmdstat_info"))} == set()
    assert [c for c in aws_calls if c[0] in ("sqs", "s3", "dynamodb")] == []
    assert ingest.messages() == []


# -- HubSpot: retries change attemptNumber; transient failures are 503, never a 4xx ---------------

NOT_RETRIED_BY_HUBSPOT = {400, 401, 403, 404, 405}


def hubspot_batch(attempt: int, timestamp: int | None = None) -> dict[str, Any]:
    events = [
        {"eventId": 9, "subscriptionId": 7, "portalId": 62515, "attemptNumber": attempt,
         "subscriptionType": "contact.creation", "objectId": 1, "occurredAt": 1},
    ]  # fmt: skip
    body = json.dumps(events, separators=(",", ":")).encode()
    return http_api_event(signed_delivery(SOURCES["hubspot"], body=body, timestamp=timestamp))


def test_hubspot_a_retry_with_another_attempt_number_is_a_clean_duplicate(
    ingest: IngestHarness, capsys: pytest.CaptureFixture[str]
) -> None:
    assert answer(ingest, hubspot_batch(0))[0] == 202
    capsys.readouterr()
    code, body, _ = answer(ingest, hubspot_batch(1, timestamp=int(time.time()) + 1))
    assert (code, body["duplicates"]) == (200, 1)
    assert metric_total(capsys.readouterr().out, "DuplicateBodyMismatch") == 0
    assert [e["delivery_id"] for e in ingest.envelopes()] == ["62515:7:9"]


def _hubspot(*objects: int, timestamp: int | None = None) -> dict[str, Any]:
    """A HubSpot batch of event 9 once per ``objects`` value (its content: the object id)."""
    events = [
        {"eventId": 9, "subscriptionId": 7, "portalId": 62515, "attemptNumber": 0,
         "subscriptionType": "contact.creation", "objectId": obj, "occurredAt": 1}
        for obj in objects
    ]  # fmt: skip
    body = json.dumps(events, separators=(",", ":")).encode()
    return http_api_event(signed_delivery(SOURCES["hubspot"], body=body, timestamp=timestamp))


def test_hubspot_an_event_id_again_with_other_content_is_counted_at_the_gate_and_in_one_post(
    ingest: IngestHarness, capsys: pytest.CaptureFixture[str]
) -> None:
    later = int(time.time()) + 1
    assert answer(ingest, _hubspot(1))[0] == 202
    capsys.readouterr()
    # the same event id in a later POST: the identical copy is clean, another content counted
    assert answer(ingest, _hubspot(1, timestamp=later))[1]["duplicates"] == 1
    assert metric_total(capsys.readouterr().out, "DuplicateBodyMismatch") == 0
    assert answer(ingest, _hubspot(2, timestamp=later))[1]["duplicates"] == 1
    assert metric_total(capsys.readouterr().out, "DuplicateBodyMismatch") == 1
    ingest.envelopes()  # the first POST's envelope, received
    # one POST naming a new event id twice: once with the same content, once with another
    redis.Redis.from_url(ingest.app.settings.redis_url).flushall()
    assert answer(ingest, _hubspot(3, 3, timestamp=later + 1))[0] == 202
    assert metric_total(capsys.readouterr().out, "DuplicateBodyMismatch") == 0
    redis.Redis.from_url(ingest.app.settings.redis_url).flushall()
    assert answer(ingest, _hubspot(4, 5, timestamp=later + 2))[0] == 202
    assert metric_total(capsys.readouterr().out, "DuplicateBodyMismatch") == 1
    assert [e["delivery_id"] for e in ingest.envelopes()] == ["62515:7:9", "62515:7:9"]


def test_hubspot_transient_failures_are_503_so_hubspot_retries(
    make_ingest, redis_factory, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Redis down with the gate failing closed.
    server = redis_factory()
    closed = make_ingest(REDIS_URL=server.url, GATE_FAIL_MODE="closed", SOURCES_CATALOGUE="true")
    server.stop()
    statuses = {answer(closed, hubspot_batch(0))[0]}
    # The queue refusing the batch.
    harness = make_ingest(SOURCES_CATALOGUE="true")
    original = botocore.client.BaseClient._make_api_call

    def refuse(self: Any, operation: str, params: dict[str, Any]) -> Any:
        if operation in ("SendMessage", "SendMessageBatch"):
            raise ClientError({"Error": {"Code": "ServiceUnavailable"}}, operation)
        return original(self, operation, params)

    monkeypatch.setattr(botocore.client.BaseClient, "_make_api_call", refuse)
    statuses.add(answer(harness, hubspot_batch(0))[0])
    monkeypatch.undo()
    # The secret unreadable.
    boto3.client("secretsmanager").delete_secret(
        SecretId=f"{SECRETS_PREFIX}hubspot", ForceDeleteWithoutRecovery=True
    )
    statuses.add(answer(make_ingest(SOURCES_CATALOGUE="true"), hubspot_batch(0))[0])
    assert statuses == {503}
    assert not statuses & NOT_RETRIED_BY_HUBSPOT


def test_hubspot_is_never_answered_403(ingest: IngestHarness) -> None:
    # A stale batch is 401 (a retry is re-signed, this one never verifies); never 403.
    code, body, _ = answer(ingest, hubspot_batch(0, timestamp=int(time.time()) - 3600))
    assert (code, body["reason"]) == (401, "timestamp_stale")
    assert 403 in SOURCES["hubspot"].provider.stop_statuses


# -- Mollie: unsigned, admitted by a URL token, every request its own delivery -------------------


def mollie_event(request_id: str, token: str | None = None) -> dict[str, Any]:
    source = SOURCES["mollie"]
    delivery = signed_delivery(source, resource="tr_WDqYK6vllg")
    event = http_api_event(delivery)
    event["requestContext"]["requestId"] = request_id
    if token is not None:
        event["queryStringParameters"] = {"token": token}
        event["rawQueryString"] = f"token={token}"
    return event


def test_mollie_the_same_body_twice_is_two_deliveries(ingest: IngestHarness) -> None:
    # One payment paid, then refunded: Mollie posts id=tr_... both times.
    for request_id in ("req-paid", "req-refunded"):
        code, body, _ = answer(ingest, mollie_event(request_id))
        assert (code, body["delivery_id"]) == (202, request_id)
    envelopes = ingest.envelopes()
    assert sorted(e["delivery_id"] for e in envelopes) == ["req-paid", "req-refunded"]
    assert {base64.b64decode(e["body_b64"]) for e in envelopes} == {b"id=tr_WDqYK6vllg"}


def test_mollie_without_its_url_token_is_401_and_touches_nothing(
    ingest: IngestHarness, redis_url: str
) -> None:
    for token in ("", "wrong-token-wrong-token-wrong-token-00"):
        code, body, _ = answer(ingest, mollie_event("req-x", token))
        assert code == 401, body
    assert redis.Redis.from_url(redis_url).keys("*") == [] and ingest.messages() == []


def test_mollie_needs_accept_unsigned_and_loads_loudly(
    make_ingest, tmp_path: Path, log_lines: list[dict[str, Any]]
) -> None:
    with pytest.raises(ConfigurationError, match="accept_unsigned"):
        make_ingest(SOURCES_FILE=sources_file(tmp_path, '[sources.mollie]\nprovider = "mollie"\n'))
    text = '[sources.mollie]\nprovider = "mollie"\noptions = { accept_unsigned = true }\n'
    make_ingest(SOURCES_FILE=sources_file(tmp_path, text))
    warning = next(x for x in log_lines if x.get("source") == "mollie")
    assert warning["level"] == "WARNING" and warning["unsigned_fields"] == ["delivery_id"]


# -- the public URL: API Gateway's view is not the URL the provider signed ------------------------


def test_a_source_public_url_behind_a_custom_domain_verifies(make_ingest, tmp_path: Path) -> None:
    # Twilio calls https://hooks.example.com/sms/status; API Gateway sees its own domain and
    # the /webhooks/twilio-status route the custom domain maps to.
    signed_at = "https://hooks.example.com/sms/status"
    text = (
        '[sources.twilio-status]\nprovider = "twilio"\nsecret = "twilio"\n'
        f'public_url = "{signed_at}"\n'
        '[sources.twilio-plain]\nprovider = "twilio"\nsecret = "twilio"\n'
    )
    harness = make_ingest(SOURCES_FILE=sources_file(tmp_path, text))
    source = example_sources(sources_file(tmp_path, text))["twilio-status"]
    delivery = signed_delivery(source, url=signed_at, delivery_id="SM" + "2" * 32)
    # The same request to a source without public_url: API Gateway's view is not what was signed.
    plain = http_api_event(delivery, domain=GATEWAY, path_source="twilio-plain")
    assert answer(harness, plain)[:2] == (
        401,
        {"status": "rejected", "reason": "signature_invalid"},
    )
    code, _, content_type = answer(harness, http_api_event(delivery, domain=GATEWAY))
    assert (code, content_type) == (202, "text/xml")
    assert [e["delivery_id"] for e in harness.envelopes()] == ["SM" + "2" * 32 + ":delivered"]


@pytest.mark.parametrize("name", ["square", "hubspot", "twilio"])
def test_public_base_url_is_what_the_provider_signed(make_ingest, name: str) -> None:
    harness = make_ingest(SOURCES_CATALOGUE="true", PUBLIC_BASE_URL="https://hooks.example.com")
    delivery = signed_delivery(SOURCES[name], url=f"https://hooks.example.com/webhooks/{name}")
    assert answer(harness, http_api_event(delivery, domain=GATEWAY))[0] == 202


@pytest.mark.parametrize("name", ["square", "hubspot", "twilio"])
def test_a_mismatch_logs_the_url_reconstructed_never_the_signature(
    ingest: IngestHarness,
    name: str,
    log_lines: list[dict[str, Any]],
    capsys: pytest.CaptureFixture[str],
) -> None:
    # Signed for the custom domain; no public URL configured: API Gateway's view is used.
    delivery = signed_delivery(SOURCES[name], url=f"https://hooks.example.com/webhooks/{name}")
    capsys.readouterr()
    code, body, _ = answer(ingest, http_api_event(delivery, domain=GATEWAY))
    assert (code, body["reason"] if isinstance(body, dict) else body) == (401, "signature_invalid")
    [line] = [x for x in log_lines if x["message"] == "signed URL as reconstructed"]
    assert line["url"] == f"https://{GATEWAY}/webhooks/{name}"
    provider = SOURCES[name].provider
    signature = delivery.headers[provider.signature_header]
    logged = capsys.readouterr().out + json.dumps(log_lines)
    assert signature not in logged and len(signature) >= 20
