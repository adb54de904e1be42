"""The ingest function builds its SQS and Secrets Manager clients during the init (the first
request builds none), no S3 client for a body under the claim-check threshold; the first larger
body builds it (once) and stores the body."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import boto3
import pytest
from webhook_pipeline_ops.simulator.deliveries import (
    example_sources,
    http_api_event,
    signed_delivery,
)

from tests.integration.ingest_harness import IngestHarness


@pytest.fixture
def clients_built(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The service name of every boto3 client built from a session during the test."""
    built: list[str] = []
    original = boto3.session.Session.client

    def recording(self: Any, service_name: str, *args: Any, **kwargs: Any) -> Any:
        built.append(service_name)
        return original(self, service_name, *args, **kwargs)

    monkeypatch.setattr(boto3.session.Session, "client", recording)
    return built


def test_no_s3_client_until_a_body_needs_the_claim_check(
    make_ingest: Callable[..., IngestHarness], clients_built: list[str]
) -> None:
    harness = make_ingest(INLINE_BODY_MAX_BYTES=2000)
    clients_built.clear()  # the harness's own clients and the function's init
    source = example_sources()["github"]
    small = harness.invoke(http_api_event(signed_delivery(source)))
    assert small["statusCode"] == 202
    assert clients_built == []  # SQS and Secrets Manager were built during the init

    large_body = b'{"zen":"' + b"x" * 4000 + b'","hook_id":1}'
    for _ in range(2):
        large = harness.invoke(http_api_event(signed_delivery(source, body=large_body)))
        assert large["statusCode"] == 202
    assert clients_built.count("s3") == 1
    pointers = [e["body_ref"] for e in harness.envelopes() if e.get("body_ref")]
    assert len(pointers) == 2
    for pointer in pointers:
        stored = harness.s3.get_object(Bucket=pointer["bucket"], Key=pointer["key"])
        assert stored["Body"].read() == large_body
