"""Invariants I1, I2, I6, I7 of the ingest function under injected faults, and cases C06, C07,
against a real Redis (a private redis-server where the test stops it) and moto."""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Iterator
from hashlib import sha1

import pytest
import redis
from botocore.exceptions import ClientError
from webhook_pipeline.adapters.redis_gate import CLAIM_SCRIPT as CLAIM
from webhook_pipeline.adapters.redis_gate import CONFIRM_SCRIPT as CONFIRM
from webhook_pipeline.adapters.redis_gate import RedisGate
from webhook_pipeline.ingest.claims import Claim, ClaimOutcome, gate_key
from webhook_pipeline_ops.simulator.deliveries import (
    example_sources,
    http_api_event,
    signed_delivery,
)

from tests.helpers import data_commands, metric_total
from tests.integration.ingest_harness import IngestHarness

pytestmark = pytest.mark.integration

DIGEST = "0" * 64  # content digest carried by the claims of these tests
SOURCES = example_sources()


def event_for(source: str = "github", **kw):
    return http_api_event(signed_delivery(SOURCES[source], **kw))


def throttle(*_args, **_kwargs):
    raise ClientError(
        {"Error": {"Code": "ThrottlingException", "Message": "Rate exceeded"}}, "SendMessage"
    )


# -- I1 / C07: claim, then the enqueue fails ---------------------------------------------------


def test_c07_enqueue_failure_releases_the_claim_answers_503_and_the_retry_is_accepted(
    ingest: IngestHarness, monkeypatch: pytest.MonkeyPatch, redis_url: str
) -> None:
    # Given SendMessage raises after the claim succeeded
    event = event_for("github", delivery_id="c07-delivery")
    queue = ingest.app.service().queue
    monkeypatch.setattr(queue.client, "send_message", throttle)
    # When the sender posts
    failed = ingest.invoke(event)
    # Then 503 with Retry-After, the claim released, nothing enqueued
    assert failed["statusCode"] == 503
    assert failed["headers"]["retry-after"] == "5"
    assert json.loads(failed["body"])["reason"] == "enqueue_failed"
    assert redis.Redis.from_url(redis_url).dbsize() == 0
    # When SQS recovers and the sender retries the same delivery
    monkeypatch.undo()
    retried = ingest.invoke(event)
    # Then it is accepted and enqueued exactly once
    assert retried["statusCode"] == 202
    assert [e["delivery_id"] for e in ingest.envelopes()] == ["c07-delivery"]


@pytest.mark.parametrize("exc", [ConnectionResetError("reset"), TimeoutError("read timeout")])
def test_any_enqueue_exception_is_503_never_a_lost_delivery(ingest, monkeypatch, exc) -> None:
    event = event_for("shopify")

    def boom(*_a, **_k):
        raise exc

    monkeypatch.setattr(ingest.app.service().queue.client, "send_message", boom)
    assert ingest.invoke(event)["statusCode"] == 503
    monkeypatch.undo()
    assert ingest.invoke(event)["statusCode"] == 202


def test_claim_check_upload_failure_is_503_and_released(
    make_ingest, monkeypatch, redis_url
) -> None:
    harness = make_ingest(INLINE_BODY_MAX_BYTES=10)
    event = event_for("github")

    def s3_down(*_a, **_k):
        raise ClientError({"Error": {"Code": "SlowDown", "Message": "x"}}, "PutObject")

    monkeypatch.setattr(harness.app.service().payloads._client, "put_object", s3_down)
    assert harness.invoke(event)["statusCode"] == 503
    assert redis.Redis.from_url(redis_url).dbsize() == 0
    assert harness.messages() == []
    monkeypatch.undo()
    assert harness.invoke(event)["statusCode"] == 202


def test_a_pending_claim_of_another_request_is_503_in_flight_not_duplicate(
    ingest, redis_url
) -> None:
    # Given another invocation claimed the delivery and has not enqueued it yet (or crashed)
    gate = RedisGate(redis.Redis.from_url(redis_url))
    key = gate_key("whd:", "github", "in-flight-1")
    assert gate.claim(Claim(key, "other-token", DIGEST), 30).outcome is ClaimOutcome.CLAIMED
    # When the sender's retry arrives
    response = ingest.invoke(event_for("github", delivery_id="in-flight-1"))
    # Then it is told to retry (I1: never "duplicate" before a copy is durably enqueued)
    assert response["statusCode"] == 503
    assert json.loads(response["body"])["reason"] == "delivery_in_flight"
    assert "retry-after" in response["headers"]
    assert ingest.messages() == []


