"""boto3 SQS adapters: the ingest's envelope queue (:class:`SqsQueue`) and the replay ports (the
DLQ reader and the main-queue sender for replays).

They translate botocore errors into :class:`~webhook_pipeline.errors.QueueOperationError` so the
replay domain never sees a botocore type. The clients are created (with timeouts and retries) by
the caller: the replay function's handler or the operator CLI.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from botocore.exceptions import BotoCoreError, ClientError

from webhook_pipeline.envelope import Envelope
from webhook_pipeline.errors import QueueOperationError
from webhook_pipeline.ingest.ports import BatchSendResult
from webhook_pipeline.replay.ports import DlqMessage

#: Queue attributes whose sum is the approximate depth (visible + in flight + delayed).
DEPTH_ATTRIBUTES = (
    "ApproximateNumberOfMessages",
    "ApproximateNumberOfMessagesNotVisible",
    "ApproximateNumberOfMessagesDelayed",
)

if TYPE_CHECKING:
    from mypy_boto3_sqs import SQSClient
    from mypy_boto3_sqs.type_defs import (
        MessageAttributeValueTypeDef,
        SendMessageBatchRequestEntryTypeDef,
    )


def _describe(exc: Exception) -> str:
    if isinstance(exc, ClientError):
        err = exc.response.get("Error", {})
        return f"{err.get('Code', 'ClientError')}: {err.get('Message', '')}".strip()
    return f"{type(exc).__name__}: {exc}"


def to_dlq_message(raw: Mapping[str, Any]) -> DlqMessage:
    """Build a :class:`DlqMessage` from one entry of ``ReceiveMessage``'s ``Messages``."""
    attributes = raw.get("Attributes", {})
    sent_ms = attributes.get("SentTimestamp")
    sent_at = datetime.fromtimestamp(int(sent_ms) / 1000, UTC) if sent_ms else None
    message_attributes = {
        name: {k: v for k, v in value.items() if k in ("DataType", "StringValue", "BinaryValue")}
        for name, value in raw.get("MessageAttributes", {}).items()
    }
    return DlqMessage(
        message_id=raw["MessageId"],
        receipt_handle=raw["ReceiptHandle"],
        body=raw.get("Body", ""),
        receive_count=int(attributes.get("ApproximateReceiveCount", 0)),
        sent_at=sent_at,
        message_attributes=message_attributes,
    )


class SqsDeadLetterQueue:
    """The DLQ through an SQS client (implements ``DeadLetterReader``).

    Parameters
    ----------
    client : botocore SQS client
    queue_url : str
    wait_time_seconds : int
        Long-poll wait of each receive (0..20). Long polling asks every SQS server, so an empty
        answer really means "nothing visible" rather than "nothing on the servers sampled".
    """

    def __init__(self, client: SQSClient, queue_url: str, wait_time_seconds: int = 1) -> None:
        self.client = client
        self.queue_url = queue_url
        self.wait_time_seconds = wait_time_seconds

    def receive(self, max_messages: int, visibility_timeout: int) -> Sequence[DlqMessage]:
        try:
            response = self.client.receive_message(
                QueueUrl=self.queue_url,
                MaxNumberOfMessages=max(1, min(10, max_messages)),
                VisibilityTimeout=visibility_timeout,
                WaitTimeSeconds=self.wait_time_seconds,
                MessageSystemAttributeNames=["All"],
                MessageAttributeNames=["All"],
            )
        except (ClientError, BotoCoreError) as exc:
            raise QueueOperationError(f"receive from the DLQ failed: {_describe(exc)}") from exc
        return [to_dlq_message(m) for m in response.get("Messages", [])]

    def delete(self, message: DlqMessage) -> None:
        try:
            self.client.delete_message(
                QueueUrl=self.queue_url, ReceiptHandle=message.receipt_handle
            )
        except (ClientError, BotoCoreError) as exc:
            raise QueueOperationError(
                f"delete of {message.message_id} failed: {_describe(exc)}"
            ) from exc

    def change_visibility(self, message: DlqMessage, timeout_seconds: int) -> None:
        try:
            self.client.change_message_visibility(
                QueueUrl=self.queue_url,
                ReceiptHandle=message.receipt_handle,
                VisibilityTimeout=timeout_seconds,
            )
        except (ClientError, BotoCoreError) as exc:
            raise QueueOperationError(
                f"visibility change of {message.message_id} failed: {_describe(exc)}"
            ) from exc

    def approximate_depth(self) -> int | None:
        return queue_depth(self.client, self.queue_url)

    def peek(self, max_messages: int) -> list[DlqMessage]:
        """Receive up to ``max_messages`` and make each visible again at once (not consumed).

        Each peek still adds one to the messages' ``ApproximateReceiveCount``. Never use this on
        the main queue: there the count drives the redrive to the DLQ.
        """
        seen: dict[str, DlqMessage] = {}
        while len(seen) < max_messages:
            batch = self.receive(min(10, max_messages - len(seen)), visibility_timeout=30)
            fresh = [m for m in batch if m.message_id not in seen]
            for message in batch:
                self.change_visibility(message, 0)
            if not fresh:
                break
            for message in fresh:
                seen[message.message_id] = message
        return list(seen.values())[:max_messages]


