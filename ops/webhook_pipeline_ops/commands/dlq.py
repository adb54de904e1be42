"""``webhook-pipeline dlq peek``: what is in the dead-letter queue, without consuming it.

Each message is received and made visible again at once (visibility 0), so nothing is consumed;
the peek does add one to each message's receive count: ``receive_count`` counts every receive
so far, on the main queue and in the DLQ, this peek's own included. Bodies (which may hold
personal data) are shown only with ``--show-body``. SQS does not return messages oldest first: a
peek of N shows some N messages, not the N oldest. A credential the provider puts in the body
(Google Ads' ``google_key``) is shown as ``[redacted]``, in the payload and in the envelope.

``reason``: SQS's redrive records none, so the processor keeps a failure note per message id
for failures retries do not fix (malformed envelope, a request DynamoDB rejects, a failing
hook), and the peek shows it when the deliveries table is known (``--stack``, ``--local`` or
``--table``). Without a note: ``malformed envelope`` for a body that is not a valid envelope
(``--json`` adds the parse error as ``detail``), otherwise ``retries exhausted`` (transient
errors such as throttling; with the replay count if it already came back from a replay); the
processor's log lines for the delivery id give the error itself.
"""

from __future__ import annotations

import argparse
import base64
import binascii
from datetime import UTC, datetime
from typing import Any

from webhook_pipeline.envelope import Envelope
from webhook_pipeline.errors import MalformedEnvelopeError
from webhook_pipeline.replay.ports import DlqMessage

from webhook_pipeline_ops.aws import Aws, OpsError, common_options
from webhook_pipeline_ops.credentials import shown_body
from webhook_pipeline_ops.output import human_age, print_json, print_table

COLUMNS = ("source", "delivery_id", "event_type", "receive_count", "reason", "age", "message_id")


def register(subparsers: Any) -> None:
    """Add ``dlq peek``."""
    dlq = subparsers.add_parser("dlq", help="inspect the dead-letter queue")
    actions = dlq.add_subparsers(dest="dlq_command", metavar="ACTION", required=True)
    peek = actions.add_parser(
        "peek",
        parents=[common_options(("dlq_url", "table"))],
        help="list DLQ messages without consuming them",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    peek.add_argument("--max", type=int, default=10, help="at most N messages (default 10)")
    peek.add_argument("--show-body", action="store_true", help="include the message bodies")
    peek.set_defaults(func=run_peek)


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


#: Printed under the table: what the receive count includes.
RECEIVE_COUNT_NOTE = (
    "receive_count: every receive so far, on the main queue and in the DLQ, this peek's included"
)


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


def run_peek(args: argparse.Namespace) -> int:
    if args.max < 1:
        raise OpsError("--max must be at least 1", exit_code=2)
    rows = peek_rows(Aws(args), args.max, args.show_body)
    if args.json:
        print_json(rows)
        return 0
    if not rows:
        print("The dead-letter queue is empty (nothing visible).")
        return 0
    print_table(rows, COLUMNS)
    print(f"({RECEIVE_COUNT_NOTE})")
    if args.show_body:
        for row in rows:
            print(f"\n--- {row['message_id']} ({row['source']}/{row['delivery_id']})")
            print(row.get("payload") if row.get("payload") is not None else row["body"])
    return 0