def test_pending_claim_ttl_is_short_and_confirmed_claim_covers_the_retry_horizon(
    ingest, redis_url
) -> None:
    client = redis.Redis.from_url(redis_url)
    gate = RedisGate(client)
    key = gate_key("whd:", "github", "ttl-check")
    gate.claim(Claim(key, "tok", DIGEST), 30)
    assert 0 < client.ttl(key) <= 30
    gate.release(Claim(key, "tok", DIGEST))
    assert ingest.invoke(event_for("github", delivery_id="ttl-check"))["statusCode"] == 202
    assert client.ttl(key) > 259_200 - 60
    assert client.get(key).startswith(b"d:")


def test_release_never_deletes_a_claim_taken_over_by_another_token(redis_url) -> None:
    client = redis.Redis.from_url(redis_url)
    gate = RedisGate(client)
    key = gate_key("whd:", "github", "takeover")
    gate.claim(Claim(key, "mine", DIGEST), 30)
    client.set(key, "p:theirs")  # our claim expired and another invocation claimed it
    assert gate.release(Claim(key, "mine", DIGEST)) is False
    assert client.get(key) == b"p:theirs"
    assert gate.confirm(Claim(key, "mine", DIGEST), 600) is False
    assert client.get(key) == b"p:theirs"


# -- C06: redis-py SET NX result ---------------------------------------------------------------


def test_c06_the_gate_reads_a_missing_previous_value_as_claimed(
    redis_url, ingest, aws_calls
) -> None:
    # The claim script answers nil (None in redis-py, not False) when it took the key and the
    # previous value otherwise; the gate reads nil as claimed, a pending value as in flight and
    # a done value as a duplicate
    gate = RedisGate(redis.Redis.from_url(redis_url))
    key = gate_key("whd:", "github", "c06")
    assert gate.claim(Claim(key, "t1", DIGEST), 30).outcome is ClaimOutcome.CLAIMED
    assert gate.claim(Claim(key, "t2", DIGEST), 30).outcome is ClaimOutcome.IN_FLIGHT
    assert gate.confirm(Claim(key, "t1", DIGEST), 600) is True
    found = gate.claim(Claim(key, "t3", DIGEST), 30)
    assert (found.outcome, found.stored_digest) == (ClaimOutcome.DUPLICATE, DIGEST)
    # The duplicate path sends nothing to SQS and answers 200
    event = event_for("github")
    assert ingest.invoke(event)["statusCode"] == 202
    aws_calls.clear()
    duplicate = ingest.invoke(event)
    assert duplicate["statusCode"] == 200
    assert [c for c in aws_calls if c[0] == "sqs"] == []


# -- I2: verify before claim --------------------------------------------------------------------


@pytest.mark.parametrize("case", ["bad_signature", "stale", "future", "nan_timestamp", "missing"])
def test_i2_unauthenticated_requests_never_touch_redis_sqs_or_s3(
    ingest, redis_url, aws_calls, case
) -> None:
    client = redis.Redis.from_url(redis_url)
    now = int(time.time())
    if case == "bad_signature":
        event = event_for("stripe", secret="whsec_wrong")
    elif case == "stale":
        event = event_for("stripe", timestamp=now - 3600)
    elif case == "future":
        event = event_for("stripe", timestamp=now + 3600)
    elif case == "nan_timestamp":
        event = event_for("slack")
        event["headers"]["x-slack-request-timestamp"] = "nan"
    else:
        event = event_for("stripe")
        del event["headers"]["stripe-signature"]
    ingest.invoke(event_for("github"))  # warm: secrets cached, clients built
    aws_calls.clear()
    client.config_resetstat()
    response = ingest.invoke(event)
    assert response["statusCode"] == 401
    stats = client.info("commandstats")
    assert data_commands(stats) == {}
    assert [c for c in aws_calls if c[0] in {"sqs", "s3", "dynamodb"}] == []


# -- I6: acknowledge fast: nothing waits on processing -------------------------------------------


