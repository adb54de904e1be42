"""ProcessorFunction: SQS batch of envelopes -> DynamoDB, with partial batch responses.

The whole batch is processed by :class:`ProcessorService` (groups of one resource in sequence
order, each written with one conditional write when it commits, groups concurrently on a bounded
pool); the handler reports each record's outcome and builds the partial batch response from those
outcomes, so ``batchItemFailures`` lists exactly the ``messageId`` of each record not
acknowledged, in the batch's order (an empty list when all succeeded).

After the batch is written, each parsed envelope's archive message goes to ``ARCHIVE_QUEUE_URL``
(:mod:`webhook_pipeline.process.archiving`); a record whose archive message SQS did not accept is
reported failed too (counted as ``ArchiveSendFailed``), so its redelivery archives it.
"""

from __future__ import annotations

import functools
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta
from typing import Any

from aws_lambda_powertools.utilities.typing import LambdaContext
from webhook_pipeline.adapters.clients import aws_client
from webhook_pipeline.adapters.dynamodb import DynamoDBDeliveryStore
from webhook_pipeline.adapters.s3 import S3PayloadStore
from webhook_pipeline.adapters.sqs_archive import SqsArchiveQueue
from webhook_pipeline.hooks import load_hooks_module, registry
from webhook_pipeline.observability import (
    MetricName,
    capture_lambda_handler,
    count,
    logger,
    metrics,
)
from webhook_pipeline.process.archiving import archive_batch
from webhook_pipeline.process.model import Message, Outcome, RecordResult
from webhook_pipeline.process.service import ProcessorService
from webhook_pipeline.settings import ProcessorSettings

# Cold start: invalid configuration or an unimportable HOOKS_MODULE fails the init loudly.
settings = ProcessorSettings.load()
load_hooks_module(settings.hooks_module)
if registry.has_provider_hooks:
    # Which source is which provider's, from the sources file; imported only then (the sources
    # module brings the provider registry, which a processor without provider hooks never needs).
    from webhook_pipeline.sources import source_providers

    registry.use_sources(
        source_providers(settings.sources_file, catalogue=settings.sources_catalogue)
    )
    if unused := registry.providers_without_source():
        logger.warning("hooks registered for providers no source uses", extra={"providers": unused})

_METRIC = {
    Outcome.APPLIED: MetricName.APPLIED,
    Outcome.DUPLICATE: MetricName.DUPLICATE,
    Outcome.STALE: MetricName.STALE,
    Outcome.RETRY: MetricName.RETRY,
    Outcome.MALFORMED: MetricName.MALFORMED,
    Outcome.BUG: MetricName.PROCESSOR_BUG,
    Outcome.REPROCESSED: MetricName.REPROCESSED,
    Outcome.SKIPPED: MetricName.REPROCESS_SKIPPED,
}


@functools.cache
def dynamodb_client() -> Any:
    """DynamoDB client: created once per container, during the init (timeouts, standard
    retries)."""
    return aws_client("dynamodb", settings)


@functools.cache
def s3_client() -> Any:
    """S3 client: created once per container (timeouts, standard retries)."""
    return aws_client("s3", settings)


@functools.cache
def payloads() -> S3PayloadStore:
    """The payload bucket: claim-check bodies read, and an archive message's body too big for
    the archive queue put (built on the first use: most envelopes carry their body inline)."""
    # ``s3_client`` looked up at the first use, not bound now (tests count what it builds).
    return S3PayloadStore(None, settings.payload_bucket, client_factory=lambda: s3_client())


@functools.cache
def service() -> ProcessorService:
    """The service and its thread pool: built once per container (during the init, below)."""
    return ProcessorService(
        store=DynamoDBDeliveryStore(dynamodb_client(), settings.table_name),
        payloads=payloads(),
        hooks=registry,
        executor=ThreadPoolExecutor(
            max_workers=settings.max_workers, thread_name_prefix="processor"
        ),
        retention=timedelta(days=settings.delivery_retention_days),
        coalesce=True,
    )


