"""boto3 SQS adapters of the replay ports: the DLQ reader (:class:`SqsDeadLetterQueue`), the
main-queue sender for replays (:class:`SqsReplaySender`), and queue attributes and depth for the
operator commands.

They translate botocore errors into :class:`~webhook_pipeline.errors.QueueOperationError` so the
replay domain never sees a botocore type. The clients are created (with timeouts and retries) by
the caller: the replay function's handler or the operator CLI.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from botocore.exceptions import BotoCoreError, ClientError

from webhook_pipeline.adapters.aws_errors import describe_error as _describe
from webhook_pipeline.errors import QueueOperationError
from webhook_pipeline.replay.ports import DlqMessage

if TYPE_CHECKING:
    from mypy_boto3_sqs import SQSClient

#: Queue attributes whose sum is the approximate depth (visible + in flight + delayed).
DEPTH_ATTRIBUTES = (
    "ApproximateNumberOfMessages",
    "ApproximateNumberOfMessagesNotVisible",
    "ApproximateNumberOfMessagesDelayed",
)


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
    "DEPTH_ATTRIBUTES",
    "SqsDeadLetterQueue",
    "SqsReplaySender",
    "queue_attributes",
    "queue_depth",
    "to_dlq_message",
]
