"""Large batched POSTs through the real ingest handler (real Redis, moto SQS): accepted whatever
their number of events (bounded by bytes), claims confirmed chunk by chunk, the time budget
watched (503 + Retry-After before the function's timeout, the retry sending only the rest), the
claims of events not enqueued released, and the batch split agreeing with ``json.loads``.
"""

from __future__ import annotations

import base64
import json
from collections import Counter
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import boto3
import botocore.client
import pytest
import redis
from webhook_pipeline.adapters.sqs import SqsQueue
from webhook_pipeline.envelope import Envelope
from webhook_pipeline.ingest.claims import gate_key
from webhook_pipeline_ops.simulator.deliveries import (
    example_sources,
    http_api_event,
    signed_delivery,
)

from tests.helpers import FakeContext
from tests.integration.ingest_harness import IngestHarness

pytestmark = pytest.mark.integration

SOURCES = example_sources()


def sendgrid_events(n: int, prefix: str = "sg") -> list[dict[str, Any]]:
    """``n`` SendGrid events shaped as the Event Webhook posts them (about 370 bytes each)."""
    return [
        {
            "email": f"recipient-{i}@example.com",
            "timestamp": 1_764_650_000 + i,
            "smtp-id": f"<14c5d75ce93.dfd.64b469.{i}@ismtpd-555>",
            "event": "delivered",
            "category": ["newsletter", "cat facts"],
            "sg_event_id": f"{prefix}-{i:05d}-rWVYmVk9bWFil1ZRz5",
            "sg_message_id": f"14c5d75ce93.dfd.64b469.filter0001.16648.{i:08X}.0",
            "response": "250 OK",
            "ip": "192.0.2.10",
            "tls": 1,
            "cert_err": 0,
            "useragent": "Mozilla/5.0 (Windows NT 10.0; Win64; x64)",
        }
        for i in range(n)
    ]


def sendgrid_post(events: list[dict[str, Any]]) -> dict[str, Any]:
    body = (json.dumps(events, separators=(",", ":")) + "\r\n").encode()
    return http_api_event(signed_delivery(SOURCES["sendgrid"], body=body))


