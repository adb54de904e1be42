"""What one run of a replay-from-archive job reports (:class:`ArchiveReplayReport`) and how it
sends a chunk to the main queue (:func:`send_chunk`)."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from webhook_pipeline.adapters.sqs import (
    BATCH_MAX_BYTES,
    BATCH_MAX_ENTRIES,
    message_attributes,
    message_body,
)
from webhook_pipeline.envelope import Envelope

#: At most this many delivery ids are listed in a dry run's sample.
SAMPLE_SIZE = 20
#: Attempts at sending the entries of a batch SQS did not accept.
SEND_ATTEMPTS = 3


class ChunkNotSentError(RuntimeError):
    """Some messages of a chunk were not accepted by SQS after :data:`SEND_ATTEMPTS`; the
    cursor stays before the chunk (a resume sends it again)."""


@dataclass
class ArchiveReplayReport:
    """One run of a job.

    Attributes
    ----------
    job : str | None
        Job id (``None`` for a dry run or an empty window).
    mode : str
        ``redeliver`` or ``reprocess``.
    dry_run : bool
    status : str
        ``complete``, ``incomplete`` (stopped before the end: invoke again with ``job``),
        ``failed`` (an error stopped it; ``error`` says which; resumable) or ``empty`` (nothing
        archived in the window matches).
    generation : int | None
        The reprocess generation.
    total : int
        Candidates of the job (matching archived deliveries, after ``max_deliveries``).
    examined : int
        Candidates examined in this run.
    matched : int
        Of those, the ones that pass the record checks (sent, or in a dry run: would be sent).
    sent : int
        Messages sent in this run.
    skipped : dict[str, int]
        Candidates not sent in this run, by reason (``already recorded``, ``not recorded``,
        ``stale``, ...).
    failed : list[dict]
        Candidates that could not be sent, by ``source``/``delivery_id``/``reason`` (a corrupt
        body, a body that does not match its SHA-256).
    corrupt_objects : list[dict]
        Archive objects or lines that could not be read, by ``key``/``line``/``reason``.
    resumed_from : int | None
        The cursor this run started from when it resumed a job.
    cursor : int
        The cursor at the end of the run.
    elapsed_seconds, achieved_rate : float
        Wall time of the run and messages sent per second of it.
    sample : list[dict]
        Dry run only: the first :data:`SAMPLE_SIZE` deliveries that would be sent.
    error : str | None
    """

    mode: str
    dry_run: bool
    job: str | None = None
    status: str = "complete"
    generation: int | None = None
    total: int = 0
    examined: int = 0
    matched: int = 0
    sent: int = 0
    skipped: Counter[str] = field(default_factory=Counter)
    failed: list[dict[str, str]] = field(default_factory=list)
    corrupt_objects: list[dict[str, Any]] = field(default_factory=list)
    resumed_from: int | None = None
    cursor: int = 0
    elapsed_seconds: float = 0.0
    achieved_rate: float = 0.0
    sample: list[dict[str, str]] = field(default_factory=list)
    error: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready; ``sample`` only in a dry run, ``error`` only when set."""
        out: dict[str, Any] = {
            "job": self.job,
            "mode": self.mode,
            "dry_run": self.dry_run,
            "status": self.status,
            "generation": self.generation,
            "total": self.total,
            "examined": self.examined,
            "matched": self.matched,
            "sent": self.sent,
            "skipped": dict(sorted(self.skipped.items())),
            "failed": list(self.failed),
            "corrupt_objects": list(self.corrupt_objects),
            "resumed_from": self.resumed_from,
            "cursor": self.cursor,
            "elapsed_seconds": round(self.elapsed_seconds, 3),
            "achieved_rate": round(self.achieved_rate, 3),
        }
        if self.dry_run:
            out["sample"] = list(self.sample)
        if self.error is not None:
            out["error"] = self.error
        return out


def send_chunk(sqs: Any, queue_url: str, envelopes: list[Envelope]) -> None:
    """Send ``envelopes`` with ``SendMessageBatch`` (at most 10 entries and 256 KiB a call),
    retrying the entries SQS did not accept.

    Raises
    ------
    ChunkNotSentError
        Entries still not accepted after :data:`SEND_ATTEMPTS`, or a call failed.
    """
    for batch in _batches(envelopes):
        pending = {str(i): entry for i, entry in enumerate(batch)}
        for _ in range(SEND_ATTEMPTS):
            try:
                response = sqs.send_message_batch(
                    QueueUrl=queue_url, Entries=list(pending.values())
                )
            except Exception as exc:  # botocore's errors: the chunk is not checkpointed
                raise ChunkNotSentError(f"SendMessageBatch failed: {exc}") from None
            for ok in response.get("Successful", []):
                pending.pop(ok["Id"], None)
            if not pending:
                break
        if pending:
            raise ChunkNotSentError(f"{len(pending)} message(s) not accepted by SQS")


def _batches(envelopes: list[Envelope]) -> list[list[dict[str, Any]]]:
    batches: list[list[dict[str, Any]]] = []
    size = 0
    for envelope in envelopes:
        body = message_body(envelope)
        entry_size = len(body.encode()) + 1_024  # attributes: source and delivery id
        if (
            not batches
            or len(batches[-1]) >= BATCH_MAX_ENTRIES
            or size + entry_size > BATCH_MAX_BYTES
        ):
            batches.append([])
            size = 0
        entry = {
            "Id": str(len(batches[-1])),
            "MessageBody": body,
            "MessageAttributes": message_attributes(envelope),
        }
        batches[-1].append(entry)
        size += entry_size
    return batches
