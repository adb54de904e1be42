"""The time index (``ByReceivedTime``): every delivery record the store writes can be found by
the UTC day it was received, in received order, and nothing else is in the index."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

import boto3
import pytest
from moto import mock_aws
from webhook_pipeline.adapters.dynamodb import DynamoDBDeliveryStore
from webhook_pipeline.adapters.dynamodb_items import TIME_INDEX, TIME_INDEX_SHARDS, time_index_shard
from webhook_pipeline.process.model import DeliveryRecord, FailureNote, Outcome

from tests.helpers import create_deliveries_table

pytestmark = pytest.mark.integration

AT = datetime(2026, 3, 1, 23, 59, 58, tzinfo=UTC)


def _record(delivery_id: str, received_at: datetime, resource: str | None = None) -> DeliveryRecord:
    return DeliveryRecord(
        source="stripe",
        delivery_id=delivery_id,
        event_type="customer.updated",
        resource_key=resource,
        sequence=1 if resource else None,
        received_at=received_at,
        recorded_at=received_at,
        expires_at=1_900_000_000,
        body_size=2,
        body_sha256="0" * 64,
        hook_pending=False,
        message_id=f"m-{delivery_id}",
        attempt_token="t" * 36,
    )


def test_records_are_found_by_day_in_received_order_and_only_records() -> None:
    with mock_aws():
        client = boto3.client("dynamodb", region_name="us-east-1")
        create_deliveries_table(client, "t")
        store = DynamoDBDeliveryStore(client, "t")
        written = [_record(f"evt_{i}", AT + timedelta(seconds=i)) for i in range(40)]
        for i, rec in enumerate(written):
            # applied without and with a resource (one Put, one transaction)
            store.record(replace(rec, resource_key="cus_1", sequence=i) if i % 2 else rec)
        store.record_failure(
            FailureNote("m-x", Outcome.MALFORMED, "bad", 1, AT, source="stripe", delivery_id="x")
        )

        found: list[tuple[str, str]] = []
        for day in ("2026-03-01", "2026-03-02"):
            for shard in range(TIME_INDEX_SHARDS):
                items = client.query(
                    TableName="t",
                    IndexName=TIME_INDEX,
                    KeyConditionExpression="received_shard = :s",
                    ExpressionAttributeValues={":s": {"S": f"{day}#{shard}"}},
                )["Items"]
                found += [(i["received_key"]["S"], i["delivery_id"]["S"]) for i in items]

    assert sorted(d for _, d in found) == sorted(r.delivery_id for r in written)
    assert [d for _, d in sorted(found)] == [r.delivery_id for r in written]
    # The two receive days both hold records (the run crosses midnight UTC).
    assert {time_index_shard("stripe", r.delivery_id, r.received_at)[:10] for r in written} == {
        "2026-03-01",
        "2026-03-02",
    }
