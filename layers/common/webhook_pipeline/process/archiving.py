"""After a batch is processed: one archive message per parsed envelope, sent to the archive queue.

Runs after the records are written (the handler calls it with the batch's results), never
before, and changes no outcome: it only returns the message ids whose archive message the
archive queue did not accept, which the handler adds to ``batchItemFailures``. Their redelivery
finds the record (a duplicate) and archives again: at least once into the archive, deduplicated
on read (:func:`webhook_pipeline.archive.record.dedupe`).

Not archived: a message that is not an envelope (nothing to archive), an envelope whose body
could not be loaded as its digest says (``malformed``: a body missing or not matching its
SHA-256 is not the bytes ingest accepted; it goes to the DLQ with its failure note), and a
reprocess envelope (its bytes came from the archive; what it did is in the generation's mark and
the processor's log line).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from typing import Protocol

from webhook_pipeline.archive.message import ArchiveMessage
from webhook_pipeline.archive.record import format_time
from webhook_pipeline.envelope import utcnow
from webhook_pipeline.observability import logger
from webhook_pipeline.process.model import Message, Outcome, RecordResult

__all__ = ["ArchiveSender", "archive_batch", "archive_messages"]


class ArchiveSender(Protocol):
    """Where archive messages go
    (:class:`webhook_pipeline.adapters.sqs_archive.SqsArchiveQueue`)."""

    def send(self, bodies: Sequence[str]) -> dict[int, str]:
        """Send each body; return why each one not accepted was not (by index)."""
        ...


def archive_messages(
    messages: Sequence[Message],
    results: Mapping[str, RecordResult],
    clock: Callable[[], datetime] = utcnow,
) -> list[tuple[str, str]]:
    """``(message_id, archive message JSON)`` of each archived result, in the batch's order.

    Every result with a parsed envelope is archived, whatever its outcome, but ``malformed``
    and reprocess envelopes.
    """
    archived_at = format_time(clock())
    out: list[tuple[str, str]] = []
    for message in messages:
        result = results.get(message.message_id)
        if result is None or result.envelope is None or result.outcome is Outcome.MALFORMED:
            continue
        if result.envelope.reprocess is not None:
            continue
        body = ArchiveMessage(
            envelope=result.envelope,
            outcome=result.outcome.value,
            reason=result.reason[:1000] if result.reason else None,
            message_id=message.message_id,
            receive_count=max(1, message.receive_count),
            archived_at=archived_at,
        )
        out.append((message.message_id, body.to_json()))
    return out


def archive_batch(
    messages: Sequence[Message],
    results: Mapping[str, RecordResult],
    sender: ArchiveSender,
    clock: Callable[[], datetime] = utcnow,
) -> dict[str, str]:
    """Send the batch's archive messages (:func:`archive_messages`).

    Returns
    -------
    dict[str, str]
        By message id, why its archive message was not accepted; empty when all were. Never
        raises: a sender that raises fails every message of the batch.
    """
    pending = archive_messages(messages, results, clock)
    if not pending:
        return {}
    try:
        failed = sender.send([body for _, body in pending])
    except Exception as exc:  # the batch's records are written: report, never crash the handler
        logger.warning("archive send raised", extra={"error": type(exc).__name__})
        return {mid: f"archive send raised {type(exc).__name__}" for mid, _ in pending}
    return {pending[index][0]: reason for index, reason in failed.items()}
