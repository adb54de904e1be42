"""The archive's record format, deduplication on read, and the reader's partition pruning.

Fixtures are real gzip JSON Lines objects in (in-process) moto S3, laid out as the archiver
writes them.
"""

from __future__ import annotations

import gzip
import hashlib
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import boto3
import pytest
from webhook_pipeline.archive.query import ArchiveFilter, search, window_hours
from webhook_pipeline.archive.record import (
    ArchiveRecord,
    CorruptRecordError,
    decode_object,
    dedupe,
    encode_object,
    format_time,
    hour_of,
    object_key,
    parse_time,
)

BUCKET = "archive-test"
T0 = datetime(2026, 12, 2, 7, 0, tzinfo=UTC)


def record(
    delivery_id: str,
    *,
    source: str = "stripe-live",
    body: bytes = b'{"id": 1}',
    received: datetime = T0,
    outcome: str = "applied",
    archived: datetime | None = None,
    **fields: Any,
) -> ArchiveRecord:
    return ArchiveRecord(
        source=source,
        delivery_id=delivery_id,
        received_at=format_time(received),
        body_sha256=hashlib.sha256(body).hexdigest(),
        body_size=len(body),
        outcome=outcome,
        archived_at=format_time(archived or received + timedelta(seconds=1)),
        **ArchiveRecord.body_fields(body),
        **fields,
    )


def test_exact_bytes_round_trip_utf8_binary_and_empty() -> None:
    bodies = [b'{"a": "\xc3\xa9\\u00e9"}\r\n', b"\xff\xfe\x00binary", b""]
    records = [record(f"d{i}", body=b) for i, b in enumerate(bodies)]
    decoded, problems = decode_object("k", encode_object(records))
    assert problems == []
    assert [r.body_bytes() for r in decoded] == bodies
    assert decoded[1].body is None and decoded[1].body_base64 is not None
    assert decoded[0].body is not None and decoded[0].body_base64 is None


def test_a_body_that_does_not_match_its_digest_is_corrupt() -> None:
    good = record("d1", body=b'{"amount": 100}')
    tampered = good.model_copy(update={"body": '{"amount": 900}'})
    with pytest.raises(CorruptRecordError, match="does not match body_sha256"):
        tampered.body_bytes()
    both = good.model_copy(update={"body_base64": "e30="})
    with pytest.raises(CorruptRecordError, match="exactly one"):
        both.body_bytes()


def test_bad_lines_and_objects_are_problems_with_their_place() -> None:
    good = record("d1").to_line()
    data = gzip.compress(f'{good}\nnot json\n{{"source": "x"}}\n{good}\n'.encode())
    records, problems = decode_object("key-1", data)
    assert len(records) == 2
    assert [(p.key, p.line) for p in problems] == [("key-1", 2), ("key-1", 3)]
    records, problems = decode_object("key-2", b"plain text, not gzip")
    assert records == [] and [(p.line, p.key) for p in problems] == [(0, "key-2")]


def test_dedupe_keeps_the_most_final_outcome_whatever_the_order() -> None:
    retry = record("d1", outcome="retry", archived=T0 + timedelta(seconds=1))
    applied = record("d1", outcome="applied", archived=T0 + timedelta(seconds=9))
    duplicate = record("d1", outcome="duplicate", archived=T0 + timedelta(seconds=5))
    for order in ([retry, applied, duplicate], [applied, duplicate, retry], [duplicate, retry]):
        kept = list(dedupe(order))
        assert len(kept) == 1
    assert next(dedupe([retry, applied, duplicate])).outcome == "applied"
    assert next(dedupe([duplicate, retry])).outcome == "duplicate"
    early = record("d2", outcome="applied", archived=T0 + timedelta(seconds=2))
    late = record("d2", outcome="applied", archived=T0 + timedelta(seconds=3))
    assert next(dedupe([late, early])).archived_at == early.archived_at


def test_dedupe_keeps_two_sources_with_one_id_and_two_bodies_with_one_id() -> None:
    a = record("same", source="github-a")
    b = record("same", source="github-b")
    other_body = record("same", source="github-a", body=b'{"id": 2}')
    kept = list(dedupe([a, b, other_body, a]))
    assert sorted((r.source, r.body_sha256[:8]) for r in kept) == sorted(
        (r.source, r.body_sha256[:8]) for r in (a, b, other_body)
    )


