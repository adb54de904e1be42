"""Counters of one SQS queue (:func:`queue_status`: depth, in flight, delayed) and, from
CloudWatch, the age of its oldest message (:func:`oldest_age_seconds`); what
``webhook-pipeline status`` and the console's health page show."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from webhook_pipeline_ops.aws import Aws
from webhook_pipeline_ops.output import human_age


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
