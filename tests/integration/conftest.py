from __future__ import annotations

from collections.abc import Callable
from typing import Any

import boto3
import pytest

from tests.helpers import load_function
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
    return make_ingest()