class SqsReplaySender:
    """The main queue through an SQS client, for replays (implements ``MainQueueSender``)."""

    def __init__(self, client: SQSClient, queue_url: str) -> None:
        self.client = client
        self.queue_url = queue_url

    def send(self, body: str, message_attributes: Mapping[str, Any]) -> None:
        kwargs: dict[str, Any] = {"QueueUrl": self.queue_url, "MessageBody": body}
        if message_attributes:
            kwargs["MessageAttributes"] = dict(message_attributes)
        try:
            self.client.send_message(**kwargs)
        except (ClientError, BotoCoreError) as exc:
            raise QueueOperationError(f"send to the main queue failed: {_describe(exc)}") from exc


def queue_attributes(client: SQSClient, queue_url: str) -> dict[str, str]:
    """All attributes of a queue (raises :class:`QueueOperationError`)."""
    try:
        response = client.get_queue_attributes(QueueUrl=queue_url, AttributeNames=["All"])
    except (ClientError, BotoCoreError) as exc:
        raise QueueOperationError(
            f"reading attributes of {queue_url} failed: {_describe(exc)}"
        ) from exc
    return {str(name): value for name, value in response.get("Attributes", {}).items()}


def queue_depth(client: SQSClient, queue_url: str) -> int | None:
    """Approximate depth (visible + in flight + delayed), ``None`` when unreadable."""
    try:
        attributes = queue_attributes(client, queue_url)
    except QueueOperationError:
        return None
    return sum(int(attributes.get(name, 0)) for name in DEPTH_ATTRIBUTES)


__all__ = [
    "SqsDeadLetterQueue",
    "SqsQueue",
    "SqsReplaySender",
    "queue_attributes",
    "queue_depth",
    "to_dlq_message",
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
    text = envelope.to_json()
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


def _entry_size(body: str, attributes: dict[str, MessageAttributeValueTypeDef]) -> int:
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

    def send_batch(self, envelopes: Sequence[Envelope]) -> BatchSendResult:
        """Send ``envelopes`` with ``SendMessageBatch``: at most 10 entries and 262,144 bytes
        per call (ceil(n / 10) calls for small events).

        A call that raises (throttled, timed out, SQS unavailable) marks its entries and every
        later one as failed without trying them: the sender retries the whole POST and the
        events already sent are then duplicates. Entries SQS lists in ``Failed`` are failed;
        the others are sent.
        """
        result = BatchSendResult()
        chunks: list[list[tuple[int, SendMessageBatchRequestEntryTypeDef]]] = [[]]
        size = 0
        for index, envelope in enumerate(envelopes):
            body, attributes = message_body(envelope), message_attributes(envelope)
            entry_size = _entry_size(body, attributes)
            if chunks[-1] and (
                len(chunks[-1]) == BATCH_MAX_ENTRIES or size + entry_size > BATCH_MAX_BYTES
            ):
                chunks.append([])
                size = 0
            entry: SendMessageBatchRequestEntryTypeDef = {
                "Id": str(index),
                "MessageBody": body,
                "MessageAttributes": attributes,
            }
            chunks[-1].append((index, entry))
            size += entry_size
        for position, chunk in enumerate(chunks):
            if not chunk:
                continue
            try:
                response = self.client.send_message_batch(
                    QueueUrl=self.queue_url, Entries=[entry for _, entry in chunk]
                )
            except (BotoCoreError, ClientError) as exc:
                for later in chunks[position:]:
                    for index, _ in later:
                        result.failed[index] = _describe(exc)
                break
            for ok in response.get("Successful") or []:
                result.sent[int(ok["Id"])] = str(ok["MessageId"])
            for bad in response.get("Failed") or []:
                result.failed[int(bad["Id"])] = str(bad.get("Code", "Failed"))
            for index, _ in chunk:
                if index not in result.sent and index not in result.failed:
                    result.failed[index] = "no answer for this entry"
        return result
