"""The archiver's memory is bounded whatever the batch: claim-check bodies are read, written and
released slice by slice (at most ``slice_body_bytes`` at once), never the whole batch's at once
(a thousand bodies of 1 MiB would exhaust the function on every receive and send the whole
batch, small deliveries included, to the ArchiveDLQ)."""

from __future__ import annotations

import hashlib
from datetime import UTC, datetime
from typing import Any

import boto3
from webhook_pipeline.adapters.s3 import S3PayloadStore
from webhook_pipeline.archive.message import ArchiveMessage
from webhook_pipeline.archive.record import decode_object
from webhook_pipeline.archive.writer import ArchiveWriter, QueuedMessage
from webhook_pipeline.envelope import BodyPointer, Envelope

from tests.helpers import envelope_json

NOW = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
BODY = 1_000


class Held:
    """The payload store, counting the body bytes read since the last ``PutObject``; the S3
    client's ``put_object`` notes that count (the bytes a slice held when it wrote)."""

    def __init__(self, s3: Any) -> None:
        self.store, self.s3 = S3PayloadStore(s3, "payloads"), s3
        self.since_put, self.at_puts = 0, []

    def get(self, pointer: BodyPointer) -> bytes:
        data = self.store.get(pointer)
        self.since_put += len(data)
        return data

    def put_object(self, **kwargs: Any) -> Any:
        self.at_puts.append(self.since_put)
        self.since_put = 0
        return self.s3.put_object(**kwargs)


def claim_checked(n: int, s3: Any, size: int = BODY) -> QueuedMessage:
    raw = bytes([65 + n % 26]) * size
    key = f"bodies/stripe/{n:032x}/t"
    s3.put_object(Bucket="payloads", Key=key, Body=raw)
    envelope = envelope_json(
        f"evt_{n}",
        resource=f"cus_{n}",
        body_b64=None,
        body_ref={"bucket": "payloads", "key": key},
        body_size=len(raw),
        body_sha256=hashlib.sha256(raw).hexdigest(),
    )
    body = ArchiveMessage(
        envelope=Envelope.from_json(envelope),
        outcome="applied",
        message_id=f"m-{n}",
        archived_at="2026-03-01T12:00:00.000000Z",
    ).to_json()
    return QueuedMessage(f"q-{n}", body)


def test_a_batch_is_read_and_written_slice_by_slice(aws: None) -> None:
    s3 = boto3.client("s3")
    for bucket in ("archive", "payloads"):
        s3.create_bucket(Bucket=bucket)
    held = Held(s3)
    # A batch of 10 claim-checked bodies of 1,000 bytes, one bigger than a slice, a message that
    # is not an archive message; slices of 2,500 bytes
    messages = [claim_checked(n, s3) for n in range(10)]
    messages.insert(4, claim_checked(99, s3, size=4_000))
    messages.insert(7, QueuedMessage("q-bad", '{"not": "an archive message"}'))
    writer = ArchiveWriter(
        held,  # type: ignore[arg-type]
        "archive",
        held,
        clock=lambda: NOW,
        slice_body_bytes=2_500,
    )
    report = writer.write_batch(messages)
    # Then no slice held more than 2,500 bytes of bodies (but the one bigger body alone)
    assert report.failed.keys() == {"q-bad"}
    assert held.at_puts == [2_000, 2_000, 4_000, 2_000, 2_000, 2_000]
    assert report.records == 11 and len(report.keys) == len(held.at_puts)
    # And every delivery is archived once, with its exact bytes
    found = []
    for key in report.keys:
        records, problems = decode_object(
            key, s3.get_object(Bucket="archive", Key=key)["Body"].read()
        )
        assert problems == []
        found.extend(records)
    assert sorted(r.delivery_id for r in found) == sorted(
        [f"evt_{n}" for n in range(10)] + ["evt_99"]
    )
    assert {r.delivery_id: len(r.body_bytes()) for r in found}["evt_99"] == 4_000
