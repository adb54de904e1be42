"""The secrets cache as the README describes it: each ingest container keeps a secret's value
for ``SECRETS_MAX_AGE_SECONDS`` (300 s by default); a rotation pair verifies against both values;
a changed or deleted secret takes effect only when the entry expires, and a secret that cannot be
read then is 503 ``secret_unavailable``, never the expired value. The expiry is the cache
cleared (Powertools' ``clear_cache``), not a wait."""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

import boto3
import pytest
from webhook_pipeline.settings import IngestSettings
from webhook_pipeline_ops.simulator.deliveries import (
    example_sources,
    http_api_event,
    signed_delivery,
)

from tests.integration.ingest_harness import SECRETS_PREFIX, IngestHarness

pytestmark = pytest.mark.integration

SOURCE = example_sources()["standard-webhooks"]
OLD = "whsec_b2xkLXNlY3JldC1vbGQtb2xkLW9sZA=="
NEW = "whsec_bmV3LXNlY3JldC1uZXctbmV3LW5ldw=="


def put(value: str) -> None:
    boto3.client("secretsmanager").put_secret_value(
        SecretId=f"{SECRETS_PREFIX}standard-webhooks", SecretString=value
    )


def answer(harness: IngestHarness, secret: str) -> tuple[int, str]:
    response = harness.invoke(http_api_event(signed_delivery(SOURCE, secret=secret)))
    return response["statusCode"], json.loads(response["body"]).get("reason", "")


def expire(harness: IngestHarness) -> None:
    """What SECRETS_MAX_AGE_SECONDS passing does: the container's next read fetches."""
    harness.app.service().secrets.provider.clear_cache()


def cache_lifetime(harness: IngestHarness) -> float:
    (entry,) = harness.app.service().secrets.provider.store.values()
    return (entry.ttl - datetime.now()).total_seconds()


@pytest.fixture
def harness(make_ingest: Any) -> IngestHarness:
    put(OLD)
    return make_ingest()


def test_the_default_lifetime_is_300_s(harness: IngestHarness) -> None:
    assert IngestSettings.model_fields["secrets_max_age_seconds"].default == 300
    assert answer(harness, OLD)[0] == 202
    assert 290 < cache_lifetime(harness) <= 300


def test_a_rotation_takes_effect_per_container_when_its_entry_expires(
    harness: IngestHarness,
) -> None:
    assert answer(harness, OLD)[0] == 202  # the plain old value is cached
    # The rotation pair is stored: until the entry expires the new secret is refused
    put(json.dumps({"current": NEW, "previous": OLD}))
    assert answer(harness, NEW) == (401, "signature_invalid")
    expire(harness)
    assert answer(harness, NEW)[0] == 202
    assert answer(harness, OLD)[0] == 202  # previous still accepted
    # The new value alone: the old one verifies until the pair expires, then never
    put(NEW)
    assert answer(harness, OLD)[0] == 202
    expire(harness)
    assert answer(harness, OLD) == (401, "signature_invalid")
    assert answer(harness, NEW)[0] == 202


def test_a_deleted_secret_verifies_from_the_cache_then_is_503(harness: IngestHarness) -> None:
    assert answer(harness, OLD)[0] == 202
    boto3.client("secretsmanager").delete_secret(
        SecretId=f"{SECRETS_PREFIX}standard-webhooks", ForceDeleteWithoutRecovery=True
    )
    assert answer(harness, OLD)[0] == 202
    expire(harness)
    response = harness.invoke(http_api_event(signed_delivery(SOURCE, secret=OLD)))
    assert response["statusCode"] == 503 and "retry-after" in response["headers"]
    assert json.loads(response["body"])["reason"] == "secret_unavailable"
