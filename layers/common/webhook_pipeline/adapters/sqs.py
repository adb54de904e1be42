"""The ingest's envelope queue through boto3 SQS (:class:`SqsQueue`): one ``SendMessage`` per
delivery, ``SendMessageBatch`` calls for a batched POST (one result per call), the characters
and sizes SQS refuses handled before sending. The replay side (the DLQ reader, the main-queue
sender, queue depth) is :mod:`webhook_pipeline.adapters.sqs_replay`, so ingest's cold start
never imports the replay domain. The client is created (with timeouts and retries) by the
ingest handler.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

from botocore.exceptions import BotoCoreError, ClientError

from webhook_pipeline.adapters.aws_errors import describe_error
from webhook_pipeline.envelope import Envelope
from webhook_pipeline.ingest.ports import BatchSendResult

if TYPE_CHECKING:
    from mypy_boto3_sqs import SQSClient
    from mypy_boto3_sqs.type_defs import (
        MessageAttributeValueTypeDef,
        SendMessageBatchRequestEntryTypeDef,
    )


__all__ = [
    "SqsQueue",
    "batch_chunks",
    "entry_size",
    "message_attributes",
    "message_body",
    "send_batches",
    "sqs_safe_json",
]


#: A character SQS refuses in a message body or string attribute value
#: (``InvalidMessageContents`` / ``InvalidParameterValue``): everything outside
#: ``#x9 #xA #xD #x20-#xD7FF #xE000-#xFFFD #x10000-#x10FFFF``, written as the complement (the
#: C0 controls but tab, LF and CR; surrogates; U+FFFE and U+FFFF), which ``re`` compiles in
#: under a millisecond where the allowed ranges negated took 8-13 ms of every cold start.
SQS_REFUSED = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")
#: SendMessageBatch: at most 10 entries and 262,144 bytes in all.
BATCH_MAX_ENTRIES = 10
BATCH_MAX_BYTES = 262_144


def message_body(envelope: Envelope) -> str:
    """The envelope JSON as SQS accepts it: characters SQS refuses (which JSON may carry raw,
    such as U+FFFE in a delivery id) are written as ``\\uXXXX`` escapes instead."""
    return sqs_safe_json(envelope.to_json())


def sqs_safe_json(text: str) -> str:
    """Compact JSON ``text`` as SQS accepts it: re-serialised with ``\\uXXXX`` escapes when it
    holds a character SQS refuses (:data:`SQS_REFUSED`), as is otherwise."""
    if SQS_REFUSED.search(text):
        text = json.dumps(json.loads(text), ensure_ascii=True, separators=(",", ":"))
    return text


def message_attributes(envelope: Envelope) -> dict[str, MessageAttributeValueTypeDef]:
    """``source`` and ``delivery_id`` attributes, so operators can look without parsing bodies.

    A delivery id with characters SQS refuses in a string attribute is sent as a ``Binary``
    attribute (its UTF-8 bytes) instead of being copied raw, which real SQS would refuse on
    every retry.
    """
    delivery_id: MessageAttributeValueTypeDef = (
        {"DataType": "Binary", "BinaryValue": envelope.delivery_id.encode("utf-8")}
        if SQS_REFUSED.search(envelope.delivery_id)
        else {"DataType": "String", "StringValue": envelope.delivery_id}
    )
    return {
        "source": {"DataType": "String", "StringValue": envelope.source},
        "delivery_id": delivery_id,
    }


def entry_size(body: str, attributes: dict[str, MessageAttributeValueTypeDef]) -> int:
    size = len(body.encode("utf-8"))
    for name, attr in attributes.items():
        value = attr.get("StringValue") or attr.get("BinaryValue") or b""
        data = value.encode() if isinstance(value, str) else value
        size += len(name) + len(attr["DataType"]) + (len(data) if isinstance(data, bytes) else 0)
    return size


@dataclass
class SqsQueue:
    """:class:`~webhook_pipeline.ingest.ports.EnvelopeQueue` on an SQS queue URL.

    Each envelope is one message whose body is the envelope JSON (:func:`message_body`) with the
    attributes of :func:`message_attributes`.
    """

    client: SQSClient
    queue_url: str

    def send(self, envelope: Envelope) -> str:
        """Send ``envelope`` with one ``SendMessage``; return the SQS ``MessageId``.

        Raises
        ------
        botocore.exceptions.BotoCoreError, botocore.exceptions.ClientError
            Whatever SQS or the network raised (throttling, 5xx, timeouts after retries).
        """
        response = self.client.send_message(
            QueueUrl=self.queue_url,
            MessageBody=message_body(envelope),
            MessageAttributes=message_attributes(envelope),
        )
        return str(response["MessageId"])

    def send_chunks(self, envelopes: Iterable[Envelope]) -> Iterator[BatchSendResult]:
        """Send ``envelopes`` with ``SendMessageBatch``, at most 10 entries and 262,144 bytes per
        call (ceil(n / 10) calls for small events), yielding each call's result as it returns.

        Entries SQS lists in ``Failed`` are failed, and so is an entry it lists in neither
        ``Successful`` nor ``Failed`` (whether it was queued is unknown: the sender's retry sends
        it again and the processor records it at most once, I3). A call that raises
        (throttled, timed out, SQS unavailable) fails all its entries and ends the iteration:
        the later entries are not tried. Stopping the iteration sends nothing more.
        ``envelopes`` is read as the chunks are made (one envelope past the chunk sent, to
        know it does not fit), so a generator builds only what is about to be sent; what it
        raises propagates.
        """
        entries = ((message_body(e), message_attributes(e)) for e in envelopes)
        yield from send_batches(self.client, self.queue_url, batch_chunks(entries))


def send_batches(
    client: SQSClient,
    queue_url: str,
    chunks: Iterable[list[tuple[int, SendMessageBatchRequestEntryTypeDef]]],
) -> Iterator[BatchSendResult]:
    """One ``SendMessageBatch`` per chunk of :func:`batch_chunks`, yielding each call's result
    (by the entries' indexes) as it returns; shared by the ingest and the processor's archive
    sender.

    An entry SQS lists in ``Failed``, or in neither list, is failed. A call that raises fails
    all its entries and ends the iteration (the later chunks are not tried).
    """
    for chunk in chunks:
        result = BatchSendResult()
        try:
            response = client.send_message_batch(
                QueueUrl=queue_url, Entries=[entry for _, entry in chunk]
            )
        except (BotoCoreError, ClientError) as exc:
            result.failed.update((index, describe_error(exc)) for index, _ in chunk)
            yield result
            return
        for ok in response.get("Successful") or []:
            result.sent[int(ok["Id"])] = str(ok["MessageId"])
        for bad in response.get("Failed") or []:
            result.failed[int(bad["Id"])] = str(bad.get("Code", "Failed"))
        for index, _ in chunk:
            if index not in result.sent and index not in result.failed:
                result.failed[index] = "no answer for this entry"
        yield result


def batch_chunks(
    entries: Iterable[tuple[str, dict[str, MessageAttributeValueTypeDef]]],
) -> Iterator[list[tuple[int, SendMessageBatchRequestEntryTypeDef]]]:
    """The ``SendMessageBatch`` entries of ``(body, attributes)`` pairs (``Id``: the pair's
    index), in calls of at most :data:`BATCH_MAX_ENTRIES` entries and :data:`BATCH_MAX_BYTES`
    bytes (an entry over that alone is a call of its own, which SQS refuses). ``entries`` is
    read one past the chunk yielded."""
    chunk: list[tuple[int, SendMessageBatchRequestEntryTypeDef]] = []
    size = 0
    for index, (body, attributes) in enumerate(entries):
        nbytes = entry_size(body, attributes)
        if chunk and (len(chunk) == BATCH_MAX_ENTRIES or size + nbytes > BATCH_MAX_BYTES):
            yield chunk
            chunk, size = [], 0
        entry: SendMessageBatchRequestEntryTypeDef = {
            "Id": str(index),
            "MessageBody": body,
            "MessageAttributes": attributes,
        }
        chunk.append((index, entry))
        size += nbytes
    if chunk:
        yield chunk
