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
from typing import Any

from webhook_pipeline_ops.aws import Aws, OpsError, common_options
from webhook_pipeline_ops.dlq_peek import peek_rows
from webhook_pipeline_ops.output import print_json, print_table

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


#: Printed under the table: what the receive count includes.
RECEIVE_COUNT_NOTE = (
    "receive_count: every receive so far, on the main queue and in the DLQ, this peek's included"
)


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