def test_dedupe_orders_by_receipt_time() -> None:
    later = record("a-later", received=T0 + timedelta(minutes=5))
    earlier = record("z-earlier", received=T0 + timedelta(minutes=1))
    assert [r.delivery_id for r in dedupe([later, earlier])] == ["z-earlier", "a-later"]


def test_times_are_fixed_width_so_string_order_is_time_order() -> None:
    whole = T0  # microsecond 0 still prints six digits
    assert format_time(whole) == "2026-12-02T07:00:00.000000Z"
    moments = [T0 + timedelta(microseconds=m) for m in (0, 9, 10, 999_999, 1_000_000)]
    assert sorted(moments, key=format_time) == moments
    assert parse_time(format_time(moments[3])) == moments[3]
    assert hour_of(datetime(2026, 12, 2, 23, 59, 59, tzinfo=UTC)) == "2026-12-02-23"
    assert list(window_hours(T0 + timedelta(minutes=30), T0 + timedelta(hours=2))) == [
        "2026-12-02-07",
        "2026-12-02-08",
    ]


@pytest.fixture
def s3(aws: None) -> Iterator[Any]:
    client = boto3.client("s3", region_name="us-east-1")
    client.create_bucket(Bucket=BUCKET)
    yield client


def put(s3: Any, records: list[ArchiveRecord]) -> str:
    first = records[0]
    key = object_key(first.source, hour_of(first.received), datetime.now(UTC))
    s3.put_object(Bucket=BUCKET, Key=key, Body=encode_object(records))
    return key


def test_search_reads_only_the_hours_of_the_window_and_cuts_it_exactly(s3: Any) -> None:
    # hours 06, 07, 08, 09: one object each, the window [07:30, 09:00) needs 07 and 08 only
    by_hour = {
        h: [record(f"h{h}-{m}", received=T0.replace(hour=h, minute=m)) for m in (0, 29, 30, 59)]
        for h in (6, 7, 8, 9)
    }
    for records in by_hour.values():
        put(s3, records)
    start, end = T0.replace(minute=30), T0.replace(hour=9)
    found = search(s3, BUCKET, ArchiveFilter(start=start, end=end))
    assert found.objects_read == 2
    assert [r.delivery_id for r in found.records] == [
        "h7-30",
        "h7-59",
        "h8-0",
        "h8-29",
        "h8-30",
        "h8-59",
    ]
    exact = search(
        s3, BUCKET, ArchiveFilter(start=T0.replace(hour=9), end=T0.replace(hour=9, minute=30))
    )
    assert [r.delivery_id for r in exact.records] == ["h9-0", "h9-29"]


def test_search_filters_after_dedupe(s3: Any) -> None:
    put(
        s3,
        [
            record("ev-1", event_type="invoice.paid", outcome="retry", resource_key="in_1"),
            record("ev-1", event_type="invoice.paid", outcome="applied", resource_key="in_1"),
            record("ev-2", event_type="invoice.created", outcome="stale", resource_key="in_1"),
            record("other-3", event_type="charge.failed", outcome="retry", resource_key="ch_1"),
        ],
    )
    put(s3, [record("ev-1", source="github", event_type="push")])

    def ids(**kw: Any) -> list[tuple[str, str]]:
        return [(r.source, r.delivery_id) for r in search(s3, BUCKET, ArchiveFilter(**kw)).records]

    assert ids(outcomes=("retry",)) == [("stripe-live", "other-3")]  # ev-1 ended applied
    assert ids(event_types=("invoice.*",)) == [("stripe-live", "ev-1"), ("stripe-live", "ev-2")]
    assert ids(resource_key="in_1", outcomes=("stale",)) == [("stripe-live", "ev-2")]
    assert ids(delivery_id_prefix="ev-") == [
        ("github", "ev-1"),
        ("stripe-live", "ev-1"),
        ("stripe-live", "ev-2"),
    ]
    assert ids(sources=("github",)) == [("github", "ev-1")]


def test_a_corrupt_object_is_reported_by_key_and_the_rest_is_read(s3: Any) -> None:
    put(s3, [record("good-1")])
    bad = object_key("stripe-live", hour_of(T0), T0, unique="0" * 32)
    s3.put_object(Bucket=BUCKET, Key=bad, Body=b"\x1f\x8b truncated")
    found = search(s3, BUCKET, ArchiveFilter(sources=("stripe-live",)))
    assert [r.delivery_id for r in found.records] == ["good-1"]
    assert [p.key for p in found.problems] == [bad]
