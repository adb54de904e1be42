"""Replay against moto SQS: redrive to the DLQ, dry run, filters, send failures, rate limit, the
replay handler, and a replayed delivery applied once by the real processor handler."""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError
from webhook_pipeline.adapters.sqs_replay import SqsDeadLetterQueue, SqsReplaySender, queue_depth
from webhook_pipeline.envelope import Envelope, sha256_hex
from webhook_pipeline.errors import InvalidReplayRequestError
from webhook_pipeline.replay.request import ReplayRequest
from webhook_pipeline.replay.run import MAX_LISTED, replay

from tests.helpers import FakeContext, create_deliveries_table, load_function

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
MAX_RECEIVE_COUNT = 3


@dataclass
class Queues:
    sqs: Any
    main_url: str
    dlq_url: str

    def send(self, envelope: Envelope, **kwargs: Any) -> None:
        self.sqs.send_message(QueueUrl=self.main_url, MessageBody=envelope.to_json(), **kwargs)

    def fail_processing(self) -> None:
        """Receive the main queue as a failing consumer would, until redrive empties it."""
        for _ in range(100):
            if self.depth(self.main_url) == 0:
                return
            self.sqs.receive_message(
                QueueUrl=self.main_url, MaxNumberOfMessages=10, VisibilityTimeout=0
            )
        raise AssertionError("the main queue did not drain into the DLQ")

    def drain(self, url: str) -> list[dict[str, Any]]:
        """Every message of a queue (kept invisible, so each is returned once)."""
        found: list[dict[str, Any]] = []
        while batch := self.sqs.receive_message(
            QueueUrl=url,
            MaxNumberOfMessages=10,
            VisibilityTimeout=600,
            MessageAttributeNames=["All"],
            MessageSystemAttributeNames=["All"],
        ).get("Messages", []):
            found.extend(batch)
        return found

    def depth(self, url: str) -> int:
        depth = queue_depth(self.sqs, url)
        assert depth is not None
        return depth

    def visible(self, url: str) -> int:
        attrs = self.sqs.get_queue_attributes(
            QueueUrl=url, AttributeNames=["ApproximateNumberOfMessages"]
        )["Attributes"]
        return int(attrs["ApproximateNumberOfMessages"])


def create_queues(sqs: Any) -> tuple[str, str]:
    dlq_url = sqs.create_queue(QueueName="dlq")["QueueUrl"]
    dlq_arn = sqs.get_queue_attributes(QueueUrl=dlq_url, AttributeNames=["QueueArn"])["Attributes"][
        "QueueArn"
    ]
    main_url = sqs.create_queue(
        QueueName="main",
        Attributes={
            "RedrivePolicy": json.dumps(
                {"deadLetterTargetArn": dlq_arn, "maxReceiveCount": str(MAX_RECEIVE_COUNT)}
            )
        },
    )["QueueUrl"]
    return main_url, dlq_url


@pytest.fixture
def queues(aws: None) -> Queues:
    sqs = boto3.client("sqs")
    main_url, dlq_url = create_queues(sqs)
    return Queues(sqs, main_url, dlq_url)


def envelope(delivery_id: str, source: str = "stripe", **extra: Any) -> Envelope:
    body = json.dumps({"id": delivery_id, "type": extra.get("event_type", "invoice.paid")}).encode()
    fields: dict[str, Any] = {
        "source": source,
        "delivery_id": delivery_id,
        "received_at": datetime(2024, 5, 1, 12, 0, tzinfo=UTC),
        "event_type": "invoice.paid",
        "headers": {"content-type": "application/json"},
        "body_b64": base64.b64encode(body).decode(),
        "body_size": len(body),
        "body_sha256": sha256_hex(body),
    }
    fields.update(extra)
    return Envelope.model_validate(fields)


