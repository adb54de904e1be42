"""Listing delivery records by receipt time (``webhook_pipeline_ops.time_index``) on moto, with
records written by the processor's own store: newest first across shards and days, keyset pages
without gaps or repeats, filters that keep paging until a page is full, window bounds, and one
resource's history in sequence order."""

from __future__ import annotations

import random
from collections.abc import Iterator
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

import boto3
import pytest
from moto import mock_aws
from webhook_pipeline.adapters.dynamodb import DynamoDBDeliveryStore
from webhook_pipeline.adapters.dynamodb_items import TIME_INDEX_SHARDS
from webhook_pipeline.process.model import DeliveryRecord
from webhook_pipeline_ops.resource_history import resource_history
from webhook_pipeline_ops.time_index import (
    DeliveryFilters,
    InvalidCursorError,
    ReadStats,
    encode_cursor,
    iter_deliveries,
    list_deliveries,
)

from tests.helpers import create_deliveries_table

pytestmark = pytest.mark.integration

TABLE = "deliveries"
# 23:00 UTC on March 1st: the records below span three UTC days.
T0 = datetime(2026, 3, 1, 23, 0, tzinfo=UTC)


def record(
    delivery_id: str,
    received_at: datetime,
    *,
    source: str = "stripe",
    event_type: str = "customer.updated",
    resource: str | None = None,
    sequence: int | None = None,
) -> DeliveryRecord:
    return DeliveryRecord(
        source=source,
        delivery_id=delivery_id,
        event_type=event_type,
        resource_key=resource,
        sequence=sequence,
        received_at=received_at,
        recorded_at=received_at + timedelta(milliseconds=40),
        expires_at=1_900_000_000,
        body_size=2,
        body_sha256="0" * 64,
        hook_pending=False,
        message_id=f"m-{delivery_id}",
        attempt_token=f"{delivery_id}-1".ljust(36, "x")[:36],
    )


@pytest.fixture
def ddb() -> Iterator[Any]:
    with mock_aws():
        client = boto3.client("dynamodb", region_name="us-east-1")
        create_deliveries_table(client, TABLE)
        yield client


@pytest.fixture
def written(ddb: Any) -> list[DeliveryRecord]:
    """90 records over ~26 hours (three UTC days), three sources, in a shuffled write order."""
    rng = random.Random(7)
    sources = ("stripe", "github", "shopify")
    records = [
        record(
            f"d{i:03d}",
            T0 - timedelta(hours=1) + timedelta(minutes=30 * i, microseconds=rng.choice([0, 5])),
            source=sources[i % 3],
            event_type="push" if i % 5 == 0 else "customer.updated",
        )
        for i in range(90)
    ]
    store = DynamoDBDeliveryStore(ddb, TABLE)
    for rec in rng.sample(records, len(records)):
        store.record(rec)
    return records


def newest_first(records: list[DeliveryRecord]) -> list[str]:
    return [r.delivery_id for r in sorted(records, key=lambda r: r.received_at, reverse=True)]


WINDOW = {"newest": T0 + timedelta(days=2), "oldest": T0 - timedelta(days=1)}


def test_pages_walk_every_record_newest_first_across_days_without_gaps_or_repeats(
    ddb: Any, written: list[DeliveryRecord]
) -> None:
    # Given records over three UTC days; when paging 7 at a time
    seen: list[str] = []
    cursor = None
    pages = 0
    while True:
        page = list_deliveries(ddb, TABLE, limit=7, cursor=cursor, **WINDOW)
        pages += 1
        assert len(page.items) == 7 or page.next_cursor is None
        seen += [item["delivery_id"] for item in page.items]
        cursor = page.next_cursor
        if cursor is None:
            break
    # Then every record came once, in receipt order, newest first
    assert seen == newest_first(written)
    assert pages == 13  # 90 / 7, rounded up
    days = {r.received_at.date() for r in written}
    assert len(days) == 3


def test_a_last_page_that_is_exactly_full_has_no_next_cursor(
    ddb: Any, written: list[DeliveryRecord]
) -> None:
    cursor, pages = None, []
    while True:
        page = list_deliveries(ddb, TABLE, limit=30, cursor=cursor, **WINDOW)
        pages.append(len(page.items))
        cursor = page.next_cursor
        if cursor is None:
            break
    assert pages == [30, 30, 30]  # no fourth, empty page