def answer(response: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    return response["statusCode"], json.loads(response["body"])


@pytest.fixture
def big(
    make_ingest: Callable[..., IngestHarness], monkeypatch: pytest.MonkeyPatch
) -> IngestHarness:
    """The ingest function with its clock stopped: moto's ``SendMessageBatch`` looks at every
    message of the queue, so 190 calls take 25 s on a busy machine where SQS takes about 2 s.
    Time runs out only where a test says so (the Lambda context's remaining time)."""
    harness = make_ingest()
    monkeypatch.setattr(harness.app, "perf_counter", lambda: 1_000.0, raising=False)
    return harness


@pytest.fixture
def batch_calls(monkeypatch: pytest.MonkeyPatch) -> list[list[str]]:
    """The delivery ids of every ``SendMessageBatch`` call's entries, one list per call."""
    calls: list[list[str]] = []
    original = botocore.client.BaseClient._make_api_call

    def recording(self: Any, operation: str, params: dict[str, Any]) -> Any:
        if operation == "SendMessageBatch":
            calls.append([json.loads(e["MessageBody"])["delivery_id"] for e in params["Entries"]])
        return original(self, operation, params)

    monkeypatch.setattr(botocore.client.BaseClient, "_make_api_call", recording)
    return calls


def enqueued_ids(harness: IngestHarness) -> Counter[str]:
    return Counter(e["delivery_id"] for e in harness.envelopes())


def queue_depth(harness: IngestHarness) -> int:
    """Messages on the main queue: one call (receiving 1,900 messages from moto takes minutes
    on a busy machine)."""
    attributes = harness.sqs.get_queue_attributes(
        QueueUrl=harness.queue_url, AttributeNames=["ApproximateNumberOfMessages"]
    )["Attributes"]
    return int(attributes["ApproximateNumberOfMessages"])


# -- any documented batch is accepted -----------------------------------------------------------


def test_a_sendgrid_batch_of_1900_events_is_accepted_and_each_event_enqueued_once(
    big: IngestHarness, batch_calls: list[list[str]], log_lines: list[dict[str, Any]]
) -> None:
    events = sendgrid_events(1_900)
    event = sendgrid_post(events)
    assert 650_000 < len(event["body"]) < 1_048_576  # about the 709 KB reported, under 1 MiB

    code, body = answer(big.invoke(event))

    assert (code, body["accepted"], body["duplicates"]) == (202, 1_900, 0)
    sent = Counter(i for call in batch_calls for i in call)
    assert set(sent) == {e["sg_event_id"] for e in events} and set(sent.values()) == {1}
    assert len(batch_calls) == 190 and all(len(call) == 10 for call in batch_calls)
    assert queue_depth(big) == 1_900
    # every id enqueued is logged once for the audit, in lines CloudWatch does not truncate
    logged = [x for x in log_lines if x["message"] == "batch enqueued"]
    assert [len(x["delivery_ids"]) for x in logged] == [500, 500, 500, 400]
    assert Counter(i for x in logged for i in x["delivery_ids"]) == sent


def test_a_body_over_the_byte_limit_is_still_refused_with_its_reason(
    big: IngestHarness, redis_url: str
) -> None:
    event = sendgrid_post(sendgrid_events(3_000))
    assert len(event["body"]) > 1_048_576

    code, body = answer(big.invoke(event))

    assert (code, body) == (413, {"status": "rejected", "reason": "payload_too_large"})
    assert big.messages() == []
    assert redis.Redis.from_url(redis_url).dbsize() == 0


# -- the time budget: 503 before the timeout, the retry sends only the rest ---------------------


def test_a_batch_cut_off_half_way_answers_503_and_its_retry_sends_only_the_rest(
    big: IngestHarness, batch_calls: list[list[str]], redis_url: str
) -> None:
    events = sendgrid_events(1_000)
    ids = [e["sg_event_id"] for e in events]
    event = sendgrid_post(events)
    # Lambda's remaining time runs out once 47 chunks are sent (the 470 of the report)
    context = FakeContext(remaining_ms=lambda: 300_000 if len(batch_calls) < 47 else 900)

    first = big.app.lambda_handler(event, context)

    assert first["statusCode"] == 503 and first["headers"]["retry-after"] == "5"
    assert json.loads(first["body"])["reason"] == "time_budget_exhausted"
    sent_first = [i for call in batch_calls for i in call]
    assert sent_first == ids[:470]
    gate = redis.Redis.from_url(redis_url)
    stored = [gate.get(gate_key("whd:", "sendgrid", i)) for i in ids]
    assert all(v is not None and v.startswith(b"d:") for v in stored[:470])  # confirmed
    assert all(v is None for v in stored[470:])  # released: the retry is not "in flight"

    batch_calls.clear()
    code, body = answer(big.invoke(event))

    assert (code, body["accepted"], body["duplicates"]) == (202, 530, 470)
    assert [i for call in batch_calls for i in call] == ids[470:]
    assert queue_depth(big) == 1_000  # every event exactly once over both


class Killed(BaseException):
    """Lambda stopping the invocation: nothing after it runs in the handler."""


def test_an_invocation_killed_half_way_leaves_the_chunks_before_it_confirmed(
    big: IngestHarness,
    batch_calls: list[list[str]],
    redis_url: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    events = sendgrid_events(1_000)
    ids = [e["sg_event_id"] for e in events]
    event = sendgrid_post(events)
    recording = botocore.client.BaseClient._make_api_call

    def killed_at_the_48th_call(self: Any, operation: str, params: dict[str, Any]) -> Any:
        if operation == "SendMessageBatch" and len(batch_calls) == 47:
            raise Killed()
        return recording(self, operation, params)

    monkeypatch.setattr(botocore.client.BaseClient, "_make_api_call", killed_at_the_48th_call)
    with pytest.raises(Killed):
        big.invoke(event)
    monkeypatch.setattr(botocore.client.BaseClient, "_make_api_call", recording)

    gate = redis.Redis.from_url(redis_url)
    keys = [gate_key("whd:", "sendgrid", i) for i in ids]
    stored = [gate.get(key) for key in keys]
    assert all(v is not None and v.startswith(b"d:") for v in stored[:470])
    # the window being sent (events 310-709) is pending; the windows after it were not claimed
    assert all(v is not None and v.startswith(b"p:") for v in stored[470:710])
    assert all(v is None for v in stored[710:])
    gate.delete(*keys[470:710])  # as the pending claims' TTL (about the function timeout) does
    batch_calls.clear()
    code, body = answer(big.invoke(event))
    assert (code, body["accepted"], body["duplicates"]) == (202, 530, 470)
    assert [i for call in batch_calls for i in call] == ids[470:]


def test_the_time_budget_setting_itself_stops_a_batch_before_it_runs_out(
    make_ingest: Callable[..., IngestHarness],
    batch_calls: list[list[str]],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    harness = make_ingest(INGEST_TIME_BUDGET_MS="4000")
    # A clock that moves 125 ms per SendMessageBatch call: 4,000 ms less the reserve of one
    # more chunk (1,000 ms SQS + 2 x 400 ms Redis) leaves room for 18 calls (the 18th starts
    # with 4,000 - 17 x 125 = 1,875 ms left), whatever the machine's real speed
    clock = lambda: 1_000.0 + len(batch_calls) * 0.125  # noqa: E731
    monkeypatch.setattr(harness.app, "perf_counter", clock, raising=False)
    events = sendgrid_events(400)

    code, body = answer(harness.invoke(sendgrid_post(events)))

    assert (code, body["reason"]) == (503, "time_budget_exhausted")
    assert len(batch_calls) == 18
    assert sorted(enqueued_ids(harness)) == sorted(e["sg_event_id"] for e in events[:180])


# -- the claims of events not enqueued are released ---------------------------------------------


def _entries_answered(
    monkeypatch: pytest.MonkeyPatch, drop: str, refuse: bool
) -> list[dict[str, Any]]:
    """Make SQS never queue the entry of delivery ``drop``: listed in ``Failed`` when
    ``refuse``, otherwise in neither ``Successful`` nor ``Failed``. Returns the responses."""
    original = botocore.client.BaseClient._make_api_call
    responses: list[dict[str, Any]] = []

    def answering(self: Any, operation: str, params: dict[str, Any]) -> Any:
        if operation != "SendMessageBatch":
            return original(self, operation, params)
        entries = params["Entries"]
        kept = [e for e in entries if json.loads(e["MessageBody"])["delivery_id"] != drop]
        response = original(self, operation, {**params, "Entries": kept})
        for entry in entries:
            if entry not in kept and refuse:
                response.setdefault("Failed", []).append(
                    {"Id": entry["Id"], "SenderFault": True, "Code": "InvalidMessageContents"}
                )
        responses.append(response)
        return response

    monkeypatch.setattr(botocore.client.BaseClient, "_make_api_call", answering)
    return responses


@pytest.mark.parametrize("refuse", [True, False], ids=["refused", "not_answered"])
def test_an_event_sqs_does_not_queue_is_503_its_claim_released_and_the_retry_queues_it(
    big: IngestHarness, redis_url: str, monkeypatch: pytest.MonkeyPatch, refuse: bool
) -> None:
    events = sendgrid_events(25)
    lost = events[17]["sg_event_id"]
    responses = _entries_answered(monkeypatch, lost, refuse)
    event = sendgrid_post(events)

    first = big.invoke(event)

    assert len(responses) == 3  # the entry really went unanswered or refused in its call
    assert first["statusCode"] == 503 and "retry-after" in first["headers"]
    assert redis.Redis.from_url(redis_url).get(gate_key("whd:", "sendgrid", lost)) is None
    assert lost not in enqueued_ids(big)
    monkeypatch.undo()
    code, body = answer(big.invoke(event))  # at once: well within the 30 s pending TTL
    assert (code, body["accepted"], body["duplicates"]) == (202, 1, 24)
    assert enqueued_ids(big) == Counter({lost: 1})


def test_an_entry_sqs_answers_neither_sent_nor_failed_is_reported_failed(
    aws: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    sqs = boto3.client("sqs", region_name="us-east-1")
    url = sqs.create_queue(QueueName="q")["QueueUrl"]
    envelopes = [
        Envelope(
            source="s",
            delivery_id=f"d-{i}",
            received_at=datetime(2026, 12, 2, tzinfo=UTC),
            body_b64=base64.b64encode(b"{}").decode(),
            body_size=2,
            body_sha256="0" * 64,
        )
        for i in range(12)
    ]
    _entries_answered(monkeypatch, "d-4", refuse=False)

    results = list(SqsQueue(sqs, url).send_chunks(envelopes))

    assert [sorted(r.sent) for r in results] == [[0, 1, 2, 3, 5, 6, 7, 8, 9], [10, 11]]
    assert results[0].failed == {4: "no answer for this entry"} and results[1].failed == {}


# -- the batch split and json.loads agree on duplicate keys -------------------------------------


def test_a_batch_key_given_twice_is_read_as_json_loads_reads_it(ingest: IngestHarness) -> None:
    sample = json.loads(signed_delivery(SOURCES["line"]).body)
    event = sample["events"][0]
    first = {**event, "webhookEventId": "01HFIRSTCOPYOFTHEKEY00000A"}
    last = {**event, "webhookEventId": "01HLASTCOPYOFTHEKEY000000B"}
    body = (
        f'{{"destination":{json.dumps(sample["destination"])},'
        f'"events":[{json.dumps(first)}],"events":[{json.dumps(last)}]}}'
    ).encode()
    assert [e["webhookEventId"] for e in json.loads(body)["events"]] == [last["webhookEventId"]]

    response = ingest.invoke(http_api_event(signed_delivery(SOURCES["line"], body=body)))

    assert response["statusCode"] == 202
    assert list(enqueued_ids(ingest)) == [last["webhookEventId"]]


def test_an_event_whose_id_key_is_given_twice_has_the_id_json_loads_reads(
    ingest: IngestHarness,
) -> None:
    one = json.dumps(sendgrid_events(1)[0], separators=(",", ":"))
    doubled = one.replace('"sg_event_id":', '"sg_event_id":"sg-first","sg_event_id":', 1)
    body = f"[{doubled}]\r\n".encode()

    code, _ = answer(ingest.invoke(http_api_event(signed_delivery(SOURCES["sendgrid"], body=body))))

    assert code == 202
    (envelope,) = ingest.envelopes()
    enqueued = json.loads(base64.b64decode(envelope["body_b64"]))
    # The processor and every hook read the enqueued bytes with json.loads: the same id
    assert envelope["delivery_id"] == enqueued["sg_event_id"] != "sg-first"


# -- every attempt whose parsing and verifying fit makes progress --------------------------------


class StoppedClock:
    """``perf_counter`` for the handler, moved only by the test; the Lambda context's remaining
    time is the 5 s timeout less what the clock moved since the attempt began."""

    def __init__(self) -> None:
        self.now = 1_000.0
        self.started = self.now

    def __call__(self) -> float:
        return self.now

    def attempt(self) -> FakeContext:
        self.started = self.now
        return FakeContext(remaining_ms=lambda: int(5_000 - (self.now - self.started) * 1000))


def _attempts_until_2xx(
    harness: IngestHarness, event: dict[str, Any], clock: StoppedClock, calls: list[list[str]]
) -> list[tuple[int, int]]:
    """(status, SendMessageBatch calls) of each attempt, until one answers 2xx (at most 30)."""
    attempts = []
    for _ in range(30):
        before = len(calls)
        response = harness.app.lambda_handler(event, clock.attempt())
        attempts.append((response["statusCode"], len(calls) - before))
        if response["statusCode"] < 300:
            break
        assert json.loads(response["body"])["reason"] == "time_budget_exhausted"
    return attempts


def test_parsing_that_leaves_less_than_the_soft_budget_still_sends_one_chunk_per_attempt(
    make_ingest: Callable[..., IngestHarness],
    batch_calls: list[list[str]],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    harness = make_ingest(INGEST_TIME_BUDGET_MS="4000")
    clock = StoppedClock()
    monkeypatch.setattr(harness.app, "perf_counter", clock, raising=False)
    from webhook_pipeline.ingest import service

    read_events = service.read_events

    def slow_read(*args: Any, **kwargs: Any) -> Any:
        events = read_events(*args, **kwargs)
        clock.now += 0.025 * len(events)  # 25 ms per event: 2,500 ms for 100
        return events

    monkeypatch.setattr(service, "read_events", slow_read)
    events = sendgrid_events(100)
    ids = [e["sg_event_id"] for e in events]

    attempts = _attempts_until_2xx(harness, sendgrid_post(events), clock, batch_calls)

    # 4,000 - 2,500 ms leaves less than one chunk's 1,800 ms reserve, but the 5 s timeout
    # leaves 2,500 ms: room for one window's claim (400 ms) and one call, not two
    assert attempts == [(503, 1)] * 9 + [(202, 1)]
    assert [i for call in batch_calls for i in call] == ids  # each once, in order
    assert queue_depth(harness) == 100


def test_building_envelopes_is_not_done_before_the_first_call_for_the_whole_batch(
    make_ingest: Callable[..., IngestHarness],
    batch_calls: list[list[str]],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    harness = make_ingest(INGEST_TIME_BUDGET_MS="4000")
    clock = StoppedClock()
    monkeypatch.setattr(harness.app, "perf_counter", clock, raising=False)
    from webhook_pipeline.ingest.envelopes import EnvelopeFactory

    build = EnvelopeFactory.build

    def slow_build(self: EnvelopeFactory, *args: Any, **kwargs: Any) -> Envelope:
        clock.now += 0.0025  # 2.5 ms per envelope: 2,500 ms for all 1,000
        return build(self, *args, **kwargs)

    monkeypatch.setattr(EnvelopeFactory, "build", slow_build)
    events = sendgrid_events(1_000)

    attempts = _attempts_until_2xx(harness, sendgrid_post(events), clock, batch_calls)

    assert all(calls >= 1 for _, calls in attempts), attempts
    assert attempts[-1][0] == 202 and len(attempts) <= 3, attempts
    sent = [i for call in batch_calls for i in call]
    assert sorted(sent) == sorted(e["sg_event_id"] for e in events)  # each exactly once
    assert queue_depth(harness) == 1_000


def test_every_send_message_batch_call_stays_under_256_kib_with_big_entries(
    big: IngestHarness, monkeypatch: pytest.MonkeyPatch
) -> None:
    sizes: list[int] = []
    original = botocore.client.BaseClient._make_api_call

    def measuring(self: Any, operation: str, params: dict[str, Any]) -> Any:
        if operation == "SendMessageBatch":
            sizes.append(
                sum(
                    len(e["MessageBody"].encode())
                    + sum(
                        len(name) + len(a["DataType"]) + len(a.get("StringValue", "").encode())
                        for name, a in e["MessageAttributes"].items()
                    )
                    for e in params["Entries"]
                )
            )
        return original(self, operation, params)

    monkeypatch.setattr(botocore.client.BaseClient, "_make_api_call", measuring)
    events = sendgrid_events(30)
    for e in events:  # about 41 KB per envelope: 10 of them exceed 262,144 bytes
        e["useragent"] = "x" * 30_000

    code, body = answer(big.invoke(sendgrid_post(events)))

    assert (code, body["accepted"]) == (202, 30)
    assert max(sizes) <= 262_144, sizes
    assert len(sizes) > 3  # the 30 entries took more calls than 10 entries each would
    assert queue_depth(big) == 30


def test_a_gate_failing_closed_after_the_first_window_still_logs_the_events_it_sent(
    make_ingest: Callable[..., IngestHarness],
    batch_calls: list[list[str]],
    log_lines: list[dict[str, Any]],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from webhook_pipeline.adapters.redis_gate import RedisGate
    from webhook_pipeline.errors import GateUnavailableError

    harness = make_ingest(GATE_FAIL_MODE="closed")
    claim_many = RedisGate.claim_many
    windows: list[int] = []

    def second_fails(self: RedisGate, claims: Any, ttl_seconds: int) -> Any:
        windows.append(len(claims))
        if len(windows) == 2:
            raise GateUnavailableError("connection reset")
        return claim_many(self, claims, ttl_seconds)

    monkeypatch.setattr(RedisGate, "claim_many", second_fails)
    events = sendgrid_events(50)

    code, body = answer(harness.invoke(sendgrid_post(events)))

    assert (code, body["reason"]) == (503, "gate_unavailable")
    sent = [i for call in batch_calls for i in call]
    assert sent == [e["sg_event_id"] for e in events[:10]]  # the first window only
    logged = [i for x in log_lines if x["message"] == "batch enqueued" for i in x["delivery_ids"]]
    assert logged == sent  # for the audit: every id enqueued is logged
