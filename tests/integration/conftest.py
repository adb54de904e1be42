from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import boto3
import botocore.client
import pytest

from tests.helpers import create_deliveries_table, load_function
from tests.integration.ingest_harness import IngestHarness, provision


@pytest.fixture
def make_ingest(
    aws: None, redis_url: str, monkeypatch: pytest.MonkeyPatch
) -> Callable[..., IngestHarness]:
    """Build the ingest function (a fresh cold start) against moto and a real Redis.

    Keyword arguments override environment variables (``REDIS_URL=...``, ``GATE_FAIL_MODE=...``).
    """
    base = provision()
    base["REDIS_URL"] = redis_url

    def make(**overrides: Any) -> IngestHarness:
        env = {**base, **{k: str(v) for k, v in overrides.items()}}
        app = load_function("ingest", env, monkeypatch)
        return IngestHarness(
            app=app,
            sqs=boto3.client("sqs"),
            queue_url=env["QUEUE_URL"],
            s3=boto3.client("s3"),
            bucket=env["PAYLOAD_BUCKET"],
        )

    return make


@pytest.fixture
def ingest(make_ingest: Callable[..., IngestHarness]) -> IngestHarness:
    """The ingest function serving what the local stack serves: ``sources.toml`` and, as
    ``SOURCES_CATALOGUE`` does there, every other provider under its own name (the sources of
    :func:`webhook_pipeline_ops.simulator.deliveries.example_sources`)."""
    return make_ingest(SOURCES_CATALOGUE="true")


@pytest.fixture
def aws_calls(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, str]]:
    """Every AWS API call made through botocore during the test, as (service, operation)."""
    calls: list[tuple[str, str]] = []
    original = botocore.client.BaseClient._make_api_call

    def recording(self, operation_name, api_params):
        calls.append((self.meta.service_model.service_name, operation_name))
        return original(self, operation_name, api_params)

    monkeypatch.setattr(botocore.client.BaseClient, "_make_api_call", recording)
    return calls


@pytest.fixture
def two_tables(aws: None) -> Iterator[Callable[[str], tuple[Any, str, str]]]:
    """``make(tag)``: two fresh deliveries tables (``coalesced-<tag>``, ``per-delivery-<tag>``)
    on in-process moto, and the payload bucket ``webhook-pipeline-payloads``: the coalesced
    write and the per-delivery path compared on the same input."""
    client = boto3.client("dynamodb")
    boto3.client("s3").create_bucket(Bucket="webhook-pipeline-payloads")

    def make(tag: str) -> tuple[Any, str, str]:
        names = (f"coalesced-{tag}", f"per-delivery-{tag}")
        for name in names:
            create_deliveries_table(client, name)
        return client, *names

    yield make