def test_i6_accepting_costs_two_redis_commands_one_sqs_call_and_nothing_else(
    ingest, aws_calls, monkeypatch
) -> None:
    ingest.invoke(event_for("github"))  # warm (secrets fetched and cached, scripts loaded)
    client = ingest.app.service().gate.client
    sent: list[str] = []
    original = client.execute_command

    def recording(*args, **kwargs):
        sent.append(" ".join(str(a) for a in args[:2]))
        return original(*args, **kwargs)

    claim_sha, confirm_sha = (sha1(script.encode()).hexdigest() for script in (CLAIM, CONFIRM))

    monkeypatch.setattr(client, "execute_command", recording)
    aws_calls.clear()
    assert ingest.invoke(event_for("github"))["statusCode"] == 202
    # Commands sent to Redis (round trips): the claim and the confirm script, one EVALSHA each
    assert sent == [f"EVALSHA {claim_sha}", f"EVALSHA {confirm_sha}"]
    assert aws_calls == [("sqs", "SendMessage")]
    sent.clear()
    aws_calls.clear()
    event = event_for("github")
    ingest.invoke(event)
    sent.clear()
    aws_calls.clear()
    assert ingest.invoke(event)["statusCode"] == 200
    assert sent == [f"EVALSHA {claim_sha}"]
    assert aws_calls == []


# -- I7: Redis down, slow or flushed ------------------------------------------------------------


def test_i7_redis_stopped_mid_run_fails_open_and_recovers(
    make_ingest, redis_factory, capsys
) -> None:
    server = redis_factory()
    harness = make_ingest(REDIS_URL=server.url)
    first = event_for("github", delivery_id="before-outage")
    assert harness.invoke(first)["statusCode"] == 202

    server.stop()  # the test's own redis-server, never the machine's
    capsys.readouterr()
    during = harness.invoke(event_for("github", delivery_id="during-outage"))
    retry_of_first = harness.invoke(first)
    assert during["statusCode"] == 202
    # Without the gate a duplicate is enqueued again; DynamoDB records it once.
    assert retry_of_first["statusCode"] == 202
    assert metric_total(capsys.readouterr().out, "GateUnavailable") == 2

    server.start()  # same port, empty: the gate works again
    after = event_for("github", delivery_id="after-outage")
    assert harness.invoke(after)["statusCode"] == 202
    assert harness.invoke(after)["statusCode"] == 200
    gates = {
        e["delivery_id"]: e["gate"]
        for e in harness.envelopes()
        if e["delivery_id"] != "before-outage"
    }
    assert gates == {"during-outage": "bypassed", "after-outage": "claimed"}


def test_i7_a_one_time_token_is_never_skipped_redis_down_even_failing_open(
    make_ingest, redis_factory
) -> None:
    # Mailgun signs its timestamp and token, not the body: the token used once is what stops a
    # captured signature from carrying another body, so it is checked or the request is 503
    server = redis_factory()
    harness = make_ingest(REDIS_URL=server.url, SOURCES_CATALOGUE="true")  # fail open
    mailgun = event_for("mailgun")
    server.stop()  # the test's own redis-server, never the machine's
    response = harness.invoke(mailgun)
    assert response["statusCode"] == 503
    assert json.loads(response["body"])["reason"] == "gate_unavailable"
    assert "retry-after" in response["headers"]
    # the claim itself still fails open for a provider that signs its body
    assert harness.invoke(event_for("github", delivery_id="outage-github"))["statusCode"] == 202
    assert [e["source"] for e in harness.envelopes()] == ["github"]  # received: gone
    server.start()  # same port, empty: the sender's retry is accepted
    assert harness.invoke(mailgun)["statusCode"] == 202
    assert [e["source"] for e in harness.envelopes()] == ["mailgun"]


def test_i7_fail_closed_answers_503_when_redis_is_down(make_ingest, redis_factory) -> None:
    server = redis_factory()
    harness = make_ingest(REDIS_URL=server.url, GATE_FAIL_MODE="closed")
    server.stop()
    response = harness.invoke(event_for("github"))
    assert response["statusCode"] == 503
    assert json.loads(response["body"])["reason"] == "gate_unavailable"
    assert "retry-after" in response["headers"]
    assert harness.messages() == []


def test_i7_fail_closed_stays_closed_while_the_breaker_is_open(make_ingest, redis_factory) -> None:
    # With a cool-down the breaker opens on the first failure; a request inside the cool-down
    # never reaches Redis and must still be 503, never let through as if failing open
    server = redis_factory()
    harness = make_ingest(REDIS_URL=server.url, GATE_FAIL_MODE="closed", GATE_COOLDOWN_SECONDS=60)
    server.stop()  # the test's own redis-server, never the machine's
    for delivery_id in ("first-during-outage", "second-inside-the-cool-down"):
        response = harness.invoke(event_for("github", delivery_id=delivery_id))
        assert (response["statusCode"], json.loads(response["body"])["reason"]) == (
            503,
            "gate_unavailable",
        )
    assert harness.messages() == []


