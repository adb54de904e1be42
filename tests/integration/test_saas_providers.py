"""Ad platforms, social, SaaS and developer-tool providers through the real ingest handler (real
Redis, moto): one valid delivery each is 202 and enqueued with its delivery id, its duplicate is
200; every handshake is answered without a Redis command or an SQS/S3/DynamoDB call and counted;
the provider quirks that only show end to end (Graph's per-notification split and clientState,
Linear's re-stamped retries, LinkedIn's reading in the logs, Typeform's 404)."""

from __future__ import annotations

import base64
import hashlib
import json
import time
from pathlib import Path
from typing import Any

import pytest
import redis
from webhook_pipeline.fields import json_array_items
from webhook_pipeline.providers import all_providers
from webhook_pipeline_ops.simulator.deliveries import (
    SampleDelivery,
    example_sources,
    http_api_event,
    request_event,
    signed_delivery,
)
from webhook_pipeline_ops.simulator.event_files import handshake_event

from tests.helpers import metric_total
from tests.integration.ingest_harness import IngestHarness

pytestmark = pytest.mark.integration

SOURCES = example_sources()
PROVIDERS = [
    "tiktok", "linkedin", "x", "google-ads", "microsoft-graph", "linear", "twitch", "typeform",
    "calendly", "zendesk", "sentry", "bitbucket", "gitlab", "jira",
]  # fmt: skip


def expected_id(name: str, given: str, body: bytes, sequence: int) -> str:
    """The delivery id each provider's defaults make of a sample sent with id ``given``."""
    if name in ("x", "linkedin"):  # the SHA-256 of the signed body
        return hashlib.sha256(body).hexdigest()
    if name == "microsoft-graph":  # the SHA-256 of the one notification's exact bytes
        [event] = json_array_items(body, "value")
        return hashlib.sha256(event.raw).hexdigest()
    if name == "tiktok":
        return f"video.publish.completed:{sequence}:{given}"
    if name == "calendly":
        return f"invitee.created:https://api.calendly.com/scheduled_events/res_c/invitees/{given}"
    return given  # a header, the signed Twitch message id, or a body id field


def answer(harness: IngestHarness, event: dict[str, Any]) -> tuple[int, Any]:
    response = harness.invoke(event)
    try:
        return response["statusCode"], json.loads(response["body"])
    except ValueError:
        return response["statusCode"], response["body"]


def test_the_group_is_registered_and_served() -> None:
    assert set(PROVIDERS) <= set(all_providers()) and set(PROVIDERS) <= set(SOURCES)


@pytest.mark.parametrize("name", PROVIDERS)
def test_one_valid_delivery_is_202_enqueued_once_and_its_duplicate_is_200(
    ingest: IngestHarness, name: str
) -> None:
    source = SOURCES[name]
    given, sequence = source.provider.new_delivery_id("5e" * 16), int(time.time())
    delivery = signed_delivery(source, delivery_id=given, resource="res_c", sequence=sequence)
    delivery_id = expected_id(name, given, delivery.body, sequence)
    assert delivery.delivery_id == delivery_id
    event = http_api_event(delivery)
    code, body = answer(ingest, event)
    assert code == 202, body
    if source.provider.batch_path is None:
        assert body == {"status": "accepted", "delivery_id": delivery_id}
    else:
        assert body == {"status": "accepted", "events": 1, "accepted": 1, "duplicates": 0}
    [envelope] = ingest.envelopes()
    assert (envelope["source"], envelope["delivery_id"]) == (name, delivery_id)
    # None of these providers has an ordering value by default: none is invented.
    assert (envelope.get("resource_key"), envelope.get("sequence")) == (None, None)
    code, body = answer(ingest, event)
    assert code == 200 and body["status"] == "duplicate"
    assert ingest.envelopes() == []  # nothing new (the first one is held invisible)


@pytest.fixture
def counted_redis(redis_url: str) -> redis.Redis:
    client = redis.Redis.from_url(redis_url)
    client.config_resetstat()
    return client


EXPECTED_ANSWERS = {
    "linkedin": ("application/json", {"challengeCode", "challengeResponse"}),
    "x": ("application/json", {"response_token"}),
    "microsoft-graph": ("text/plain", None),
    "twitch": ("text/plain", None),
}


def test_every_handshake_is_answered_without_redis_or_aws_queues_and_is_counted(
    ingest: IngestHarness,
    counted_redis: redis.Redis,
    aws_calls: list[tuple[str, str]],
    capsys: pytest.CaptureFixture[str],
) -> None:
    ingest.invoke(http_api_event(signed_delivery(SOURCES["github"])))  # warm: secrets cached
    for name in EXPECTED_ANSWERS:
        ingest.invoke(handshake_event(SOURCES[name], SOURCES[name].provider.handshakes[0], 0))
    counted_redis.config_resetstat()
    aws_calls.clear()
    capsys.readouterr()
    answered = []
    for name, (content_type, keys) in EXPECTED_ANSWERS.items():
        source = SOURCES[name]
        [handshake] = source.provider.handshakes
        response = ingest.invoke(handshake_event(source, handshake, int(time.time())))
        assert response["statusCode"] == 200, (name, response)
        assert response["headers"]["content-type"] == content_type
        assert response["headers"]["x-content-type-options"] == "nosniff"  # a reflected token
        if keys is not None:
            assert set(json.loads(response["body"])) == keys
        else:
            assert response["body"] and not response["body"].startswith("{")
        answered.append(name)
    stats = counted_redis.info("commandstats")
    assert {k for k in stats if not k.startswith(("cmdstat_config", "cmdstat_info"))} == set()
    assert [c for c in aws_calls if c[0] in ("sqs", "s3", "dynamodb")] == []
    lines = [
        json.loads(x) for x in capsys.readouterr().out.splitlines() if "HandshakeAnswered" in x
    ]
    assert sorted(x["provider"] for x in lines) == sorted(answered)


