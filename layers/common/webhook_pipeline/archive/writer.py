"""The archiver's use case: a batch of archive messages -> one gzip JSON Lines object per (source,
hour of receipt) in the archive bucket.

Each message (:class:`~webhook_pipeline.archive.message.ArchiveMessage`) becomes one
:class:`~webhook_pipeline.archive.record.ArchiveRecord`: the envelope's metadata, its headers
and signed headers redacted (:func:`webhook_pipeline.redaction.redact_headers`), and the exact
body bytes inline, read from the envelope or, for a claim check, from the payload bucket (only
under ``bodies/<source>/``, as the processor reads them) and checked against ``body_sha256``
(:func:`webhook_pipeline.process.bodies.load_body`). Records are grouped by (source,
:func:`~webhook_pipeline.archive.record.hour_of` ``received_at``) and each group is written with
one ``PutObject`` under :func:`~webhook_pipeline.archive.record.object_key` (a new random key:
two writers never overwrite each other).

Memory is bounded whatever the batch: the messages are taken in slices whose bodies (the
envelopes' ``body_size``) add up to at most ``slice_body_bytes`` (:data:`SLICE_BODY_BYTES`; a
body larger than that is a slice of its own), each slice's bodies read, written and released
before the next. Without it, a batch of a thousand claim-check bodies of 1 MiB would hold a
gigabyte and more at once: the function would run out of memory on every receive, and the whole
batch, small deliveries included, would end in the ArchiveDLQ. A slice writes its own objects
(one per source and hour present in it).

Failures are per message, never per batch: a message that is not an archive message, or whose
body is missing or does not match its SHA-256, fails alone (retried, then the ArchiveDLQ; its id
is logged, never its body); a group whose ``PutObject`` failed fails its messages only. A crash
after a ``PutObject`` and before the queue deletes the messages writes them again on the retry:
readers deduplicate (:func:`~webhook_pipeline.archive.record.dedupe`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import Executor
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING

from botocore.exceptions import BotoCoreError, ClientError

from webhook_pipeline.archive.message import ArchiveMessage
from webhook_pipeline.archive.record import (
    ArchiveRecord,
    encode_object,
    format_time,
    hour_of,
    object_key,
)
from webhook_pipeline.envelope import utcnow
from webhook_pipeline.errors import MalformedEnvelopeError, TransientError
from webhook_pipeline.observability import logger
from webhook_pipeline.process.bodies import load_body
from webhook_pipeline.process.ports import PayloadReader
from webhook_pipeline.redaction import redact_headers

if TYPE_CHECKING:
    from mypy_boto3_s3 import S3Client

__all__ = ["SLICE_BODY_BYTES", "ArchiveWriter", "QueuedMessage", "WriteReport", "to_record"]

#: Body bytes one slice of a batch reads and holds at most (a larger body is a slice alone).
SLICE_BODY_BYTES = 32 * 1024 * 1024


@dataclass(frozen=True)
class QueuedMessage:
    """One SQS record of the archive queue: its ``messageId`` and body."""

    message_id: str
    body: str


@dataclass
class WriteReport:
    """What one batch did.

    Attributes
    ----------
    failed : dict[str, str]
        By SQS message id, why the message was not archived (no body content).
    keys : list[str]
        The object keys written.
    records : int
        The records in those objects.
    """

    failed: dict[str, str] = field(default_factory=dict)
    keys: list[str] = field(default_factory=list)
    records: int = 0


def to_record(message: ArchiveMessage, body: bytes) -> ArchiveRecord:
    """The archive record of ``message`` with its checked ``body`` bytes inline, headers
    redacted."""
    env = message.envelope
    text = ArchiveRecord.body_fields(body)
    return ArchiveRecord(
        source=env.source,
        provider=env.provider,
        delivery_id=env.delivery_id,
        event_type=env.event_type,
        resource_key=env.resource_key,
        sequence=env.sequence,
        received_at=format_time(env.received_at),
        verified_with=env.verified_with,
        body_sha256=env.body_sha256,
        body_size=env.body_size,
        content_sha256=env.content_sha256,
        headers=redact_headers(env.headers),
        signed_headers=redact_headers(env.signed_headers),
        outcome=message.outcome,
        recorded_outcome=message.recorded_outcome,
        reason=message.reason,
        archived_at=message.archived_at,
        message_id=message.message_id,
        receive_count=message.receive_count,
        gate=env.gate,
        replay_count=env.replay_count,
        batch_index=env.batch_index,
        batch_count=env.batch_count,
        body=text.get("body"),
        body_base64=text.get("body_base64"),
    )


class ArchiveWriter:
    """Writes batches of archive messages to the archive bucket.

    Parameters
    ----------
    s3 : S3Client
        Writes the objects.
    bucket : str
        The archive bucket (``ARCHIVE_BUCKET``).
    payloads : PayloadReader
        Reads claim-check bodies (the payload bucket only).
    executor : Executor | None
        Runs the body reads and the PUTs of one batch concurrently; ``None``: one after the
        other.
    clock : Callable[[], datetime]
        The current UTC time (the objects' key stamps).
    slice_body_bytes : int
        The body bytes one slice holds at most (:data:`SLICE_BODY_BYTES`).
    """

    def __init__(
        self,
        s3: S3Client,
        bucket: str,
        payloads: PayloadReader,
        *,
        executor: Executor | None = None,
        clock: Callable[[], datetime] = utcnow,
        slice_body_bytes: int = SLICE_BODY_BYTES,
    ) -> None:
        self._s3 = s3
        self._bucket = bucket
        self._payloads = payloads
        self._executor = executor
        self._clock = clock
        self._slice_body_bytes = slice_body_bytes

    def _map[T, R](self, fn: Callable[[T], R], items: Iterable[T]) -> list[R]:
        if self._executor is None:
            return [fn(item) for item in items]
        return list(self._executor.map(fn, items))

    def write_batch(self, messages: Sequence[QueuedMessage]) -> WriteReport:
        """Archive ``messages``: one object per (source, hour of receipt) per slice (see the
        module docstring: most batches are one slice).

        Returns
        -------
        WriteReport
            The failed message ids (a message not archived, the messages of a group whose PUT
            failed), the keys written and the number of records. Never raises for one message's
            or one group's failure.
        """
        report = WriteReport()
        for part in self._slices(messages):
            self._write_slice(part, report)
        return report

    def _slices(self, messages: Sequence[QueuedMessage]) -> Iterator[list[QueuedMessage]]:
        """``messages`` in order, in slices of at most ``slice_body_bytes`` of bodies."""
        part: list[QueuedMessage] = []
        size = 0
        for message in messages:
            nbytes = _body_size(message)
            if part and size + nbytes > self._slice_body_bytes:
                yield part
                part, size = [], 0
            part.append(message)
            size += nbytes
        if part:
            yield part

    def _write_slice(self, messages: Sequence[QueuedMessage], report: WriteReport) -> None:
        """Build and write one slice's objects, adding to ``report``."""
        built = self._map(self._build, messages)
        groups: dict[tuple[str, str], list[tuple[str, ArchiveRecord]]] = {}
        for message, outcome in zip(messages, built, strict=True):
            if isinstance(outcome, str):
                report.failed[message.message_id] = outcome
                continue
            group = (outcome.source, hour_of(outcome.received))
            groups.setdefault(group, []).append((message.message_id, outcome))
        for put in self._map(self._put, groups.items()):
            if put.error is None:
                report.records += len(put.message_ids)
                report.keys.append(put.key)
                continue
            logger.warning(
                "archive object not written; its messages are retried",
                extra={"source": put.source, "messages": len(put.message_ids), "error": put.error},
            )
            report.failed.update(
                (mid, f"archive put failed: {put.error}") for mid in put.message_ids
            )

    def _build(self, message: QueuedMessage) -> ArchiveRecord | str:
        """The record of one message, or why it cannot be archived (its id is logged)."""
        try:
            parsed = ArchiveMessage.from_json(message.body)
            record = to_record(parsed, load_body(parsed.envelope, self._payloads))
        except (MalformedEnvelopeError, TransientError, ValueError) as exc:
            reason = str(exc)[:300]
            logger.warning(
                "archive message not archived; retried, then the ArchiveDLQ",
                extra={"message_id": message.message_id, "reason": reason},
            )
            return reason
        return record

    def _put(self, item: tuple[tuple[str, str], list[tuple[str, ArchiveRecord]]]) -> _Put:
        """Write one group's object (its error code when S3 refused or failed)."""
        (source, hour), members = item
        put = _Put(source, object_key(source, hour, self._clock()), [m for m, _ in members])
        try:
            self._s3.put_object(
                Bucket=self._bucket,
                Key=put.key,
                Body=encode_object(record for _, record in members),
                ContentType="application/gzip",
            )
        except ClientError as exc:
            put.error = str(exc.response.get("Error", {}).get("Code", "Unknown"))
        except BotoCoreError as exc:
            put.error = type(exc).__name__
        return put


def _body_size(message: QueuedMessage) -> int:
    """The body bytes ``message`` will hold once built: its envelope's ``body_size`` (0 for
    what is not an archive message: it fails without reading anything)."""
    try:
        return ArchiveMessage.from_json(message.body).envelope.body_size
    except MalformedEnvelopeError:
        return 0


@dataclass
class _Put:
    source: str
    key: str
    message_ids: list[str]
    error: str | None = None
