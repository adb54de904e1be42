"""``webhook-pipeline status``: depth, in-flight count and oldest-message age of both queues.

Depth is SQS's ``ApproximateNumberOfMessages`` (visible), in flight is
``ApproximateNumberOfMessagesNotVisible`` (received, not yet deleted), delayed is
``ApproximateNumberOfMessagesDelayed``; SQS updates these counters with up to a minute of lag.

Oldest age is CloudWatch's ``AWS/SQS ApproximateAgeOfOldestMessage`` (the latest 1-minute maximum
of the last 15 minutes). It is shown as ``-`` when CloudWatch has no data points: a queue idle for
a while, missing ``cloudwatch:GetMetricStatistics`` permission, or the local stack (moto does not
produce SQS metrics). It is deliberately not computed by receiving a message: a receive on the main
queue counts toward ``maxReceiveCount`` and could push a delivery into the DLQ, and SQS does not
return the oldest message first anyway.
"""

from __future__ import annotations

import argparse
from typing import Any

from webhook_pipeline_ops.aws import Aws, OpsError, common_options
from webhook_pipeline_ops.output import print_json, print_table
from webhook_pipeline_ops.queue_status import queue_status

COLUMNS = ("queue", "depth", "in_flight", "delayed", "oldest_age", "name")


def register(subparsers: Any) -> None:
    """Add ``status``."""
    parser = subparsers.add_parser(
        "status",
        parents=[common_options(("queue_url", "dlq_url"))],
        help="queue depth, in flight and oldest message age of the main queue and the DLQ",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    aws = Aws(args)
    resources = aws.resources
    queues = [("main", resources.queue_url), ("dlq", resources.dlq_url)]
    if not any(url for _, url in queues):
        resources.require("queue_url")
    rows = [queue_status(aws, label, url) for label, url in queues if url]
    if args.json:
        print_json({row["queue"]: row for row in rows})
        return 0
    print_table(rows, COLUMNS)
    missing = [label for label, url in queues if not url]
    if missing:
        print(f"(no URL for: {', '.join(missing)})")
    dlq = next((row for row in rows if row["queue"] == "dlq"), None)
    if dlq and dlq["depth"] + dlq["in_flight"]:
        print("The DLQ is not empty: see `webhook-pipeline dlq peek` and docs/operations.md.")
    return 0


__all__ = ["OpsError", "register", "run"]
