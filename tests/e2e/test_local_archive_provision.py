"""The local stack provisions the archive from template.yaml: bucket, archive queue and its
dead-letter queue with the redrive, the archiver's SQS event source (a poller gathers batches of
more than 10 within the window), the functions' archive variables and the archive outputs; Glue
and Athena are not emulated. Against in-process moto; the archiver's code is not run here.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import boto3
import pytest
from webhook_pipeline_ops.local.options import LOCAL_PARAMETER_DEFAULTS, local_parameters
from webhook_pipeline_ops.local.poller import SqsPoller
from webhook_pipeline_ops.local.provision import provision
from webhook_pipeline_ops.local.resources import FunctionSpec

from tests.conftest import REGION, ROOT

pytestmark = pytest.mark.e2e


class _Clients:
    def __getattr__(self, service: str) -> Any:
        return boto3.client(service, region_name=REGION)


class _Recording:
    def __init__(self) -> None:
        self.events: list[dict[str, Any]] = []
        self.spec = FunctionSpec("Fake", "fake", Path("."), "app.h", 3, 128, {}, [], [], [])

    def invoke(self, event: dict[str, Any], deadline: float | None = None) -> Any:
        self.events.append(event)
        return {"batchItemFailures": []}


def test_archive_resources_are_provisioned_and_the_archiver_gets_its_event_source(
    aws: None,
) -> None:
    # Given the repository's template with the local stack's parameters
    parameters = local_parameters({"MaxReceiveCount": "4"}, "http://127.0.0.1:3000")
    stack = provision(
        ROOT / "template.yaml", clients=_Clients(), region=REGION, parameter_overrides=parameters
    )
    # Then the archive queue redrives to its own dead-letter queue after MaxReceiveCount
    queue, dlq = stack.queues["ArchiveQueue"], stack.queues["ArchiveDeadLetterQueue"]
    assert queue.visibility_timeout == 1020 and queue.max_receive_count == 4
    assert json.loads(queue.attributes["RedrivePolicy"])["deadLetterTargetArn"] == dlq.arn
    assert dlq.arn != stack.queues["DeadLetterQueue"].arn
    assert dlq.attributes["MessageRetentionPeriod"] == "1209600"
    # And the archive bucket exists, apart from the payload bucket
    bucket = stack.buckets["ArchiveBucket"]
    assert bucket != stack.buckets["PayloadBucket"]
    boto3.client("s3", region_name=REGION).head_bucket(Bucket=bucket)
    # And the archiver consumes the archive queue in large batches, its window capped locally
    archiver = stack.functions["ArchiverFunction"]
    (event,) = archiver.sqs_events
    assert event.queue_arn == queue.arn and event.report_batch_item_failures
    window = int(LOCAL_PARAMETER_DEFAULTS["ArchiverBatchingWindowSeconds"])
    assert (event.batch_size, event.maximum_batching_window_seconds) == (1000, window)
    assert archiver.handler == "app.handler"
    assert archiver.code_dir == (ROOT / "functions" / "archiver").resolve()
    assert archiver.environment["ARCHIVE_BUCKET"] == bucket
    assert archiver.environment["PAYLOAD_BUCKET"] == stack.buckets["PayloadBucket"]
    assert stack.functions["ProcessorFunction"].environment["ARCHIVE_QUEUE_URL"] == queue.url
    assert stack.functions["ReplayFunction"].environment["ARCHIVE_BUCKET"] == bucket
    # And the outputs name the archive as the deployed stack's do; Glue and Athena are skipped
    assert stack.outputs["ArchiveBucketName"] == bucket
    assert stack.outputs["ArchiveQueueUrl"] == queue.url
    assert stack.outputs["ArchiveDeadLetterQueueUrl"] == dlq.url
    for skipped in ("ArchiveDatabase", "ArchiveTable", "ArchiveWorkGroup"):
        assert skipped in stack.skipped
        assert f"{skipped}Name" not in stack.outputs
    assert "ArchiveWriteFailuresAlarm" not in stack.skipped


def test_a_given_window_wins_over_the_local_default() -> None:
    given = {"ArchiverBatchingWindowSeconds": "60", "PublicBaseUrl": "https://hooks.example"}
    assert local_parameters(given, "http://127.0.0.1:3000") == given
    assert local_parameters({}, "http://g")["PublicBaseUrl"] == "http://g"


def test_the_archiver_poller_gathers_more_than_one_receive_into_a_batch(aws: None) -> None:
    stack = provision(
        ROOT / "template.yaml",
        clients=_Clients(),
        region=REGION,
        parameter_overrides=local_parameters({}, "http://127.0.0.1:3000"),
    )
    queue = stack.queues["ArchiveQueue"]
    (source,) = stack.functions["ArchiverFunction"].sqs_events
    sqs = boto3.client("sqs", region_name=REGION)
    for start in range(0, 25, 10):
        sqs.send_message_batch(
            QueueUrl=queue.url,
            Entries=[
                {"Id": str(i), "MessageBody": f"m{i}"} for i in range(start, min(25, start + 10))
            ],
        )
    fn = _Recording()
    poller = SqsPoller(sqs, queue, source, fn, REGION, poll_wait_seconds=0)  # type: ignore[arg-type]
    # 25 messages, at most 10 per receive: one batch of all 25 within the window
    poller.process(poller.receive_batch())
    (event,) = fn.events
    assert sorted(r["body"] for r in event["Records"]) == sorted(f"m{i}" for i in range(25))
    assert poller.stats["deleted"] == 25
