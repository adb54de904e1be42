"""Hooks registered by provider beside hooks registered by source, through the processor
function (HOOKS_MODULE, SOURCES_FILE) against moto DynamoDB: which hook each source's delivery
runs, and that each runs exactly once across a redelivery of the whole batch."""

from __future__ import annotations

import hashlib
import importlib.util
import sys
import threading
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import boto3
import pytest
from moto.dynamodb.models import DynamoDBBackend
from webhook_pipeline.adapters.dynamodb import DynamoDBDeliveryStore
from webhook_pipeline.hooks import registry

from tests.helpers import FakeContext, create_deliveries_table, envelope_json

pytestmark = pytest.mark.integration

APP = Path(__file__).resolve().parents[2] / "functions" / "processor" / "app.py"
TABLE = "webhook-pipeline-deliveries"

SOURCES = """
[sources.stripe]
provider = "stripe"

[sources.stripe-connect]
provider = "stripe"

[sources.stripe-eu]
provider = "stripe"

[sources.github]
provider = "github"
"""

HOOKS = """
from webhook_pipeline import hooks

calls = []

@hooks.on(provider="stripe", event_type="customer.updated")
def stripe_customer(event):
    calls.append(("provider", event.idempotency_key))

@hooks.on(source="stripe-connect")
def connect_any(event):
    calls.append(("source", event.idempotency_key))
"""


@pytest.fixture
def atomic_moto(monkeypatch: pytest.MonkeyPatch) -> None:
    """moto's DynamoDB operations atomic with respect to each other, as the real service's are
    (the groups of a batch write concurrently; moto has no locking of its own)."""
    lock = threading.RLock()
    for name in ("transact_write_items", "put_item", "update_item", "get_item"):
        original = getattr(DynamoDBBackend, name)

        def locked(*args: Any, __original: Callable[..., Any] = original, **kwargs: Any) -> Any:
            with lock:
                return __original(*args, **kwargs)

        monkeypatch.setattr(DynamoDBBackend, name, locked)


@pytest.fixture
def processor(
    aws: None, atomic_moto: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Callable[[], ModuleType]]:
    """A cold start of functions/processor/app.py with the hooks module and sources file above."""
    create_deliveries_table(boto3.client("dynamodb"), TABLE)
    boto3.client("s3").create_bucket(Bucket="payloads")
    hooks_name = f"provider_hooks_{uuid.uuid4().hex}"
    (tmp_path / f"{hooks_name}.py").write_text(HOOKS)
    (tmp_path / "sources.toml").write_text(SOURCES)
    monkeypatch.syspath_prepend(str(tmp_path))
    for name, value in {
        "TABLE_NAME": TABLE,
        "PAYLOAD_BUCKET": "payloads",
        "HOOKS_MODULE": hooks_name,
        "SOURCES_FILE": str(tmp_path / "sources.toml"),
        "MAX_WORKERS": "4",
    }.items():
        monkeypatch.setenv(name, value)
    loaded: list[ModuleType] = []

    def cold_start() -> ModuleType:
        spec = importlib.util.spec_from_file_location(f"processor_{uuid.uuid4().hex}", APP)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        loaded.append(module)
        return module

    yield cold_start
    for module in loaded:
        if module.service.cache_info().currsize:
            module.service()._executor.shutdown(wait=True)
    sys.modules.pop(hooks_name, None)


def record(source: str, delivery_id: str, event_type: str, receive_count: int) -> dict[str, Any]:
    body = envelope_json(delivery_id, "cus_1", 1, event_type=event_type, source=source)
    return {
        "messageId": f"{source}/{delivery_id}",
        "receiptHandle": "AQEBexample==",
        "body": body,
        "attributes": {"ApproximateReceiveCount": str(receive_count)},
        "messageAttributes": {},
        "md5OfBody": hashlib.md5(body.encode()).hexdigest(),
        "eventSource": "aws:sqs",
        "eventSourceARN": "arn:aws:sqs:us-east-1:123456789012:MainQueue",
        "awsRegion": "us-east-1",
    }


def batch(receive_count: int) -> dict[str, Any]:
    """One delivery id on each of three Stripe sources and a GitHub source, and an event type
    the provider hook does not take."""
    return {
        "Records": [
            record("stripe", "evt_1", "customer.updated", receive_count),
            record("stripe-connect", "evt_1", "customer.updated", receive_count),
            record("stripe-eu", "evt_1", "customer.updated", receive_count),
            record("github", "evt_1", "customer.updated", receive_count),
            record("stripe", "evt_2", "invoice.paid", receive_count),
        ]
    }


def test_a_provider_hook_runs_for_every_source_of_the_provider_but_one_with_its_own(
    processor: Callable[[], ModuleType],
) -> None:
    # Given a hook for Stripe's customer.updated and a catch-all hook of the stripe-connect source
    app = processor()
    calls = sys.modules[app.settings.hooks_module].calls
    # When the batch is processed, then delivered again whole (a redelivery)
    for receive_count in (1, 2):
        response = app.lambda_handler(batch(receive_count), FakeContext())
        assert response == {"batchItemFailures": []}
    # Then stripe and stripe-eu ran the provider's hook, stripe-connect its own hook instead
    # (though the provider's names the event type and the source's does not), github and
    # Stripe's invoice.paid none; each exactly once across both deliveries of the batch
    assert sorted(calls) == [
        ("provider", "stripe-eu:evt_1"),
        ("provider", "stripe:evt_1"),
        ("source", "stripe-connect:evt_1"),
    ]
    store = DynamoDBDeliveryStore(boto3.client("dynamodb"), TABLE)
    for source in ("stripe", "stripe-connect", "stripe-eu"):
        assert store.get_delivery(source, "evt_1")["hook_state"] == "done", source
    for source, delivery_id in (("github", "evt_1"), ("stripe", "evt_2")):
        assert store.get_delivery(source, delivery_id).get("hook_state") in (None, "none")


def test_without_the_sources_file_a_provider_hook_matches_no_unknown_source(
    processor: Callable[[], ModuleType], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # Given a sources file without stripe-eu
    (tmp_path / "sources.toml").write_text(SOURCES.replace("[sources.stripe-eu]", "[sources.x]"))
    app = processor()
    calls = sys.modules[app.settings.hooks_module].calls
    # When its delivery is processed, then it is applied with no hook (its provider is unknown)
    assert app.lambda_handler(batch(1), FakeContext()) == {"batchItemFailures": []}
    assert ("provider", "stripe-eu:evt_1") not in calls
    assert ("provider", "stripe:evt_1") in calls
    assert registry.find("stripe-eu", "customer.updated") is None