def test_a_page_carries_the_projected_fields(ddb: Any, written: list[DeliveryRecord]) -> None:
    page = list_deliveries(ddb, TABLE, limit=1, **WINDOW)
    [item] = page.items
    newest = max(written, key=lambda r: r.received_at)
    assert item["delivery_id"] == newest.delivery_id
    assert item["source"] == newest.source
    assert item["outcome"] == "applied"
    assert item["received_at"] == newest.received_at.isoformat()
    assert item["body_size"] == 2
    assert "body_sha256" not in item  # not projected into the index


def test_the_first_page_asks_each_shard_once_for_a_fair_share(
    ddb: Any, written: list[DeliveryRecord]
) -> None:
    page = list_deliveries(ddb, TABLE, limit=20, **WINDOW)
    assert [i["delivery_id"] for i in page.items] == newest_first(written)[:20]
    # one query per shard of the newest day, a few more where a shard ran out of its share
    assert TIME_INDEX_SHARDS <= page.stats.queries <= 3 * TIME_INDEX_SHARDS
    assert page.stats.scanned <= 3 * 21


def test_window_bounds_newest_exclusive_oldest_inclusive(ddb: Any) -> None:
    store = DynamoDBDeliveryStore(ddb, TABLE)
    at = datetime(2026, 3, 2, 12, 0, 0, tzinfo=UTC)
    for name, moment in (
        ("before", at - timedelta(microseconds=1)),
        ("at_oldest", at),
        ("half_past", at + timedelta(microseconds=500_000)),
        ("at_newest", at + timedelta(seconds=1)),
    ):
        store.record(record(name, moment))
    page = list_deliveries(ddb, TABLE, newest=at + timedelta(seconds=1), oldest=at)
    assert [i["delivery_id"] for i in page.items] == ["half_past", "at_oldest"]
    # a naive bound is UTC
    page = list_deliveries(
        ddb, TABLE, newest=datetime(2026, 3, 2, 13), oldest=datetime(2026, 3, 2, 11)
    )
    assert [i["delivery_id"] for i in page.items] == [
        "at_newest",
        "half_past",
        "at_oldest",
        "before",
    ]


def test_a_selective_filter_keeps_paging_until_the_page_is_full(
    ddb: Any, written: list[DeliveryRecord]
) -> None:
    # Given 18 "push" deliveries among 90 (every 5th); when asking for 6 of them
    wanted = [r for r in written if r.event_type == "push"]
    filters = DeliveryFilters(event_type="push")
    page = list_deliveries(ddb, TABLE, limit=6, filters=filters, **WINDOW)
    # Then the page is full, in order, and the reads went past the matches
    assert [i["delivery_id"] for i in page.items] == newest_first(wanted)[:6]
    assert page.stats.scanned > 6
    rest = list_deliveries(
        ddb, TABLE, limit=100, cursor=page.next_cursor, filters=filters, **WINDOW
    )
    assert [i["delivery_id"] for i in rest.items] == newest_first(wanted)[6:]
    assert rest.next_cursor is None


def test_a_filter_page_smaller_than_a_shard_page_pages_through_the_index(ddb: Any) -> None:
    # Given 300 records in one hour and one match among them
    store = DynamoDBDeliveryStore(ddb, TABLE)
    at = datetime(2026, 3, 2, 10, tzinfo=UTC)
    for i in range(300):
        store.record(record(f"n{i}", at + timedelta(seconds=i), source="github"))
    store.record(record("needle", at + timedelta(seconds=5), source="stripe"))
    stats = ReadStats()
    found = list(
        iter_deliveries(
            ddb,
            TABLE,
            newest=at + timedelta(hours=1),
            oldest=at,
            filters=DeliveryFilters(source="stripe"),
            page_size=10,
            stats=stats,
        )
    )
    # Then it is found, after reading every item of the window, page by page
    assert [i["delivery_id"] for i in found] == ["needle"]
    assert stats.scanned == 301
    assert stats.queries >= 301 // 10


@pytest.mark.parametrize(
    ("filters", "predicate"),
    [
        (DeliveryFilters(source="github"), lambda r: r.source == "github"),
        (
            DeliveryFilters(source="stripe", event_type="push"),
            lambda r: r.source == "stripe" and r.event_type == "push",
        ),
        (DeliveryFilters(delivery_id="d01"), lambda r: r.delivery_id.startswith("d01")),
        (DeliveryFilters(delivery_id="d042"), lambda r: r.delivery_id == "d042"),
        (DeliveryFilters(outcome="stale"), lambda r: False),
    ],
)
def test_filters(ddb: Any, written: list[DeliveryRecord], filters: Any, predicate: Any) -> None:
    page = list_deliveries(ddb, TABLE, limit=100, filters=filters, **WINDOW)
    assert [i["delivery_id"] for i in page.items] == newest_first(
        [r for r in written if predicate(r)]
    )


