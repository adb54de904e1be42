"""Archive fixtures of the replay-from-archive tests and benchmark: archived deliveries written
with :func:`webhook_pipeline.archive.record.encode_object`, the deliveries table, the queues."""

from __future__ import annotations

import base64
import json
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from webhook_pipeline.adapters.dynamodb_items import delivery_key
from webhook_pipeline.archive.record import (
    ArchiveRecord,
    encode_object,
    format_time,
    hour_of,
    object_key,
)
from webhook_pipeline.envelope import Envelope, sha256_hex

from tests.helpers import create_deliveries_table

ARCHIVE_BUCKET = "archive-bucket-test"
PAYLOAD_BUCKET = "payload-bucket-test"
TABLE = "deliveries-test"
WINDOW_START = datetime(2026, 11, 30, 10, 0, tzinfo=UTC)
WINDOW_END = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)


def body_of(source: str, delivery_id: str, size: int = 0) -> bytes:
    """A JSON body naming the delivery, padded to at least ``size`` bytes."""
    data = json.dumps({"id": delivery_id, "source": source, "pad": ""}).encode()
    if size > len(data):
        data = json.dumps({"id": delivery_id, "source": source, "pad": "x" * (size - len(data))})
        return data.encode()
    return data


def record(
    delivery_id: str,
    minute: int,
    *,
    source: str = "stripe",
    outcome: str = "applied",
    body: bytes | None = None,
    archived_offset: int = 1,
    **extra: Any,
) -> ArchiveRecord:
    """An archived delivery received ``minute`` minutes after :data:`WINDOW_START`."""
    data = body if body is not None else body_of(source, delivery_id)
    received = WINDOW_START + timedelta(minutes=minute)
    return ArchiveRecord(
        source=source,
        provider=source,
        delivery_id=delivery_id,
        event_type="invoice.paid",
        received_at=format_time(received),
        body_sha256=sha256_hex(data),
        body_size=len(data),
        headers={"content-type": "application/json"},
        outcome=outcome,
        archived_at=format_time(received + timedelta(seconds=archived_offset)),
        message_id=f"m-{delivery_id}-{archived_offset}",
        **ArchiveRecord.body_fields(data),
        **extra,
    )


def put_archive(s3: Any, records: Iterable[ArchiveRecord], bucket: str = ARCHIVE_BUCKET) -> None:
    """Write ``records`` as one object per (source, hour) of receipt."""
    groups: dict[tuple[str, str], list[ArchiveRecord]] = defaultdict(list)
    for item in records:
        groups[(item.source, hour_of(item.received))].append(item)
    for (source, hour), items in groups.items():
        key = object_key(source, hour, datetime.now(UTC))
        s3.put_object(Bucket=bucket, Key=key, Body=encode_object(items))


def put_raw_object(s3: Any, source: str, minute: int, data: bytes) -> str:
    """An object of ``source``'s partition holding ``data`` as is; returns its key."""
    key = object_key(source, hour_of(WINDOW_START + timedelta(minutes=minute)), datetime.now(UTC))
    s3.put_object(Bucket=ARCHIVE_BUCKET, Key=key, Body=data)
    return key


def put_delivery_record(dynamodb: Any, source: str, delivery_id: str, outcome: str) -> None:
    """A delivery record (only what the replay reads of it)."""
    dynamodb.put_item(
        TableName=TABLE,
        Item={
            **delivery_key(source, delivery_id),
            "source": {"S": source},
            "delivery_id": {"S": delivery_id},
            "outcome": {"S": outcome},
        },
    )


@dataclass
class ArchiveStack:
    """Clients and resources of one test (in-process moto or a moto server)."""

    s3: Any
    dynamodb: Any
    sqs: Any
    queue_url: str

    def drain(self) -> list[Envelope]:
        """Every message of the main queue (received and deleted), as envelopes."""
        out: list[Envelope] = []
        while True:
            got = self.sqs.receive_message(
                QueueUrl=self.queue_url, MaxNumberOfMessages=10, VisibilityTimeout=300
            ).get("Messages", [])
            if not got:
                return out
            for message in got:
                out.append(Envelope.from_json(message["Body"]))
                self.sqs.delete_message(
                    QueueUrl=self.queue_url, ReceiptHandle=message["ReceiptHandle"]
                )


def make_stack(clients: dict[str, Any], queue_name: str = "main-queue-test") -> ArchiveStack:
    """Create the buckets, the table and the main queue with ``clients`` (s3, dynamodb, sqs)."""
    s3, dynamodb, sqs = clients["s3"], clients["dynamodb"], clients["sqs"]
    s3.create_bucket(Bucket=ARCHIVE_BUCKET)
    s3.create_bucket(Bucket=PAYLOAD_BUCKET)
    create_deliveries_table(dynamodb, TABLE)
    url = sqs.create_queue(QueueName=queue_name)["QueueUrl"]
    return ArchiveStack(s3=s3, dynamodb=dynamodb, sqs=sqs, queue_url=url)


def body_bytes(envelope: Envelope, s3: Any) -> bytes:
    """The envelope's body: inline, or read from its claim check."""
    if envelope.body_b64 is not None:
        return base64.b64decode(envelope.body_b64)
    assert envelope.body_ref is not None
    ref = envelope.body_ref
    data: bytes = s3.get_object(Bucket=ref.bucket, Key=ref.key)["Body"].read()
    return data
