"""A delivery archived only by a redelivery (a ``duplicate`` line carrying the outcome recorded
for the delivery, ``recorded_outcome``) is selected by its verdict, alike by the local search and
by the Athena SQL (run in DuckDB over the same objects, as ``test_archive_search_crosscheck``)."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Any

import boto3
import pytest
from moto import mock_aws
from webhook_pipeline.archive.query import ArchiveFilter, search
from webhook_pipeline.archive.record import ArchiveRecord, encode_object, hour_of, object_key
from webhook_pipeline_ops.archive.athena import record_of
from webhook_pipeline_ops.archive.sql import search_sql

from tests.archive_fixture import BUCKET, T10, duckdb_athena, record

pytestmark = pytest.mark.integration

W = {"start": T10, "end": T10 + timedelta(hours=1)}
S = timedelta(seconds=1)


def lines() -> list[ArchiveRecord]:
    def verdict(line: ArchiveRecord, recorded: str) -> ArchiveRecord:
        return line.model_copy(update={"recorded_outcome": recorded})

    m = timedelta(minutes=1)
    return [
        # evt_r: its applied attempt's line lost, only the redelivery's line
        verdict(record("stripe", "evt_r", T10 + m, outcome="duplicate"), "applied"),
        # evt_s: a failed attempt, then a redelivery of the stale delivery
        record("stripe", "evt_s", T10 + 2 * m, outcome="retry", archived=S),
        verdict(
            record("stripe", "evt_s", T10 + 2 * m, outcome="duplicate", archived=3 * S), "stale"
        ),
        # evt_d: a copy with other bytes (no recorded outcome: never applied)
        record("stripe", "evt_d", T10 + 3 * m, outcome="duplicate", body={"other": 1}),
        # evt_a: applied, then its redelivery (the applied line is kept: the earliest)
        record("stripe", "evt_a", T10 + 4 * m),
        verdict(
            record("stripe", "evt_a", T10 + 4 * m, outcome="duplicate", archived=2 * S), "applied"
        ),
    ]


@pytest.fixture(scope="module")
def archive(tmp_path_factory: pytest.TempPathFactory) -> Any:
    folder: Path = tmp_path_factory.mktemp("verdicts")
    key = object_key("stripe", hour_of(T10), T10 + timedelta(hours=5), unique="0" * 32)
    data = encode_object(lines())
    (folder / key).parent.mkdir(parents=True)
    (folder / key).write_bytes(data)
    with mock_aws():
        s3 = boto3.client("s3", region_name="us-east-1")
        s3.create_bucket(Bucket=BUCKET)
        s3.put_object(Bucket=BUCKET, Key=key, Body=data)
        yield s3, duckdb_athena(folder, "archive_db", "deliveries")


@pytest.mark.parametrize(
    ("outcomes", "expected"),
    [
        (("applied",), [("evt_r", "duplicate"), ("evt_a", "applied")]),
        (("stale",), [("evt_s", "duplicate")]),
        (("duplicate",), [("evt_d", "duplicate")]),
        (("retry",), []),
    ],
)
def test_the_verdict_selects_alike_locally_and_in_sql(
    archive: Any, outcomes: tuple[str, ...], expected: list[tuple[str, str]]
) -> None:
    s3, duck = archive
    flt = ArchiveFilter(outcomes=outcomes, **W)
    local = search(s3, BUCKET, flt)
    assert not local.problems
    assert [(r.delivery_id, r.outcome) for r in local.records] == expected
    cursor = duck.execute(search_sql(flt, "archive_db", "deliveries", ["stripe"]))
    names = [d[0] for d in cursor.description]
    rows = [
        record_of({n: (None if v is None else str(v)) for n, v in zip(names, row, strict=True)})
        for row in cursor.fetchall()
    ]
    assert [(r.delivery_id, r.outcome, r.recorded_outcome) for r in rows] == [
        (r.delivery_id, r.outcome, r.recorded_outcome) for r in local.records
    ]
