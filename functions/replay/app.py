"""ReplayFunction: move dead-lettered deliveries back to the main queue (operator-invoked).

No event source: an operator invokes it (``sam remote invoke ReplayFunction -e
events/replay-dry-run.json`` or ``webhook-pipeline replay --via-function``). The event is the
replay request (:class:`webhook_pipeline.replay.request.ReplayRequest`)::

    {"max_messages": 100, "dry_run": true, "rate_per_second": 10,
     "filter": {"source": "stripe", "event_type": "invoice.paid",
                "received_after": "2024-05-01T00:00:00Z",
                "received_before": "2024-05-02T00:00:00Z"}}

Every key is optional; ``{}`` replays up to 100 messages of any kind at full speed.

Returns the report ``{examined, matched, replayed, skipped, failed, malformed, delete_failed,
dry_run, remaining, complete, stopped[, would_replay][, error]}`` (see
:class:`webhook_pipeline.replay.report.ReplayReport`). ``complete`` is false and ``stopped`` says
why when the run ended early (``time_limit``: it stopped ``SAFETY_MARGIN_MS`` before the
function's own timeout; invoke again to continue).

Replay from the archive: the event ``{"from_archive": {...}}`` carries an
:class:`webhook_pipeline.replay.archive_request.ArchiveReplayRequest`::

    {"from_archive": {"mode": "redeliver", "start": "2024-05-01T10:00:00Z",
                      "end": "2024-05-01T12:00:00Z", "sources": ["stripe"],
                      "rate_per_second": 50, "job": "restore-0501"}}

and returns its report (:class:`webhook_pipeline.replay.archive_report.ArchiveReplayReport`). The
run checkpoints after every chunk and stops ``SAFETY_MARGIN_MS`` before the function's timeout
with ``status: "incomplete"``: invoke again with the returned ``job`` to go on. It needs
``ARCHIVE_BUCKET`` and ``TABLE_NAME`` (and ``PAYLOAD_BUCKET`` for bodies over
``INLINE_BODY_MAX_BYTES``).

Bad input is not a report: the handler raises :class:`InvalidReplayRequestError`, so the
invocation fails with ``errorType: InvalidReplayRequestError`` and an ``errorMessage`` listing
every problem (``filter.received_after: ...; max_messages: ...``), which ``sam remote invoke``
and the CLI show as is, and nothing is received from the DLQ.

Environment (validated once at cold start; a missing value fails the init):
``QUEUE_URL`` (main queue), ``DLQ_URL`` (dead-letter queue); tuning: ``SAFETY_MARGIN_MS``
(default 10000), ``RECEIVE_WAIT_SECONDS`` (long poll of each DLQ receive, default 1),
``AWS_CONNECT_TIMEOUT_SECONDS`` (2), ``AWS_READ_TIMEOUT_SECONDS`` (30), ``AWS_MAX_ATTEMPTS`` (3).
"""

from __future__ import annotations

from functools import cache
from typing import Any

from aws_lambda_powertools.utilities.typing import LambdaContext
from webhook_pipeline.adapters.clients import aws_client
from webhook_pipeline.adapters.sqs_replay import SqsDeadLetterQueue, SqsReplaySender
from webhook_pipeline.errors import InvalidReplayRequestError
from webhook_pipeline.observability import (
    MetricName,
    capture_lambda_handler,
    count,
    logger,
    metrics,
)
from webhook_pipeline.replay.archive_job import ArchiveReplayTarget, run_archive_replay
from webhook_pipeline.replay.archive_request import ArchiveReplayRequest
from webhook_pipeline.replay.report import MessageResult
from webhook_pipeline.replay.request import ReplayRequest
from webhook_pipeline.replay.run import replay
from webhook_pipeline.settings import ReplaySettings

settings = ReplaySettings.load()


@cache
def sqs_client() -> Any:
    """The SQS client, created once per container with explicit timeouts and retries."""
    return aws_client("sqs", settings)


sqs_client()  # during the init, as Lambda recommends: the handler's timeout does not pay for it


def _log_message(result: MessageResult) -> None:
    envelope = result.envelope
    fields = {
        "message_id": result.message.message_id,
        "outcome": result.outcome,
        "source": envelope.source if envelope else None,
        "delivery_id": envelope.delivery_id if envelope else None,
    }
    if result.outcome in ("failed", "malformed", "delete_failed"):
        logger.warning("replay: message not moved", extra={"reason": result.reason, **fields})
    else:
        logger.debug("replay: message examined", extra=fields)


@logger.inject_lambda_context(log_event=False)
@capture_lambda_handler()
@metrics.log_metrics
def lambda_handler(event: Any, context: LambdaContext) -> dict[str, Any]:
    """Run one replay and return its report (see the module docstring).

    Raises
    ------
    InvalidReplayRequestError
        The event is not a valid replay request; nothing was touched.
    """
    if isinstance(event, dict) and "from_archive" in event:
        return _from_archive(event, context)
    try:
        request = ReplayRequest.parse(event)
    except InvalidReplayRequestError as exc:
        logger.warning("replay: invalid request", error=str(exc))
        raise
    logger.info(
        "replay: start",
        dry_run=request.dry_run,
        max_messages=request.max_messages,
        rate_per_second=request.rate_per_second,
        filter=request.filter.describe(),
    )
    client = sqs_client()
    report = replay(
        request,
        SqsDeadLetterQueue(client, settings.dlq_url, settings.receive_wait_seconds),
        SqsReplaySender(client, settings.queue_url),
        remaining_time_ms=context.get_remaining_time_in_millis,
        safety_margin_ms=settings.safety_margin_ms,
        on_message=_log_message,
    )
    count(MetricName.REPLAYED, report.replayed)
    result = report.to_dict()
    logger.info("replay: done", **{k: v for k, v in result.items() if k != "would_replay"})
    return result


def _from_archive(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    """Run (or resume) a replay from the archive until done or near the timeout."""
    try:
        if set(event) != {"from_archive"}:
            raise InvalidReplayRequestError("from_archive: give no other key beside it")
        if not (settings.archive_bucket and settings.table_name):
            raise InvalidReplayRequestError(
                "replay from the archive needs ARCHIVE_BUCKET and TABLE_NAME in the environment"
            )
        request = ArchiveReplayRequest.parse(event["from_archive"])
    except InvalidReplayRequestError as exc:
        logger.warning("replay: invalid request", error=str(exc))
        raise
    logger.info("replay from archive: start", **request.model_dump(mode="json"))
    target = ArchiveReplayTarget(
        s3=aws_client("s3", settings),
        dynamodb=aws_client("dynamodb", settings),
        sqs=sqs_client(),
        archive_bucket=settings.archive_bucket,
        table=settings.table_name,
        queue_url=settings.queue_url,
        payload_bucket=settings.payload_bucket or None,
        inline_body_max_bytes=settings.inline_body_max_bytes,
    )
    report = run_archive_replay(
        request,
        target,
        remaining_time_ms=context.get_remaining_time_in_millis,
        safety_margin_ms=settings.safety_margin_ms,
    )
    count(MetricName.REPLAYED, report.sent)
    result = report.to_dict()
    logger.info("replay from archive: done", **{k: v for k, v in result.items() if k != "sample"})
    return result
