"""What the replay needs from the queues: a dead-letter reader and a main-queue sender."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol


@dataclass(frozen=True)
class DlqMessage:
    """One message received from the DLQ.

    Attributes
    ----------
    message_id : str
        SQS message id (stable across receives).
    receipt_handle : str
        Handle of this receive (for delete / change visibility).
    body : str
        The message body (an envelope, unless the message is poison).
    receive_count : int
        ``ApproximateReceiveCount`` (receives on the main queue plus on the DLQ).
    sent_at : datetime | None
        ``SentTimestamp``: when the message was first sent (to the main queue), UTC.
    message_attributes : Mapping[str, Any]
        SQS message attributes in the ``SendMessage`` shape; forwarded unchanged on replay.
    """

    message_id: str
    receipt_handle: str
    body: str
    receive_count: int = 0
    sent_at: datetime | None = None
    message_attributes: Mapping[str, Any] = field(default_factory=dict)


class DeadLetterReader(Protocol):
    """The DLQ as the replay needs it."""

    def receive(self, max_messages: int, visibility_timeout: int) -> Sequence[DlqMessage]:
        """Receive up to ``max_messages`` (1..10), hidden for ``visibility_timeout`` seconds.

        Raises :class:`QueueOperationError` on failure.
        """
        ...

    def delete(self, message: DlqMessage) -> None:
        """Delete a received message. Raises :class:`QueueOperationError` on failure."""
        ...

    def change_visibility(self, message: DlqMessage, timeout_seconds: int) -> None:
        """Set a received message's visibility timeout (0 = visible again now).

        Raises :class:`QueueOperationError` on failure.
        """
        ...

    def approximate_depth(self) -> int | None:
        """Approximate number of messages in the queue (visible + in flight), if known."""
        ...


class MainQueueSender(Protocol):
    """The main queue as the replay needs it."""

    def send(self, body: str, message_attributes: Mapping[str, Any]) -> None:
        """Send one message. Raises :class:`QueueOperationError` when it was not accepted."""
        ...
