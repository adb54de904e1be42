"""Adyen Banking and Management webhooks through the real ingest handler (real Redis, moto): a
signed delivery is accepted with the signed body's digest as its id and its duplicate is 200; a
changed byte or a re-spelled ``HmacSignature`` is 401 and nothing is enqueued."""

from __future__ import annotations

import dataclasses
import hashlib
import json
from typing import Any

import pytest
from webhook_pipeline_ops.simulator.deliveries import (
    example_sources,
    http_api_event,
    signed_delivery,
)

from tests.integration.ingest_harness import IngestHarness

pytestmark = pytest.mark.integration

SOURCE = example_sources()["adyen-banking"]


def answer(harness: IngestHarness, event: dict[str, Any]) -> tuple[int, Any]:
    response = harness.invoke(event)
    return response["statusCode"], json.loads(response["body"])


def test_a_banking_delivery_is_accepted_once(ingest: IngestHarness) -> None:
    delivery = signed_delivery(SOURCE, resource="TR1", sequence=3)
    digest = hashlib.sha256(delivery.body).hexdigest()
    assert answer(ingest, http_api_event(delivery)) == (
        202,
        {"status": "accepted", "delivery_id": digest},
    )
    assert answer(ingest, http_api_event(delivery))[0] == 200
    [envelope] = ingest.envelopes()
    assert (envelope["delivery_id"], envelope["event_type"]) == (
        digest,
        "balancePlatform.transfer.updated",
    )


@pytest.mark.parametrize("tamper", ["body", "spelling"])
def test_a_changed_body_or_a_respelled_signature_is_401(ingest: IngestHarness, tamper: str) -> None:
    delivery = signed_delivery(SOURCE, resource="TR1", sequence=3)
    headers = dict(delivery.headers)
    body = delivery.body
    if tamper == "body":
        body = body.replace(b'"test"', b'"live"')
    else:
        value = headers["HmacSignature"]
        alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
        headers["HmacSignature"] = value[:-2] + alphabet[alphabet.index(value[-2]) ^ 1] + "="
    forged = dataclasses.replace(delivery, headers=headers, body=body)
    assert answer(ingest, http_api_event(forged))[0] == 401
    assert ingest.messages() == []
