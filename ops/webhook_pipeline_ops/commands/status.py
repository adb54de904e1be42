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
from datetime import UTC, datetime, timedelta
from typing import Any

from webhook_pipeline_ops.aws import Aws, OpsError, common_options
from webhook_pipeline_ops.output import human_age, print_json, print_table

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


def queue_status(aws: Aws, label: str, url: str) -> dict[str, Any]:
    """Counters of one queue (and, when CloudWatch has it, the oldest message's age)."""
    from webhook_pipeline.adapters.sqs_replay import queue_attributes

    attributes = queue_attributes(aws.client("sqs"), url)
    name = url.rstrip("/").rsplit("/", 1)[-1]
    oldest = oldest_age_seconds(aws, name)
    return {
        "queue": label,
        "name": name,
        "url": url,
        "depth": int(attributes.get("ApproximateNumberOfMessages", 0)),
        "in_flight": int(attributes.get("ApproximateNumberOfMessagesNotVisible", 0)),
        "delayed": int(attributes.get("ApproximateNumberOfMessagesDelayed", 0)),
        "oldest_age_seconds": oldest,
        "oldest_age": human_age(oldest),
    }


def oldest_age_seconds(aws: Aws, queue_name: str) -> float | None:
    """Latest ``ApproximateAgeOfOldestMessage`` (seconds), ``None`` without data points."""
    from botocore.exceptions import BotoCoreError, ClientError

    now = datetime.now(UTC)
    try:
        response = aws.client("cloudwatch").get_metric_statistics(
            Namespace="AWS/SQS",
            MetricName="ApproximateAgeOfOldestMessage",
            Dimensions=[{"Name": "QueueName", "Value": queue_name}],
            StartTime=now - timedelta(minutes=15),
            EndTime=now,
            Period=60,
            Statistics=["Maximum"],
        )
    except (ClientError, BotoCoreError):
        return None
    points = sorted(response.get("Datapoints", []), key=lambda p: p["Timestamp"])
    return float(points[-1]["Maximum"]) if points else None


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


__all__ = ["OpsError", "oldest_age_seconds", "queue_status", "register", "run"]