def test_outcome_and_resource_filters_and_the_resource_history(ddb: Any) -> None:
    # Given one resource's events arriving out of order: sequences 3, 1, 2, 5, 4
    store = DynamoDBDeliveryStore(ddb, TABLE)
    at = datetime(2026, 3, 2, 8, tzinfo=UTC)
    for n, sequence in enumerate((3, 1, 2, 5, 4)):
        store.record(
            record(f"c{sequence}", at + timedelta(minutes=n), resource="cus_1", sequence=sequence)
        )
    store.record(record("other", at, resource="cus_2", sequence=9))
    window = {"newest": at + timedelta(hours=1), "oldest": at - timedelta(hours=1)}
    stale = list_deliveries(ddb, TABLE, filters=DeliveryFilters(outcome="stale"), **window)
    assert sorted(i["delivery_id"] for i in stale.items) == ["c1", "c2", "c4"]
    mine = list_deliveries(ddb, TABLE, filters=DeliveryFilters(resource_key="cus_1"), **window)
    assert [i["delivery_id"] for i in mine.items] == ["c4", "c5", "c2", "c1", "c3"]

    # When reading its history; Then in sequence order with the outcome of each
    history, truncated = resource_history(
        ddb, TABLE, source="stripe", resource_key="cus_1", **window
    )
    assert not truncated
    assert [(i["sequence"], i["outcome"]) for i in history] == [
        (1, "stale"),
        (2, "stale"),
        (3, "applied"),
        (4, "stale"),
        (5, "applied"),
    ]
    cut, truncated = resource_history(
        ddb, TABLE, source="stripe", resource_key="cus_1", max_items=2, **window
    )
    assert truncated
    assert [i["delivery_id"] for i in cut] == ["c4", "c5"]  # the two received last


def test_pages_are_stable_while_new_deliveries_arrive(
    ddb: Any, written: list[DeliveryRecord]
) -> None:
    first = list_deliveries(ddb, TABLE, limit=10, **WINDOW)
    DynamoDBDeliveryStore(ddb, TABLE).record(record("late", T0 + timedelta(days=1, hours=23)))
    second = list_deliveries(ddb, TABLE, limit=10, cursor=first.next_cursor, **WINDOW)
    assert [i["delivery_id"] for i in second.items] == newest_first(written)[10:20]
    again = list_deliveries(ddb, TABLE, limit=1, **WINDOW)
    assert again.items[0]["delivery_id"] == "late"


def test_the_cursor_is_checked(ddb: Any) -> None:
    for bad in ("not base64 !", encode_cursor("no hashes"), encode_cursor("yesterday#a#b")):
        with pytest.raises(InvalidCursorError):
            list_deliveries(ddb, TABLE, cursor=bad, **WINDOW)
    with pytest.raises(ValueError, match="limit"):
        list_deliveries(ddb, TABLE, limit=0, **WINDOW)


def test_an_empty_or_inverted_window_reads_nothing_it_need_not(ddb: Any) -> None:
    stats = ReadStats()
    items = list(
        iter_deliveries(ddb, TABLE, newest=T0, oldest=T0 + timedelta(hours=1), stats=stats)
    )
    assert items == []
    assert stats.queries == 0
    # one day: one query per shard, nothing found
    page = list_deliveries(ddb, TABLE, newest=T0, oldest=T0 - timedelta(hours=1))
    assert page.items == [] and page.next_cursor is None
    assert page.stats.queries == TIME_INDEX_SHARDS


def test_records_a_day_apart_are_merged_not_interleaved_by_shard(ddb: Any) -> None:
    store = DynamoDBDeliveryStore(ddb, TABLE)
    base = datetime(2026, 3, 3, 0, 0, 1, tzinfo=UTC)
    names = [f"s{i}" for i in range(40)]
    for i, name in enumerate(names):
        store.record(replace(record(name, base + timedelta(seconds=i))))
    page = list_deliveries(ddb, TABLE, limit=40, newest=base + timedelta(days=1), oldest=base)
    assert [i["delivery_id"] for i in page.items] == names[::-1]
