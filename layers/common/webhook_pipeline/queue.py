"""Sending envelopes to the main SQS queue."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

from webhook_pipeline.envelope import Envelope


class EnvelopeQueue(Protocol):
    """Where accepted deliveries go.

    ``send`` raises on any failure (the caller then releases the claim).
    """

    def send(self, envelope: Envelope) -> str: ...


@dataclass
class SqsQueue:
    """:class:`EnvelopeQueue` on an SQS queue URL with a boto3 SQS client.

    Each envelope is one ``SendMessage`` whose body is the envelope JSON; ``source`` and
    ``delivery_id`` are also message attributes so operators can look without parsing bodies.
    """

    client: Any
    queue_url: str

    def send(self, envelope: Envelope) -> str:
        """Send ``envelope``; return the SQS ``MessageId``.

        Raises
        ------
        botocore.exceptions.BotoCoreError, botocore.exceptions.ClientError
            Whatever SQS or the network raised (throttling, 5xx, timeouts after retries).
        """
        response = self.client.send_message(
            QueueUrl=self.queue_url,
            MessageBody=envelope.to_json(),
            MessageAttributes={
                "source": {"DataType": "String", "StringValue": envelope.source},
                "delivery_id": {"DataType": "String", "StringValue": envelope.delivery_id},
            },
        )
        return str(response["MessageId"])
