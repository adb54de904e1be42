"""The messaging and email providers through the real ingest handler (real Redis, moto): one
valid delivery each is 202 and enqueued with the right delivery id, resource key and sequence;
its duplicate is 200 with the provider's acknowledgement; each handshake is answered touching
neither Redis nor SQS, S3 or DynamoDB; Mailgun's one-time token; Discord's probes."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

import boto3
import pytest
import redis
from webhook_pipeline_ops.simulator.deliveries import (
    dev_secret_value,
    example_sources,
    http_api_event,
    signed_delivery,
)
from webhook_pipeline_ops.simulator.event_files import handshake_event

from tests.integration.ingest_harness import SECRETS_PREFIX, IngestHarness

pytestmark = pytest.mark.integration

SOURCES = example_sources()
#: provider -> (first delivery id expected, resource key, sequence) for signed_delivery(...,
#: resource="res_9", sequence=SEQ): None where the provider has no default ordering.
SEQ = 1_700_000_123
MESSAGING = ["sendgrid", "mailgun", "postmark", "telegram", "line", "discord", "zoom",
             "intercom", "vonage", "clerk", "resend", "standard-webhooks"]  # fmt: skip


@pytest.fixture
def catalogue(make_ingest: Callable[..., IngestHarness]) -> IngestHarness:
    """The ingest function serving every provider (the local stack's SOURCES_CATALOGUE)."""
    return make_ingest(SOURCES_CATALOGUE="true")


def answer(harness: IngestHarness, event: dict[str, Any]) -> tuple[int, Any]:
    response = harness.invoke(event)
    try:
        return response["statusCode"], json.loads(response["body"])
    except ValueError:
        return response["statusCode"], response["body"]


@pytest.mark.parametrize("name", MESSAGING)
def test_a_valid_delivery_is_enqueued_once_and_its_duplicate_is_200(
    catalogue: IngestHarness, name: str
) -> None:
    source = SOURCES[name]
    delivery = signed_delivery(source, resource="res_9", sequence=SEQ)
    code, body = answer(catalogue, http_api_event(delivery))
    expected_status = 200 if name == "discord" else 202
    assert code == expected_status, body
    envelopes = catalogue.envelopes()
    assert [e["delivery_id"] for e in envelopes] == list(delivery.delivery_ids)
    first = envelopes[0]
    if source.resource_key is not None:
        assert first["resource_key"] is not None and first["sequence"] is not None
    if name == "telegram":
        assert (first["resource_key"], first["sequence"]) == ("bot", int(delivery.delivery_id))
    if name == "clerk":
        assert (first["resource_key"], first["sequence"]) == ("res_9", SEQ * 1000)
    # The same delivery again (Mailgun re-signs every attempt: a fresh token, same event).
    again = signed_delivery(
        source, delivery_id=delivery.delivery_id, resource="res_9", sequence=SEQ,
        timestamp=int(time.time()) + 1,
    ) if name == "mailgun" else delivery  # fmt: skip
    code, body = answer(catalogue, http_api_event(again))
    assert code == 200, body
    if name == "discord":
        assert body == {"type": 5}
    elif source.provider.batch_path is None:
        assert body["status"] == "duplicate"
    else:
        assert body["duplicates"] == len(delivery.delivery_ids)
    assert catalogue.messages() == []  # nothing more was enqueued


def test_a_batched_sendgrid_post_is_one_envelope_per_sg_event_id(catalogue: IngestHarness) -> None:
    delivery = signed_delivery(SOURCES["sendgrid"], resource="msg_1", sequence=SEQ)
    assert len(delivery.delivery_ids) == 2
    code, body = answer(catalogue, http_api_event(delivery))
    assert (code, body["events"], body["accepted"]) == (202, 2, 2)
    envelopes = catalogue.envelopes()
    assert sorted(e["delivery_id"] for e in envelopes) == sorted(delivery.delivery_ids)
    assert {e["event_type"] for e in envelopes} == {"processed", "delivered"}


def test_a_reused_mailgun_token_is_401_within_the_tolerance(catalogue: IngestHarness) -> None:
    source = SOURCES["mailgun"]
    first = signed_delivery(source, delivery_id="ev_first")
    assert answer(catalogue, http_api_event(first))[0] == 202
    # A captured signature object moved onto other event-data: the same token again.
    forged_body = first.body.replace(b'"ev_first"', b'"ev_forged"')
    forged = type(first)(first.source, "ev_forged", forged_body, first.headers)
    code, body = answer(catalogue, http_api_event(forged))
    assert (code, body["reason"]) == (401, "replay_detected")
    assert [e["delivery_id"] for e in catalogue.envelopes()] == ["ev_first"]


def let_time_pass_in_redis(client: redis.Redis, seconds: int) -> None:
    """What ``seconds`` of waiting does to the keys of a real Redis: a key whose TTL runs out is
    gone, every other key with a TTL has that much less left (keys without one are kept)."""
    for key in client.scan_iter():
        left = int(client.pttl(key))
        if left < 0:
            continue
        if left <= seconds * 1000:
            client.delete(key)
        else:
            client.pexpire(key, left - seconds * 1000)


def test_a_mailgun_token_is_refused_for_as_long_as_its_timestamp_is_fresh(
    catalogue: IngestHarness, redis_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The timestamp is fresh ``tolerance`` seconds either side of our clock, so one token
    verifies for up to twice the tolerance: first used when its timestamp was just under the
    tolerance ahead of us, it must still be refused with another delivery id just under twice
    the tolerance later (just over 1x is where a token kept for 1x comes back), and once
    forgotten its timestamp is stale."""
    source = SOURCES["mailgun"]
    tolerance = source.provider.tolerance_seconds
    assert tolerance is not None
    signed_at = int(time.time())
    now = [float(signed_at - (tolerance - 10))]
    monkeypatch.setattr(catalogue.app.service(), "clock", lambda: now[0])
    client = redis.Redis.from_url(redis_url)
    first = signed_delivery(source, delivery_id="ev_first", timestamp=signed_at)
    assert answer(catalogue, http_api_event(first))[0] == 202
    forged_body = first.body.replace(b'"ev_first"', b'"ev_forged"')
    forged = http_api_event(type(first)(first.source, "ev_forged", forged_body, first.headers))
    elapsed = 0
    for later, reason in (
        (tolerance + 10, "replay_detected"),
        (2 * tolerance - 20, "replay_detected"),
        (2 * tolerance + 10, "timestamp_stale"),
    ):
        let_time_pass_in_redis(client, later - elapsed)
        now[0] += later - elapsed
        elapsed = later
        code, body = answer(catalogue, forged)
        assert (later, code, body.get("reason")) == (later, 401, reason), body
    assert [e["delivery_id"] for e in catalogue.envelopes()] == ["ev_first"]


@pytest.mark.parametrize("signature", ["0" * 128, "ab" * 64])
def test_discord_probes_with_invalid_signatures_get_401(
    catalogue: IngestHarness, signature: str
) -> None:
    delivery = signed_delivery(SOURCES["discord"])
    headers = {**delivery.headers, "X-Signature-Ed25519": signature}
    event = http_api_event(type(delivery)(delivery.source, delivery.delivery_id, delivery.body,
                                          headers))  # fmt: skip
    assert answer(catalogue, event)[0] == 401
    ping = handshake_event(SOURCES["discord"], SOURCES["discord"].provider.handshakes[0],
                           int(time.time()))  # fmt: skip
    ping["headers"]["x-signature-ed25519"] = signature
    assert answer(catalogue, ping)[0] == 401
    assert catalogue.messages() == []


def test_the_messaging_handshakes_touch_neither_redis_nor_aws_and_answer_exactly(
    catalogue: IngestHarness, redis_url: str, aws_calls: list[tuple[str, str]]
) -> None:
    client = redis.Redis.from_url(redis_url)
    catalogue.invoke(http_api_event(signed_delivery(SOURCES["github"])))  # warm
    client.config_resetstat()
    aws_calls.clear()
    answers = {}
    for name in ("discord", "zoom", "line"):
        source = SOURCES[name]
        boto3.client("secretsmanager").put_secret_value(
            SecretId=f"{SECRETS_PREFIX}{name}", SecretString=dev_secret_value(source)
        )
        for handshake in source.provider.handshakes:
            answers[name] = answer(catalogue, handshake_event(source, handshake, int(time.time())))
    stats = client.info("commandstats")
    assert {k for k in stats if not k.startswith(("cmdstat_config", "cmdstat_info"))} == set()
    assert [c for c in aws_calls if c[0] in ("sqs", "s3", "dynamodb")] == []
    assert answers["discord"] == (200, {"type": 1})
    assert answers["zoom"] == (
        200,
        {
            "plainToken": "qgg8vlvZRS6UYooatFL8Aw",
            "encryptedToken": __import__("hmac")
            .new(SOURCES["zoom"].provider.dev_secret.encode(), b"qgg8vlvZRS6UYooatFL8Aw", "sha256")
            .hexdigest(),
        },
    )
    assert answers["line"] == (200, {"status": "verified"})
    assert len(catalogue.messages()) == 1  # the warm-up delivery only


def test_stop_statuses_are_never_answered_to_mailgun_or_postmark(catalogue: IngestHarness) -> None:
    # Whatever goes wrong, Mailgun never sees 406 and Postmark never 403: a bad request is 401.
    for name in ("mailgun", "postmark"):
        delivery = signed_delivery(SOURCES[name], secret="postmark:wrong-but-well-formed")
        code, _ = answer(catalogue, http_api_event(delivery))
        assert code == 401 and code not in SOURCES[name].provider.stop_statuses
