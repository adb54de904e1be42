"""ArchiverFunction: SQS batch of archive messages -> gzip JSON Lines objects in the archive bucket.

The archive queue's event source mapping hands a large batch (up to thousands of messages over a
batching window); :class:`~webhook_pipeline.archive.writer.ArchiveWriter` writes one object per
(source, hour of receipt) with every record's exact body inline (claim-check bodies read from the
payload bucket). The response lists in ``batchItemFailures`` exactly the messages not archived:
one whose body is missing or does not match its SHA-256, one that is not an archive message
(both retried, then the ArchiveDLQ), and the messages of a group whose ``PutObject`` failed.

Environment (validated once at cold start; a missing value fails the init): ``ARCHIVE_BUCKET``,
``PAYLOAD_BUCKET``; tuning: ``MAX_WORKERS`` (8), ``AWS_CONNECT_TIMEOUT_SECONDS`` (2),
``AWS_READ_TIMEOUT_SECONDS`` (5), ``AWS_MAX_ATTEMPTS`` (3).
"""

from __future__ import annotations

import functools
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from aws_lambda_powertools.utilities.typing import LambdaContext
from webhook_pipeline.adapters.clients import aws_client
from webhook_pipeline.adapters.s3 import S3PayloadStore
from webhook_pipeline.archive.writer import ArchiveWriter, QueuedMessage
from webhook_pipeline.observability import (
    MetricName,
    capture_lambda_handler,
    count,
    logger,
    metrics,
)
from webhook_pipeline.settings import ArchiverSettings

settings = ArchiverSettings.load()


@functools.cache
def s3_client() -> Any:
    """The S3 client (both buckets), created once per container (timeouts, standard retries)."""
    return aws_client("s3", settings)


@functools.cache
def writer() -> ArchiveWriter:
    """The writer and its thread pool: built once per container (during the init, below)."""
    return ArchiveWriter(
        s3_client(),
        settings.archive_bucket,
        S3PayloadStore(s3_client(), settings.payload_bucket),
        executor=ThreadPoolExecutor(
            max_workers=settings.max_workers, thread_name_prefix="archiver"
        ),
    )


writer()


@logger.inject_lambda_context(clear_state=True, log_event=False)  # events carry bodies
@capture_lambda_handler()
@metrics.log_metrics
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    """SQS event source mapping entry point.

    Returns
    -------
    dict
        ``{"batchItemFailures": [{"itemIdentifier": <messageId>}, ...]}``, in the batch's order;
        an empty list when every message was archived.
    """
    messages = [
        QueuedMessage(str(r.get("messageId", "")), str(r.get("body", "")))
        for r in event.get("Records") or []
    ]
    report = writer().write_batch(messages)
    count(MetricName.ARCHIVED, report.records)
    put_failed = sum(1 for reason in report.failed.values() if reason.startswith("archive put"))
    if put_failed:
        count(MetricName.ARCHIVE_WRITE_FAILED, put_failed)
    if len(report.failed) > put_failed:
        count(MetricName.ARCHIVE_BODY_FAILED, len(report.failed) - put_failed)
    logger.info(
        "archive batch written",
        extra={
            "records": report.records,
            "objects": len(report.keys),
            "failed": len(report.failed),
        },
    )
    return {
        "batchItemFailures": [
            {"itemIdentifier": m.message_id} for m in messages if m.message_id in report.failed
        ]
    }
