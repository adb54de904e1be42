"""Runs the real ingest handler in-process against a real Redis and moto (SQS, S3, Secrets)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import boto3
from webhook_pipeline_ops.simulator.deliveries import DEV_SECRETS, dev_secret_value, example_sources

from tests.helpers import FakeContext

ROOT = Path(__file__).resolve().parents[2]
SECRETS_PREFIX = "webhook-pipeline/test/"


@dataclass
class IngestHarness:
    app: Any
    sqs: Any
    queue_url: str
    s3: Any
    bucket: str

    def invoke(self, event: dict[str, Any]) -> dict[str, Any]:
        return self.app.lambda_handler(event, FakeContext())

    def body(self, response: dict[str, Any]) -> dict[str, Any]:
        return json.loads(response["body"])

    def messages(self) -> list[dict[str, Any]]:
        """Every message on the main queue (received and kept invisible: once per step)."""
        found: list[dict[str, Any]] = []
        while True:
            got = self.sqs.receive_message(
                QueueUrl=self.queue_url,
                MaxNumberOfMessages=10,
                VisibilityTimeout=300,
                MessageAttributeNames=["All"],
            )
            batch = got.get("Messages", [])
            if not batch:
                return found
            found.extend(batch)

    def envelopes(self) -> list[dict[str, Any]]:
        return [json.loads(m["Body"]) for m in self.messages()]


def provision(region: str = "us-east-1") -> dict[str, str]:
    """Create the queue, bucket and dev secrets in moto; return the ingest environment."""
    sqs = boto3.client("sqs", region_name=region)
    queue_url = sqs.create_queue(QueueName="main")["QueueUrl"]
    s3 = boto3.client("s3", region_name=region)
    s3.create_bucket(Bucket="payloads")
    sm = boto3.client("secretsmanager", region_name=region)
    sources = example_sources()  # read once: by name, each value would read sources.toml again
    for source in DEV_SECRETS:
        value = dev_secret_value(sources[source])
        sm.create_secret(Name=f"{SECRETS_PREFIX}{source}", SecretString=value)
    return {
        "QUEUE_URL": queue_url,
        "PAYLOAD_BUCKET": "payloads",
        "SECRETS_PREFIX": SECRETS_PREFIX,
        "GATE_COOLDOWN_SECONDS": "0",
        # The longest budget the settings allow: a batched POST stops sending when its budget
        # runs out, and on a busy machine the first request (building the AWS clients) can take
        # seconds. Tests of the budget set their own (and a clock or a Lambda context).
        "INGEST_TIME_BUDGET_MS": "29000",
        # Serve every provider as the local stack does (one example source per provider no
        # source of the sources file uses), so tests reach each one through the real handler.
        "SOURCES_CATALOGUE": "true",
    }
