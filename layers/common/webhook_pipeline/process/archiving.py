"""After a batch is processed: one archive message per parsed envelope, sent to the archive queue.

Runs after the records are written (the handler calls it with the batch's results), never
before, and changes no outcome: it only returns the message ids whose archive message the
archive queue did not accept, which the handler adds to ``batchItemFailures``. Their redelivery
finds the record (a duplicate) and archives again: at least once into the archive, deduplicated
on read (:func:`webhook_pipeline.archive.record.dedupe`).

An archive message too big for the archive queue (an inline body near the inline threshold with
large headers, once SQS's escaping is applied) carries its body as a claim check instead: the
processor puts the exact bytes under ``bodies/<source>/archive/<body_sha256>`` in the payload
bucket (one key per body: a retry overwrites the same bytes) and the archiver reads them back,
checked against the SHA-256, as it reads any claim check.

Not archived: a message that is not an envelope (nothing to archive), an envelope whose body
could not be loaded as its digest says (``malformed``: a body missing or not matching its
SHA-256 is not the bytes ingest accepted; it goes to the DLQ with its failure note), and a
reprocess envelope (its bytes came from the archive; what it did is in the generation's mark and
the processor's log line).
"""

from __future__ import annotations

import base64
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from typing import Literal, Protocol

from webhook_pipeline.archive.message import ArchiveMessage
from webhook_pipeline.archive.record import format_time
from webhook_pipeline.envelope import BodyPointer, Envelope, claim_check_prefix, utcnow
from webhook_pipeline.errors import PayloadUnavailableError
from webhook_pipeline.observability import logger
from webhook_pipeline.process.model import Message, Outcome, RecordResult

__all__ = ["ArchiveSender", "BodySpill", "archive_batch", "archive_messages", "spill_key"]


class ArchiveSender(Protocol):
    """Where archive messages go
    (:class:`webhook_pipeline.adapters.sqs_archive.SqsArchiveQueue`)."""

    def send(self, bodies: Sequence[str]) -> dict[int, str]:
        """Send each body; return why each one not accepted was not (by index)."""
        ...

    def fits(self, body: str) -> bool:
        """Whether ``body`` alone is within the queue's message size limit."""
        ...


class BodySpill(Protocol):
    """Where a body too big for an archive message goes
    (:class:`webhook_pipeline.adapters.s3.S3PayloadStore`)."""

    def put(self, key: str, body: bytes) -> BodyPointer:
        """Store ``body`` under ``key``; return where it is.

        Raises
        ------
        PayloadUnavailableError
            The store did not accept it.
        """
        ...


def spill_key(envelope: Envelope) -> str:
    """``bodies/<source>/archive/<body_sha256>``: where an archive message's body too big to
    travel inline is put (under the source's claim-check prefix, which the archiver follows)."""
    return f"{claim_check_prefix(envelope.source)}archive/{envelope.body_sha256}"


def _spilled(envelope: Envelope, spill: BodySpill) -> Envelope:
    """``envelope`` with its inline body put in ``spill`` and carried as a claim check.

    Raises
    ------
    PayloadUnavailableError
        The store did not accept the body.
    """
    body = base64.b64decode(envelope.body_b64 or "")  # checked by the processor already
    pointer = spill.put(spill_key(envelope), body)
    return envelope.model_copy(update={"body_b64": None, "body_ref": pointer})


def archive_messages(
    messages: Sequence[Message],
    results: Mapping[str, RecordResult],
    clock: Callable[[], datetime] = utcnow,
) -> list[tuple[str, str]]:
    """``(message_id, archive message JSON)`` of each archived result, in the batch's order.

    Every result with a parsed envelope is archived, whatever its outcome, but ``malformed``
    and reprocess envelopes.
    """
    return [(mid, message.to_json()) for mid, message in _archived(messages, results, clock)]


def _archived(
    messages: Sequence[Message],
    results: Mapping[str, RecordResult],
    clock: Callable[[], datetime],
) -> list[tuple[str, ArchiveMessage]]:
    archived_at = format_time(clock())
    out: list[tuple[str, ArchiveMessage]] = []
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
            recorded_outcome=_recorded_verdict(result),
        )
        out.append((message.message_id, body))
    return out


def _recorded_verdict(result: RecordResult) -> Literal["applied", "stale"] | None:
    """For a duplicate with the recorded copy's bytes (a redelivery, a sender's retry), the
    verdict recorded for the delivery (``applied``, ``stale``): the archive finds the delivery by
    it even when this is its only line. ``None`` for anything else: a copy with other bytes was
    never applied, and one of a provider with volatile fields (``content_sha256`` set) may have
    other raw bytes than the recorded copy (its identity in the archive is another)."""
    recorded = result.recorded_outcome
    if result.outcome is not Outcome.DUPLICATE or result.body_mismatch or recorded is None:
        return None
    if result.envelope is None or result.envelope.content_sha256 is not None:
        return None
    if recorded is Outcome.APPLIED:
        return "applied"
    return "stale" if recorded is Outcome.STALE else None


def _bodies(
    pending: Sequence[tuple[str, ArchiveMessage]], sender: ArchiveSender, spill: BodySpill | None
) -> tuple[list[tuple[str, str]], dict[str, str]]:
    """The JSON of each pending message, an inline body too big for the queue spilled to a
    claim check; and by message id, why one could not be spilled."""
    bodies: list[tuple[str, str]] = []
    failed: dict[str, str] = {}
    for mid, message in pending:
        text = message.to_json()
        env = message.envelope
        if spill is not None and env.body_b64 is not None and not sender.fits(text):
            try:
                text = message.model_copy(update={"envelope": _spilled(env, spill)}).to_json()
            except PayloadUnavailableError as exc:
                failed[mid] = f"archive body not spilled: {exc}"
                continue
        bodies.append((mid, text))
    return bodies, failed


def archive_batch(
    messages: Sequence[Message],
    results: Mapping[str, RecordResult],
    sender: ArchiveSender,
    clock: Callable[[], datetime] = utcnow,
    spill: BodySpill | None = None,
) -> dict[str, str]:
    """Send the batch's archive messages (:func:`archive_messages`); one too big for the queue
    (``sender.fits``) carries its inline body as a claim check put in ``spill``
    (:func:`spill_key`; ``None``: it fails, as any message the queue refuses).

    Returns
    -------
    dict[str, str]
        By message id, why its archive message was not accepted; empty when all were. Never
        raises: a sender that raises fails every message of the batch.
    """
    pending, not_spilled = _bodies(_archived(messages, results, clock), sender, spill)
    if not pending:
        return not_spilled
    try:
        failed = sender.send([body for _, body in pending])
    except Exception as exc:  # the batch's records are written: report, never crash the handler
        logger.warning("archive send raised", extra={"error": type(exc).__name__})
        raised = f"archive send raised {type(exc).__name__}"
        return not_spilled | {mid: raised for mid, _ in pending}
    return not_spilled | {pending[index][0]: reason for index, reason in failed.items()}
