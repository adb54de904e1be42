"""The real ingest handler and the real processor handler in-process, one after the other: what
ingest enqueued is handed to the processor as the event source mapping would, and the records
land in a moto deliveries table built from the template's key schema and indexes."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any

import boto3
import pytest

from tests.helpers import FakeContext, create_deliveries_table, load_function
from tests.integration.ingest_harness import IngestHarness

TABLE = "deliveries"


@dataclass
class Pipeline:
    ingest: IngestHarness
    processor: Any
    table: str

    def process(self, messages: list[dict[str, Any]] | None = None) -> list[str]:
        """Hand ``messages`` (default: every queued message, which then stays invisible on the
        queue: each call sees only new ones) to the processor once; return the message ids it
        reported failed."""
        records = [
            {
                "messageId": m["MessageId"],
                "receiptHandle": m["ReceiptHandle"],
                "body": m["Body"],
                "attributes": {"ApproximateReceiveCount": "1"},
                "messageAttributes": {},
                "md5OfBody": hashlib.md5(m["Body"].encode()).hexdigest(),
                "eventSource": "aws:sqs",
                "eventSourceARN": "arn:aws:sqs:us-east-1:123456789012:main",
                "awsRegion": "us-east-1",
            }
            for m in (self.ingest.messages() if messages is None else messages)
        ]
        if not records:
            return []
        context = FakeContext(function_name="ProcessorFunction")
        response = self.processor.lambda_handler({"Records": records}, context)
        return [f["itemIdentifier"] for f in response["batchItemFailures"]]

    def scan(self) -> list[dict[str, Any]]:
        """Every item of the deliveries table (DynamoDB JSON)."""
        client = boto3.client("dynamodb")
        items: list[dict[str, Any]] = []
        kwargs: dict[str, Any] = {"TableName": self.table}
        while True:
            page = client.scan(**kwargs)
            items.extend(page["Items"])
            if "LastEvaluatedKey" not in page:
                return items
            kwargs["ExclusiveStartKey"] = page["LastEvaluatedKey"]


def build_pipeline(
    ingest: IngestHarness, monkeypatch: pytest.MonkeyPatch, **extra_env: str
) -> Pipeline:
    """A processor (a fresh cold start) over a new deliveries table, reading the bodies the
    ingest put in its payload bucket; ``extra_env`` adds variables (``ARCHIVE_QUEUE_URL``)."""
    create_deliveries_table(boto3.client("dynamodb"), TABLE)
    env = {"TABLE_NAME": TABLE, "PAYLOAD_BUCKET": ingest.bucket, "MAX_WORKERS": "1", **extra_env}
    return Pipeline(ingest, load_function("processor", env, monkeypatch), TABLE)