def test_the_twitch_challenge_with_a_bad_signature_is_401(ingest: IngestHarness) -> None:
    source = SOURCES["twitch"]
    event = handshake_event(source, source.provider.handshakes[0], int(time.time()))
    event["headers"]["twitch-eventsub-message-signature"] = "sha256=" + "0" * 64
    assert ingest.invoke(event)["statusCode"] == 401


def test_a_linkedin_challenge_without_a_code_is_401_not_answered(ingest: IngestHarness) -> None:
    event = request_event("linkedin", "GET", b"", {}, {"applicationId": "1"})
    assert answer(ingest, event) == (401, {"status": "rejected", "reason": "handshake_invalid"})


def test_graph_notifications_are_split_and_one_rogue_client_state_rejects_the_post(
    ingest: IngestHarness,
) -> None:
    source = SOURCES["microsoft-graph"]
    secret = source.provider.dev_secret
    items = [{"changeType": "updated", "resource": f"Users/u/Messages/{i}"} for i in range(3)]
    body = source.provider.sign_body(
        json.dumps({"value": items}).encode(), secret, timestamp=0, delivery_id=""
    )
    event = http_api_event(SampleDelivery("microsoft-graph", "batch", body, {}))
    assert answer(ingest, event) == (
        202,
        {"status": "accepted", "events": 3, "accepted": 3, "duplicates": 0},
    )
    resources = sorted(
        json.loads(base64.b64decode(e["body_b64"]))["resource"] for e in ingest.envelopes()
    )
    assert resources == [f"Users/u/Messages/{i}" for i in range(3)]
    rogue = json.loads(body)
    rogue["value"].append({"changeType": "deleted", "resource": "x", "clientState": "guess"})
    event = http_api_event(SampleDelivery("microsoft-graph", "b2", json.dumps(rogue).encode(), {}))
    assert answer(ingest, event) == (401, {"status": "rejected", "reason": "signature_invalid"})
    assert ingest.envelopes() == []  # nothing more than the first three (already received)


def test_a_linear_retry_restamped_later_is_a_duplicate_without_a_body_mismatch(
    ingest: IngestHarness, capsys: pytest.CaptureFixture[str]
) -> None:
    source = SOURCES["linear"]
    now = int(time.time())
    first = signed_delivery(source, delivery_id="lin-d-1", timestamp=now - 30)
    retry = signed_delivery(source, delivery_id="lin-d-1", timestamp=now, body=first.body)
    assert first.body != retry.body  # webhookTimestamp moved
    assert answer(ingest, http_api_event(first))[0] == 202
    capsys.readouterr()
    assert answer(ingest, http_api_event(retry)) == (
        200,
        {"status": "duplicate", "delivery_id": "lin-d-1"},
    )
    assert metric_total(capsys.readouterr().out, "DuplicateBodyMismatch") == 0
    stale = signed_delivery(source, delivery_id="lin-d-2", timestamp=now - 61)
    assert answer(ingest, http_api_event(stale)) == (
        401,
        {"status": "rejected", "reason": "timestamp_stale"},
    )


def test_the_linkedin_reading_that_matched_is_on_the_log_lines(
    ingest: IngestHarness, log_lines: list[dict[str, Any]]
) -> None:
    assert answer(ingest, http_api_event(signed_delivery(SOURCES["linkedin"])))[0] == 202
    accepted = next(x for x in log_lines if x["message"] == "accepted")
    assert accepted["signature_family"] == "prefix_on_header"


@pytest.mark.parametrize(
    "name", sorted(n for n, cls in all_providers().items() if 404 in cls.stop_statuses)
)
def test_a_disabled_source_never_answers_a_stop_404(make_ingest, tmp_path: Path, name: str) -> None:
    path = tmp_path / "sources.toml"
    path.write_text(f'[sources.{name}]\nprovider = "{name}"\nenabled = false\n')
    harness = make_ingest(SOURCES_FILE=str(path), SOURCES_CATALOGUE="false")
    response = harness.invoke(http_api_event(signed_delivery(SOURCES[name])))
    assert response["statusCode"] == 503 and "retry-after" in response["headers"]
    assert json.loads(response["body"])["reason"] == "stop_status_withheld"
    # A source no provider owns is still 404 (the unknown URL is not that sender's).
    other = http_api_event(signed_delivery(SOURCES[name]), path_source="nope")
    assert harness.invoke(other)["statusCode"] == 404