def run(queues: Queues, request: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
    report = replay(
        ReplayRequest.parse(request),
        SqsDeadLetterQueue(queues.sqs, queues.dlq_url, wait_time_seconds=0),
        SqsReplaySender(queues.sqs, queues.main_url),
        **kwargs,
    )
    return report.to_dict()


# ------------------------------------------------------------------------- redrive


def test_poison_message_reaches_the_dlq_after_max_receive_count_receives(queues: Queues) -> None:
    # Given a poison message on the main queue
    queues.sqs.send_message(QueueUrl=queues.main_url, MessageBody="{not an envelope")
    # When it is received maxReceiveCount times without being deleted
    for attempt in range(1, MAX_RECEIVE_COUNT + 1):
        got = queues.sqs.receive_message(
            QueueUrl=queues.main_url, VisibilityTimeout=0, MessageSystemAttributeNames=["All"]
        )["Messages"]
        assert got[0]["Attributes"]["ApproximateReceiveCount"] == str(attempt)
    assert queues.depth(queues.dlq_url) == 0
    # Then the next receive moves it to the DLQ instead of returning it
    assert "Messages" not in queues.sqs.receive_message(QueueUrl=queues.main_url)
    assert queues.depth(queues.main_url) == 0
    [dead] = queues.drain(queues.dlq_url)
    assert dead["Body"] == "{not an envelope"


# ------------------------------------------------------------------------- dry run, filter


def test_dry_run_counts_and_moves_nothing(queues: Queues) -> None:
    # Given two dead-lettered deliveries
    queues.send(envelope("evt_1"))
    queues.send(envelope("evt_2"))
    queues.fail_processing()
    assert queues.depth(queues.dlq_url) == 2
    # When dry-running
    report = run(queues, {"dry_run": True})
    # Then both are counted and listed, nothing moved, both visible again at once
    assert {k: report[k] for k in ("examined", "matched", "replayed", "skipped", "failed")} == {
        "examined": 2,
        "matched": 2,
        "replayed": 0,
        "skipped": 0,
        "failed": 0,
    }
    assert report["dry_run"] is True
    assert report["remaining"] == 2
    assert sorted(i["delivery_id"] for i in report["would_replay"]) == ["evt_1", "evt_2"]
    assert queues.depth(queues.main_url) == 0
    assert queues.visible(queues.dlq_url) == 2


def test_filtered_replay_moves_only_matching_messages(queues: Queues) -> None:
    # Given 12 github deliveries and 2 stripe ones in the DLQ (more than one receive batch)
    for i in range(12):
        queues.send(envelope(f"gh_{i}", source="github", event_type="push"))
    queues.send(envelope("evt_1"))
    queues.send(envelope("evt_2", event_type="invoice.created"))
    queues.fail_processing()
    assert queues.depth(queues.dlq_url) == 14
    # When replaying source=stripe, event_type=invoice.paid
    report = run(queues, {"filter": {"source": "stripe", "event_type": "invoice.paid"}})
    # Then only evt_1 moved, with replay_count 1 and gate "replayed"; the rest stay, visible
    assert (report["examined"], report["matched"], report["replayed"]) == (14, 1, 1)
    assert report["skipped"] == 13
    assert report["complete"] is True
    [moved] = queues.drain(queues.main_url)
    replayed = Envelope.from_json(moved["Body"])
    assert replayed.delivery_id == "evt_1"
    assert (replayed.replay_count, replayed.gate) == (1, "replayed")
    assert replayed.model_dump(exclude={"replay_count", "gate"}) == envelope("evt_1").model_dump(
        exclude={"replay_count", "gate"}
    )
    assert queues.visible(queues.dlq_url) == 13
    assert report["remaining"] == 13


def test_received_at_range_filter(queues: Queues) -> None:
    for day in (1, 2, 3):
        queues.send(envelope(f"evt_{day}", received_at=datetime(2024, 5, day, tzinfo=UTC)))
    queues.fail_processing()
    report = run(
        queues,
        {"filter": {"received_after": "2024-05-02T00:00:00Z", "received_before": "2024-05-03"}},
    )
    assert report["replayed"] == 1
    [moved] = queues.drain(queues.main_url)
    assert Envelope.from_json(moved["Body"]).delivery_id == "evt_2"


def test_message_attributes_survive_the_replay(queues: Queues) -> None:
    queues.send(
        envelope("evt_1"),
        MessageAttributes={"source": {"DataType": "String", "StringValue": "stripe"}},
    )
    queues.fail_processing()
    run(queues, {})
    [moved] = queues.drain(queues.main_url)
    assert moved["MessageAttributes"]["source"]["StringValue"] == "stripe"


def test_malformed_message_stays_in_the_dlq(queues: Queues) -> None:
    queues.sqs.send_message(QueueUrl=queues.main_url, MessageBody="garbage")
    queues.send(envelope("evt_1"))
    queues.fail_processing()
    report = run(queues, {})
    assert (report["replayed"], report["skipped"], report["malformed"]) == (1, 1, 1)
    [left] = queues.drain(queues.dlq_url)
    assert left["Body"] == "garbage"


# ------------------------------------------------------------------------- failures


class FailingSender(SqsReplaySender):
    """The real sender, except that sends of the given delivery ids fail like SQS would."""

    def __init__(self, client: Any, queue_url: str, fail_for: set[str]) -> None:
        super().__init__(client, queue_url)
        self.fail_for = fail_for

    def send(self, body: str, message_attributes: Any) -> None:
        if Envelope.from_json(body).delivery_id in self.fail_for:
            real = self.client.send_message

            def refuse(**kwargs: Any) -> Any:
                raise ClientError(
                    {"Error": {"Code": "ServiceUnavailable", "Message": "try later"}},
                    "SendMessage",
                )

            self.client.send_message = refuse
            try:
                return super().send(body, message_attributes)
            finally:
                self.client.send_message = real
        return super().send(body, message_attributes)


def test_send_failure_mid_replay_leaves_the_message_in_the_dlq(queues: Queues) -> None:
    # Given three dead-lettered deliveries, the send of evt_2 fails
    for i in (1, 2, 3):
        queues.send(envelope(f"evt_{i}"))
    queues.fail_processing()
    # When replaying
    report = replay(
        ReplayRequest(),
        SqsDeadLetterQueue(queues.sqs, queues.dlq_url, wait_time_seconds=0),
        FailingSender(queues.sqs, queues.main_url, fail_for={"evt_2"}),
    ).to_dict()
    # Then evt_1 and evt_3 moved; evt_2 is still in the DLQ, visible, counted as failed
    assert (report["replayed"], report["failed"], report["remaining"]) == (2, 1, 1)
    moved = sorted(Envelope.from_json(m["Body"]).delivery_id for m in queues.drain(queues.main_url))
    assert moved == ["evt_1", "evt_3"]
    assert queues.visible(queues.dlq_url) == 1
    [left] = queues.drain(queues.dlq_url)
    assert Envelope.from_json(left["Body"]).delivery_id == "evt_2"


def test_main_queue_gone_stops_after_consecutive_failures(queues: Queues) -> None:
    for i in range(8):
        queues.send(envelope(f"evt_{i}"))
    queues.fail_processing()
    queues.sqs.delete_queue(QueueUrl=queues.main_url)
    report = run(queues, {})
    assert report["stopped"] == "send_failures"
    assert (report["replayed"], report["failed"]) == (0, 5)
    assert queues.visible(queues.dlq_url) == 8


# ------------------------------------------------------------------------- rate limit


def test_rate_limit_is_honoured_counted_by_sleeps(queues: Queues) -> None:
    for i in range(6):
        queues.send(envelope(f"evt_{i}"))
    queues.fail_processing()
    now = [0.0]
    sleeps: list[float] = []

    def sleep(seconds: float) -> None:
        sleeps.append(seconds)
        now[0] += seconds

    report = run(queues, {"rate_per_second": 2}, clock=lambda: now[0], sleep=sleep)
    assert report["replayed"] == 6
    assert len(sleeps) == 5
    assert sum(sleeps) == pytest.approx(2.5)


# ------------------------------------------------------------------------- the handler


@pytest.fixture
def replay_app(queues: Queues, monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    yield load_function(
        "replay",
        {"QUEUE_URL": queues.main_url, "DLQ_URL": queues.dlq_url, "RECEIVE_WAIT_SECONDS": "0"},
        monkeypatch,
    )


def test_handler_runs_the_committed_events(queues: Queues, replay_app: Any, event: Any) -> None:
    # Given two stripe deliveries and a github one in the DLQ
    queues.send(envelope("evt_1"))
    queues.send(envelope("evt_2"))
    queues.send(envelope("gh_1", source="github", event_type="push"))
    queues.fail_processing()
    # When invoking with events/replay-dry-run.json
    report = replay_app.lambda_handler(event("replay-dry-run"), FakeContext())
    # Then everything is counted and nothing moves
    assert (report["examined"], report["matched"], report["replayed"]) == (3, 3, 0)
    assert report["dry_run"] is True
    assert queues.depth(queues.main_url) == 0
    # When invoking with events/replay-filtered.json (stripe invoice.paid, in May 2024)
    report = replay_app.lambda_handler(event("replay-filtered"), FakeContext())
    # Then the two stripe deliveries move; the github one stays
    assert (report["examined"], report["matched"], report["replayed"]) == (3, 2, 2)
    assert report["remaining"] == 1
    assert len(queues.drain(queues.main_url)) == 2


def test_a_dry_run_over_more_matches_than_it_lists_moves_nothing(
    queues: Queues, replay_app: Any
) -> None:
    # Given more matching DLQ messages than a dry-run report lists (MAX_LISTED, 100)
    count = MAX_LISTED + 25
    for start in range(0, count, 10):
        queues.sqs.send_message_batch(
            QueueUrl=queues.dlq_url,
            Entries=[
                {"Id": str(i), "MessageBody": envelope(f"evt_{i}").to_json()}
                for i in range(start, min(start + 10, count))
            ],
        )
    # When dry-running over all of them
    report = replay_app.lambda_handler({"dry_run": True, "max_messages": 500}, FakeContext())
    # Then every one is counted, the first 100 listed, and not one has moved
    assert (report["examined"], report["matched"], report["replayed"]) == (count, count, 0)
    assert report["complete"] is True
    assert len(report["would_replay"]) == MAX_LISTED
    assert queues.depth(queues.main_url) == 0
    assert queues.visible(queues.dlq_url) == count


def test_handler_rejects_bad_input_with_a_typed_error(queues: Queues, replay_app: Any) -> None:
    queues.send(envelope("evt_1"))
    queues.fail_processing()
    bad = {
        "max_messages": -1,
        "filter": {"received_after": "2024-05-02", "received_before": "2024-05-01"},
    }
    with pytest.raises(InvalidReplayRequestError) as caught:
        replay_app.lambda_handler(bad, FakeContext())
    assert "max_messages" in str(caught.value)
    assert "received_after must be earlier than received_before" in str(caught.value)
    assert queues.visible(queues.dlq_url) == 1  # untouched


def test_handler_stops_before_its_timeout(queues: Queues, replay_app: Any) -> None:
    for i in range(5):
        queues.send(envelope(f"evt_{i}"))
    queues.fail_processing()
    context = FakeContext(remaining_ms=lambda: 9_000)  # under the default 10 s margin
    report = replay_app.lambda_handler({}, context)
    assert report["stopped"] == "time_limit"
    assert report["complete"] is False
    assert report["examined"] == 0
    assert report["remaining"] == 5


def test_handler_cold_start_fails_without_its_settings(
    monkeypatch: pytest.MonkeyPatch, aws: None
) -> None:
    from webhook_pipeline.errors import ConfigurationError

    monkeypatch.delenv("QUEUE_URL", raising=False)
    monkeypatch.delenv("DLQ_URL", raising=False)
    # the error names the environment variables an operator sets, each missing one
    with pytest.raises(ConfigurationError, match="variable 'DLQ_URL': Field required"):
        load_function("replay", {}, monkeypatch)


# ------------------------------------------------------------------------- with the processor


def sqs_event(messages: list[dict[str, Any]]) -> dict[str, Any]:
    """The event the SQS event source mapping would give the processor for these messages."""
    return {
        "Records": [
            {
                "messageId": m["MessageId"],
                "receiptHandle": m["ReceiptHandle"],
                "body": m["Body"],
                "attributes": m.get("Attributes", {"ApproximateReceiveCount": "1"}),
                "messageAttributes": {},
                "md5OfBody": m["MD5OfBody"],
                "eventSource": "aws:sqs",
                "eventSourceARN": "arn:aws:sqs:us-east-1:123456789012:main",
                "awsRegion": "us-east-1",
            }
            for m in messages
        ]
    }


@pytest.fixture
def processor_app(queues: Queues, monkeypatch: pytest.MonkeyPatch) -> Any:
    create_deliveries_table(boto3.client("dynamodb"), "deliveries")
    boto3.client("s3").create_bucket(Bucket="payloads")
    return load_function(
        "processor", {"TABLE_NAME": "deliveries", "PAYLOAD_BUCKET": "payloads"}, monkeypatch
    )


def test_replayed_delivery_is_applied_once_even_when_replayed_twice(
    queues: Queues, processor_app: Any
) -> None:
    from webhook_pipeline.adapters.dynamodb import DynamoDBDeliveryStore

    store = DynamoDBDeliveryStore(boto3.client("dynamodb"), "deliveries")
    original = envelope("evt_1", resource_key="in_1", sequence=100)
    # Given a delivery that exhausted its retries (the processor never got to apply it)
    queues.send(original)
    queues.fail_processing()
    # ... and a second copy of it in the DLQ, as after a replay whose delete did not happen
    queues.sqs.send_message(QueueUrl=queues.dlq_url, MessageBody=original.to_json())
    assert queues.depth(queues.dlq_url) == 2
    # When the DLQ is replayed and the processor consumes the main queue
    report = run(queues, {})
    assert report["replayed"] == 2
    delivered = queues.drain(queues.main_url)
    assert [Envelope.from_json(m["Body"]).gate for m in delivered] == ["replayed", "replayed"]
    first = processor_app.lambda_handler(sqs_event(delivered[:1]), FakeContext())
    second = processor_app.lambda_handler(sqs_event(delivered[1:]), FakeContext())
    # Then both copies are acknowledged, and the delivery is recorded and applied once
    assert first == {"batchItemFailures": []}
    assert second == {"batchItemFailures": []}
    record = store.get_delivery("stripe", "evt_1")
    assert record is not None
    assert record["outcome"] == "applied"
    items = boto3.client("dynamodb").scan(TableName="deliveries")["Items"]
    delivery_items = [i for i in items if i["pk"]["S"].startswith("DELIVERY#")]
    assert len(delivery_items) == 1
    resource = store.get_resource("stripe", "in_1")
    assert resource is not None
    # When the same delivery is replayed yet again later
    queues.sqs.send_message(QueueUrl=queues.dlq_url, MessageBody=original.to_json())
    assert run(queues, {})["replayed"] == 1
    third = processor_app.lambda_handler(sqs_event(queues.drain(queues.main_url)), FakeContext())
    # Then it is still recorded once, unchanged
    assert third == {"batchItemFailures": []}
    assert store.get_delivery("stripe", "evt_1") == record
    assert store.get_resource("stripe", "in_1") == resource
    assert queues.depth(queues.dlq_url) == 0
