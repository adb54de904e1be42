"""The archive write path in-process: the real ingest, processor and archiver handlers against
moto (an archive queue and an archive bucket next to the ingest's queue and payload bucket), the
archive queue's messages handed to the archiver as its event source mapping would (a message
the archiver reports failed stays on the queue, the others are deleted)."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any

import boto3
import pytest
from webhook_pipeline.archive.query import ArchiveFilter, SearchResult, search
from webhook_pipeline.archive.record import ArchiveRecord, decode_object

from tests.helpers import FakeContext, load_function
from tests.integration.ingest_harness import IngestHarness
from tests.integration.pipeline_harness import Pipeline, build_pipeline

ARCHIVE_BUCKET = "webhook-pipeline-archive"


def sqs_event(messages: list[dict[str, Any]], receive_count: int = 1) -> dict[str, Any]:
    """An SQS event source mapping event of ``messages`` (as ``receive_message`` returned)."""
    return {
        "Records": [
            {
                "messageId": m["MessageId"],
                "receiptHandle": m["ReceiptHandle"],
                "body": m["Body"],
                "attributes": {"ApproximateReceiveCount": str(receive_count)},
                "messageAttributes": {},
                "md5OfBody": hashlib.md5(m["Body"].encode()).hexdigest(),
                "eventSource": "aws:sqs",
                "awsRegion": "us-east-1",
            }
            for m in messages
        ]
    }


@dataclass
class ArchivePipeline:
    pipeline: Pipeline
    archiver: Any
    sqs: Any
    queue_url: str
    s3: Any
    #: The archive messages of the last :meth:`archive` batch, by message id.
    last_batch: dict[str, dict[str, Any]] | None = None

    def delivery_ids(self, message_ids: list[str]) -> list[str]:
        """The delivery ids of archive messages of the last batch."""
        batch = self.last_batch or {}
        return [json.loads(batch[m]["Body"])["envelope"]["delivery_id"] for m in message_ids]

    @property
    def ingest(self) -> IngestHarness:
        return self.pipeline.ingest

    def queued(self) -> list[dict[str, Any]]:
        """Every archive message now visible (received: invisible for 300 s)."""
        found: list[dict[str, Any]] = []
        while batch := self.sqs.receive_message(
            QueueUrl=self.queue_url, MaxNumberOfMessages=10, VisibilityTimeout=300
        ).get("Messages", []):
            found.extend(batch)
        return found

    def archive(self, *, delete: bool = True) -> list[str]:
        """Hand every visible archive message to the archiver in one batch; delete those it did
        not report failed (``delete=False``: a crash before the delete); return the failed
        ids."""
        messages = self.queued()
        if not messages:
            return []
        self.last_batch = {m["MessageId"]: m for m in messages}
        response = self.archiver.handler(sqs_event(messages), FakeContext("ArchiverFunction"))
        failed = [f["itemIdentifier"] for f in response["batchItemFailures"]]
        for m in messages:
            if delete and m["MessageId"] not in failed:
                self.sqs.delete_message(QueueUrl=self.queue_url, ReceiptHandle=m["ReceiptHandle"])
            else:  # back on the queue now, as after its visibility timeout
                self.sqs.change_message_visibility(
                    QueueUrl=self.queue_url, ReceiptHandle=m["ReceiptHandle"], VisibilityTimeout=0
                )
        return failed

    def search(self, **fields: Any) -> SearchResult:
        return search(self.s3, ARCHIVE_BUCKET, ArchiveFilter(**fields))

    def object_keys(self) -> list[str]:
        listed = self.s3.list_objects_v2(Bucket=ARCHIVE_BUCKET).get("Contents", [])
        return sorted(item["Key"] for item in listed)

    def lines(self) -> list[ArchiveRecord]:
        """Every archived line, not deduplicated."""
        found: list[ArchiveRecord] = []
        for key in self.object_keys():
            data = self.s3.get_object(Bucket=ARCHIVE_BUCKET, Key=key)["Body"].read()
            records, problems = decode_object(key, data)
            assert problems == []
            found.extend(records)
        return found

    def raw_objects(self) -> bytes:
        """Every object's decompressed bytes, concatenated (to look for a leaked value)."""
        import gzip

        return b"".join(
            gzip.decompress(self.s3.get_object(Bucket=ARCHIVE_BUCKET, Key=k)["Body"].read())
            for k in self.object_keys()
        )


def build_archive_pipeline(
    ingest: IngestHarness, monkeypatch: pytest.MonkeyPatch
) -> ArchivePipeline:
    """The processor with ``ARCHIVE_QUEUE_URL`` and the archiver over a new archive bucket."""
    sqs, s3 = boto3.client("sqs"), boto3.client("s3")
    queue_url = sqs.create_queue(QueueName="archive")["QueueUrl"]
    s3.create_bucket(Bucket=ARCHIVE_BUCKET)
    pipeline = build_pipeline(ingest, monkeypatch, ARCHIVE_QUEUE_URL=queue_url)
    env = {"ARCHIVE_BUCKET": ARCHIVE_BUCKET, "PAYLOAD_BUCKET": ingest.bucket, "MAX_WORKERS": "2"}
    archiver = load_function("archiver", env, monkeypatch)
    return ArchivePipeline(pipeline, archiver, sqs, queue_url, s3)
