"""The archiver's writer on its own: two batches written at the same instant (two invocations)
land in two objects, never one overwriting the other."""

from __future__ import annotations

from datetime import UTC, datetime

import boto3
from webhook_pipeline.adapters.s3 import S3PayloadStore
from webhook_pipeline.archive.message import ArchiveMessage
from webhook_pipeline.archive.writer import ArchiveWriter, QueuedMessage
from webhook_pipeline.envelope import Envelope

from tests.helpers import envelope_json

NOW = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)


def message(delivery_id: str) -> QueuedMessage:
    body = ArchiveMessage(
        envelope=Envelope.from_json(envelope_json(delivery_id)),
        outcome="applied",
        message_id=f"m-{delivery_id}",
        archived_at="2026-03-01T12:00:00.000000Z",
    ).to_json()
    return QueuedMessage(f"q-{delivery_id}", body)


def test_two_batches_at_one_instant_write_two_objects(aws: None) -> None:
    s3 = boto3.client("s3")
    for bucket in ("archive", "payloads"):
        s3.create_bucket(Bucket=bucket)
    writer = ArchiveWriter(s3, "archive", S3PayloadStore(s3, "payloads"), clock=lambda: NOW)
    first, second = writer.write_batch([message("a")]), writer.write_batch([message("b")])
    assert (first.failed, second.failed) == ({}, {})
    listed = s3.list_objects_v2(Bucket="archive")["Contents"]
    assert len(listed) == 2
    assert first.keys[0].startswith("archive/source=stripe/hour=2026-01-15-09/20260301T120000")
    assert (first.records, second.records) == (1, 1)