@functools.cache
def archive_queue() -> SqsArchiveQueue | None:
    """The archive queue (SQS client built once per container), or ``None`` when
    ``ARCHIVE_QUEUE_URL`` is empty (archiving disabled)."""
    if not settings.archive_queue_url:
        return None
    return SqsArchiveQueue(aws_client("sqs", settings), settings.archive_queue_url)


if archive_queue() is None:
    logger.warning("ARCHIVE_QUEUE_URL is empty: processed deliveries are not archived")


# The DynamoDB client during the init, as Lambda recommends: the init has its own time limit,
# the handler's timeout does not pay for it (the S3 client waits for a claim-checked body).
service()


def _messages(event: dict[str, Any]) -> list[Message]:
    messages = []
    for record in event.get("Records") or []:
        attributes = record.get("attributes") or {}
        receive_count = str(attributes.get("ApproximateReceiveCount") or "1")
        messages.append(
            Message(
                message_id=str(record.get("messageId", "")),
                body=str(record.get("body", "")),
                receive_count=int(receive_count) if receive_count.isdigit() else 1,
            )
        )
    return messages


def _report(result: RecordResult) -> None:
    """One structured log line and one metric per record (on the handler thread)."""
    count(_METRIC[result.outcome])
    if result.body_mismatch:
        count(MetricName.DUPLICATE_BODY_MISMATCH)
    if result.hook == "ran":
        count(MetricName.HOOK_COMPLETED)
    elif result.hook == "failed":
        count(MetricName.HOOK_FAILED)
    env = result.envelope
    keys: dict[str, Any] = {"message_id": result.message_id, "outcome": result.outcome.value}
    if env is not None:
        keys |= {"source": env.source, "delivery_id": env.delivery_id}
        if env.reprocess is not None:
            keys |= {"generation": env.reprocess.generation, "job": env.reprocess.job}
        if env.resource_key is not None:
            keys |= {"resource_key": env.resource_key, "sequence": env.sequence}
    with logger.append_context_keys(**keys):
        message = f"delivery {result.outcome.value}"
        extra = {"reason": result.reason, "hook": result.hook}
        if result.outcome is Outcome.BUG:
            logger.error(message, extra=extra, exc_info=result.error)
        elif result.outcome is Outcome.MALFORMED:
            logger.error(message, extra=extra)
        elif result.outcome is Outcome.RETRY:
            logger.warning(message, extra=extra)
        else:
            logger.info(message, extra=extra)


def _report_not_archived(message_id: str, reason: str) -> None:
    """``ArchiveSendFailed`` and a WARNING: the message is reported failed so its redelivery
    archives it (a duplicate by then, or its retry)."""
    count(MetricName.ARCHIVE_SEND_FAILED)
    logger.warning(
        "archive message not accepted; the message is retried",
        extra={"message_id": message_id, "reason": reason[:200]},
    )


@logger.inject_lambda_context(clear_state=True, log_event=False)  # events carry credentials
@capture_lambda_handler()
@metrics.log_metrics
def lambda_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    """SQS event source mapping entry point.

    Returns
    -------
    dict
        ``{"batchItemFailures": [{"itemIdentifier": <messageId>}, ...]}``; empty list when every
        record was applied, a duplicate or stale (its archive message accepted), reprocessed
        or skipped.
    """
    messages = _messages(event)
    results = service().process_batch(messages) if messages else {}
    # After the records are written, never before; it changes no outcome (docs/archive.md).
    queue = archive_queue()
    not_archived = (
        archive_batch(messages, results, queue, spill=payloads()) if queue and messages else {}
    )
    failures = []
    for message in messages:
        result = results[message.message_id]
        _report(result)
        if message.message_id in not_archived:
            _report_not_archived(message.message_id, not_archived[message.message_id])
        if not result.acknowledged or message.message_id in not_archived:
            failures.append({"itemIdentifier": message.message_id})
    # Never raises on an all-failed batch: the response always has the partial-failure shape.
    return {"batchItemFailures": failures}
