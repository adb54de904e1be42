"""The archive queue through boto3 SQS (:class:`SqsArchiveQueue`): the processor's archive
messages sent with ``SendMessageBatch``, in the ingest's chunks (at most 10 entries and 262,144
bytes per call, :func:`webhook_pipeline.adapters.sqs.batch_chunks`)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from webhook_pipeline.adapters.sqs import (
    BATCH_MAX_BYTES,
    batch_chunks,
    entry_size,
    send_batches,
    sqs_safe_json,
)

if TYPE_CHECKING:
    from mypy_boto3_sqs import SQSClient
    from mypy_boto3_sqs.type_defs import MessageAttributeValueTypeDef

__all__ = ["SqsArchiveQueue"]


@dataclass
class SqsArchiveQueue:
    """:class:`~webhook_pipeline.process.archiving.ArchiveSender` on the archive queue's URL."""

    client: SQSClient
    queue_url: str

    def fits(self, body: str) -> bool:
        """Whether ``body`` (compact JSON) is at most 262,144 bytes as sent (after
        :func:`~webhook_pipeline.adapters.sqs.sqs_safe_json`'s escapes)."""
        return entry_size(sqs_safe_json(body), {}) <= BATCH_MAX_BYTES

    def send(self, bodies: Sequence[str]) -> dict[int, str]:
        """Send each of ``bodies`` (compact JSON) as one message.

        Returns
        -------
        dict[int, str]
            By index into ``bodies``, why each one SQS did not accept was not sent: an entry
            over 262,144 bytes (never sent: SQS would refuse the whole call), an entry SQS
            listed as failed or did not answer for, every entry of a call that raised and of
            the calls after it (not tried). Empty when all were accepted. Never raises for an
            SQS or network error.
        """
        failed: dict[int, str] = {}
        sendable: list[tuple[int, str]] = []
        no_attributes: dict[str, MessageAttributeValueTypeDef] = {}
        for index, text in enumerate(bodies):
            body = sqs_safe_json(text)
            if entry_size(body, no_attributes) > BATCH_MAX_BYTES:
                failed[index] = f"archive message over {BATCH_MAX_BYTES} bytes"
            else:
                sendable.append((index, body))
        sent: set[int] = set()
        chunks = batch_chunks((body, no_attributes) for _, body in sendable)
        for result in send_batches(self.client, self.queue_url, chunks):
            sent.update(result.sent)
            failed.update((sendable[i][0], reason) for i, reason in result.failed.items())
        for position, (index, _) in enumerate(sendable):
            if position not in sent and index not in failed:
                failed[index] = "not tried: an earlier call failed"
        return failed
