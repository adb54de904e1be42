"""A peek at the dead-letter queue without consuming it (:func:`peek_rows`): each message as a
row (:func:`describe`: source, delivery id, event type, receive count, the failure reason, age;
the body only when asked, a provider's credential in it redacted). ``webhook-pipeline dlq peek``,
the audit and the console read the DLQ through it."""

from __future__ import annotations

import base64
import binascii
from datetime import UTC, datetime
from typing import Any

from webhook_pipeline.envelope import Envelope
from webhook_pipeline.errors import MalformedEnvelopeError
from webhook_pipeline.replay.ports import DlqMessage

from webhook_pipeline_ops.aws import Aws
from webhook_pipeline_ops.credentials import shown_body
from webhook_pipeline_ops.output import human_age


def describe(
    message: DlqMessage,
    show_body: bool,
    now: datetime | None = None,
    failure: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """One DLQ message as a row: who, what, why, how old (and the body when asked).

    ``failure`` is the processor's failure note of the message id, when there is one.
    """
    now = now or datetime.now(UTC)
    row: dict[str, Any] = {
        "message_id": message.message_id,
        "receive_count": message.receive_count,
        "sent_at": message.sent_at.isoformat() if message.sent_at else None,
        "age_seconds": int((now - message.sent_at).total_seconds()) if message.sent_at else None,
    }
    envelope: Envelope | None
    try:
        parsed = Envelope.from_json(message.body)
    except MalformedEnvelopeError as exc:
        row.update(source=None, delivery_id=None, event_type=None)
        row["reason"] = "malformed envelope"
        row["detail"] = str(exc)[:300]
        envelope = None
    else:
        envelope = parsed
        row.update(
            source=parsed.source,
            delivery_id=parsed.delivery_id,
            event_type=parsed.event_type,
            received_at=parsed.received_at.isoformat(),
            replay_count=parsed.replay_count,
        )
        row["reason"] = "retries exhausted" + (
            f" (after {parsed.replay_count} replay(s))" if parsed.replay_count else ""
        )
    if failure is not None:  # the table shows the start; --json the whole note
        note = f"{failure.get('outcome')}: {failure.get('reason')}"
        row["reason"] = note if len(note) <= 80 else note[:77] + "..."
        row["failure"] = failure
    row["age"] = human_age(row["age_seconds"])
    if show_body:
        row["body"] = message.body
        if envelope is not None and envelope.body_b64 is not None:
            try:
                raw = base64.b64decode(envelope.body_b64)
            except (binascii.Error, ValueError):
                row["payload"] = None
            else:
                shown = shown_body(envelope.source, raw)
                row["payload"] = shown.decode("utf-8", "replace")
                if shown != raw:  # the envelope as shown carries the redacted body too
                    redacted = base64.b64encode(shown).decode()
                    row["body"] = envelope.model_copy(update={"body_b64": redacted}).to_json()
        elif envelope is not None and envelope.body_ref is not None:
            row["payload"] = f"s3://{envelope.body_ref.bucket}/{envelope.body_ref.key}"
    return row


def peek_rows(aws: Aws, max_messages: int, show_body: bool) -> list[dict[str, Any]]:
    """Up to ``max_messages`` DLQ messages as :func:`describe` rows, without consuming them.

    The failure note of each message is read when the deliveries table is known.

    Raises
    ------
    OpsError
        No DLQ URL.
    QueueOperationError
        SQS failed (its cause is the botocore error, e.g. a connection error).
    """
    from webhook_pipeline.adapters.sqs_replay import SqsDeadLetterQueue

    dlq = SqsDeadLetterQueue(aws.client("sqs"), aws.resources.require("dlq_url"))
    store = None
    if aws.resources.table:
        from webhook_pipeline.adapters.dynamodb import DynamoDBDeliveryStore

        store = DynamoDBDeliveryStore(aws.client("dynamodb"), aws.resources.table)
    return [
        describe(m, show_body, failure=store.get_failure(m.message_id) if store else None)
        for m in dlq.peek(max_messages)
    ]