def test_the_redis_key_prefix_keeps_two_stacks_apart_on_one_redis(
    make_ingest, redis_factory
) -> None:
    server = redis_factory()
    client = redis.Redis.from_url(server.url)
    stack_a = make_ingest(REDIS_URL=server.url, REDIS_KEY_PREFIX="stackA:")
    event = event_for("github", delivery_id="shared-delivery")
    assert stack_a.invoke(event)["statusCode"] == 202
    keys = sorted(k.decode() for k in client.keys("*"))
    assert keys == ["stackA:github:shared-delivery"]
    # another stack on the same Redis sees the same delivery as new, and a repeat as its own
    stack_b = make_ingest(REDIS_URL=server.url, REDIS_KEY_PREFIX="stackB:")
    assert stack_b.invoke(event)["statusCode"] == 202
    assert stack_b.invoke(event)["statusCode"] == 200
    assert sorted(k.decode() for k in client.keys("*")) == [
        "stackA:github:shared-delivery",
        "stackB:github:shared-delivery",
    ]


@pytest.fixture
def silent_redis() -> Iterator[str]:
    """A TCP listener that accepts connections and never answers (a hung Redis)."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        listener.settimeout(0.1)
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
                held.append(conn)
            except OSError:
                continue

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    yield f"redis://127.0.0.1:{listener.getsockname()[1]}/0"
    stop.set()
    thread.join()
    for conn in held:
        conn.close()
    listener.close()


def test_i7_a_hung_redis_costs_one_bounded_timeout_then_fails_open(
    make_ingest, silent_redis
) -> None:
    harness = make_ingest(
        REDIS_URL=silent_redis, REDIS_READ_TIMEOUT_MS=150, GATE_COOLDOWN_SECONDS=60
    )
    started = time.monotonic()
    first = harness.invoke(event_for("github"))
    second = harness.invoke(event_for("github"))  # within the cooldown: gate skipped, no wait
    elapsed = time.monotonic() - started
    assert (first["statusCode"], second["statusCode"]) == (202, 202)
    # Functional bound (no hang, no client retries), not a speed target: one 150 ms timeout.
    assert elapsed < 5
    assert {e["gate"] for e in harness.envelopes()} == {"bypassed"}


def test_i7_redis_flushed_lets_a_duplicate_through_to_the_queue(ingest, redis_url) -> None:
    event = event_for("github", delivery_id="flushed")
    assert ingest.invoke(event)["statusCode"] == 202
    redis.Redis.from_url(redis_url).flushdb()
    # The fast filter forgot it: enqueued again (the processor's conditional write is the guarantee)
    assert ingest.invoke(event)["statusCode"] == 202
    assert ingest.invoke(event)["statusCode"] == 200
    assert [e["delivery_id"] for e in ingest.envelopes()] == ["flushed", "flushed"]


def test_gate_unreachable_host_fails_open(make_ingest) -> None:
    from tests.conftest import free_port

    harness = make_ingest(REDIS_URL=f"redis://127.0.0.1:{free_port()}/0")
    assert harness.invoke(event_for("github"))["statusCode"] == 202


@pytest.mark.parametrize("batch", [False, True], ids=["confirm", "confirm_many"])
def test_a_claim_that_expired_before_confirm_is_set_again_as_done(
    redis_url: str, batch: bool
) -> None:
    # Given a claim whose pending TTL ran out while SQS was accepting the message (the key is
    # gone, as after expiry)
    client = redis.Redis.from_url(redis_url)
    gate = RedisGate(client)
    claim = Claim(gate_key("whd:", "github", "expired-before-confirm"), "tok-1", DIGEST)
    assert gate.claim(claim, 30).outcome is ClaimOutcome.CLAIMED
    client.delete(claim.key)
    # When the invocation confirms it
    if batch:
        gate.confirm_many([claim], 3600)
    else:
        assert gate.confirm(claim, 3600)
    # Then the key is set again as done with the long TTL: a later copy is a duplicate
    assert client.get(claim.key) == claim.done_value.encode()
    assert 3500 < client.ttl(claim.key) <= 3600
    later = Claim(claim.key, "tok-2", DIGEST)
    assert gate.claim(later, 30).outcome is ClaimOutcome.DUPLICATE
    # ... while a claim another invocation took over in the meantime is left alone
    other = Claim(gate_key("whd:", "github", "taken-over"), "tok-3", DIGEST)
    client.set(other.key, Claim(other.key, "tok-4", DIGEST).pending_value, ex=30)
    if batch:
        gate.confirm_many([other], 3600)
    else:
        assert not gate.confirm(other, 3600)
    assert client.get(other.key) == Claim(other.key, "tok-4", DIGEST).pending_value.encode()
