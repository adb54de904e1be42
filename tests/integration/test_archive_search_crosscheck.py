"""Local search and the Athena SQL give the same answers on one fixture.

``query.search`` runs over moto S3; the SQL of ``webhook_pipeline_ops.archive.sql`` runs in
DuckDB over the same objects on disk (moto's Athena does not execute SQL), with the Trino JSON
functions as macros. Each filter also has its expected deliveries written out, so the two paths
cannot agree on a wrong answer.
"""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Any

import boto3
import pytest
from moto import mock_aws
from webhook_pipeline.archive.predicate import parse_predicate
from webhook_pipeline.archive.query import ArchiveFilter, search
from webhook_pipeline.archive.record import ArchiveRecord
from webhook_pipeline_ops.archive.athena import record_of
from webhook_pipeline_ops.archive.sql import search_sql

from tests.archive_fixture import BUCKET, T10, duckdb_athena, write_fixture

pytestmark = pytest.mark.integration

H = timedelta(hours=1)
W = {"start": T10, "end": T10 + 2 * H}
EVERY_ID_IN_W = [
    "stripe/evt_1", "github/evt_1", "stripe/evt_2", "stripe/evt_3", "stripe/evt_3",
    "stripe/evtAx", "stripe/evt%x", "stripe/evt_9", "stripe/evt_10", "stripe/evt_q",
    "stripe/evt_b", "stripe/evt_t", "stripe/evt_k", "stripe/evt_f", "stripe/evt_w",
    "github/evt_7", "stripe/evt_4",
]  # fmt: skip
INVOICES = ["stripe/evtAx", "stripe/evt%x", "stripe/evt_9", "stripe/evt_10"]
CHARGES_IN_W = [
    "stripe/evt_1", "stripe/evt_2", "stripe/evt_3", "stripe/evt_3", "stripe/evt_b",
    "stripe/evt_t", "stripe/evt_k", "stripe/evt_f", "stripe/evt_w", "stripe/evt_4",
]  # fmt: skip


def where(*texts: str) -> tuple[Any, ...]:
    return tuple(parse_predicate(t) for t in texts)


CASES: list[tuple[str, ArchiveFilter, list[str]]] = [
    ("window", ArchiveFilter(**W), EVERY_ID_IN_W),
    ("nothing", ArchiveFilter(), ["stripe/evt_6", *EVERY_ID_IN_W, "stripe/evt_5"]),
    ("start only", ArchiveFilter(start=T10), [*EVERY_ID_IN_W, "stripe/evt_5"]),
    ("end only", ArchiveFilter(end=T10), ["stripe/evt_6"]),
    (
        "one hour at an end",
        ArchiveFilter(start=T10 + H, end=T10 + 2 * H + timedelta(microseconds=1)),
        ["stripe/evt_4", "stripe/evt_5"],
    ),
    ("source", ArchiveFilter(sources=("github",), **W), ["github/evt_1", "github/evt_7"]),
    ("glob _ literal", ArchiveFilter(event_types=("invoice_paid",), **W), ["stripe/evtAx"]),
    ("glob % literal", ArchiveFilter(event_types=("invoice%paid",), **W), ["stripe/evt%x"]),
    ("glob ?", ArchiveFilter(event_types=("invoice?paid",), **W), INVOICES),
    (
        "globs",
        ArchiveFilter(event_types=("invoice*", "push"), **W),
        ["github/evt_1", *INVOICES, "github/evt_7"],
    ),
    ("glob .*", ArchiveFilter(event_types=("charge.*",), **W), CHARGES_IN_W),
    (
        "outcomes after dedupe",
        ArchiveFilter(outcomes=("stale", "duplicate"), **W),
        ["github/evt_7", "stripe/evt_4"],
    ),
    ("retry replaced", ArchiveFilter(outcomes=("retry",), **W), []),
    ("failed tie: earliest", ArchiveFilter(outcomes=("malformed",), **W), ["stripe/evt_f"]),
    ("unknown outcome", ArchiveFilter(outcomes=("weird",), **W), ["stripe/evt_w"]),
    (
        "resource key",
        ArchiveFilter(resource_key="cus_1", **W),
        ["stripe/evt_1", "stripe/evt_2", "stripe/evt_4"],
    ),
    (
        "prefix _ literal",
        ArchiveFilter(delivery_id_prefix="evt_", **W),
        [i for i in EVERY_ID_IN_W if i.split("/")[1].startswith("evt_")],
    ),
    ("prefix %", ArchiveFilter(delivery_id_prefix="evt%", **W), ["stripe/evt%x"]),
    (
        "prefix evt_1",
        ArchiveFilter(delivery_id_prefix="evt_1", **W),
        ["stripe/evt_1", "github/evt_1", "stripe/evt_10"],
    ),
    (
        "number >=",
        ArchiveFilter(where=where("data.object.amount>=1000"), **W),
        ["stripe/evt_1", "stripe/evt_2"],
    ),
    (
        "numeric string",
        ArchiveFilter(where=where('data.object.amount="2000"'), **W),
        ["stripe/evt_3"],
    ),
    (
        "number <=",
        ArchiveFilter(where=where("data.object.amount <= 999"), **W),
        ["stripe/evt_3", *INVOICES, "stripe/evt_4"],
    ),
    ("missing path and !=", ArchiveFilter(where=where("type!=charge"), **W), []),
    ("string !=", ArchiveFilter(where=where("ref!=refs/tags/v1"), **W), ["github/evt_1"]),
    ("contains", ArchiveFilter(where=where("note~quoted"), **W), ["stripe/evt_q"]),
    ("quotes", ArchiveFilter(where=where('note="it\'s \\"quoted\\""'), **W), ["stripe/evt_q"]),
    ("injection", ArchiveFilter(where=where("note=x' OR '1'='1"), **W), []),
    ("false", ArchiveFilter(where=where("livemode=false"), **W), ["stripe/evt_q"]),
    ("not true", ArchiveFilter(where=where("livemode!=true"), **W), ["stripe/evt_q"]),
    ("bool is no number", ArchiveFilter(where=where("livemode=0"), **W), []),
    ("null", ArchiveFilter(where=where("deleted=null"), **W), ["stripe/evt_q"]),
    ("not null", ArchiveFilter(where=where("deleted!=null"), **W), []),
    ("dash key", ArchiveFilter(where=where('"a-b"=1'), **W), ["stripe/evt_k"]),
    ("dotted key", ArchiveFilter(where=where('"x.y"=z'), **W), ["stripe/evt_k"]),
    ("index", ArchiveFilter(where=where("n[1]=2"), **W), ["stripe/evt_k"]),
    ("index out of range", ArchiveFilter(where=where("n[2]=3"), **W), []),
    ("nested index", ArchiveFilter(where=where("commits[0].id=c1"), **W), ["github/evt_1"]),
    ("an object is no scalar", ArchiveFilter(where=where("data.object>0"), **W), []),
    ("two predicates", ArchiveFilter(where=where("size>=0", "ref~tags"), **W), ["github/evt_7"]),
    (
        "everything",
        ArchiveFilter(
            sources=("stripe",),
            event_types=("charge.*",),
            outcomes=("applied",),
            resource_key="cus_1",
            delivery_id_prefix="evt_",
            where=where("data.object.amount>1000", "data.object.currency=usd"),
            **W,
        ),
        ["stripe/evt_1", "stripe/evt_2"],
    ),
]


def _identity(records: list[ArchiveRecord]) -> list[tuple[str, ...]]:
    return [(r.source, r.delivery_id, r.body_sha256, r.outcome, r.received_at) for r in records]


@pytest.fixture(scope="module")
def archive(tmp_path_factory: pytest.TempPathFactory) -> Any:
    folder: Path = tmp_path_factory.mktemp("archive")
    with mock_aws():
        s3 = boto3.client("s3", region_name="us-east-1")
        write_fixture(s3, folder)
        yield s3, duckdb_athena(folder, "archive_db", "deliveries")


@pytest.mark.parametrize(("flt", "expected"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_local_search_and_the_athena_sql_give_the_same_deliveries(
    archive: Any, flt: ArchiveFilter, expected: list[str]
) -> None:
    s3, duck = archive
    local = search(s3, BUCKET, flt)
    assert not local.problems
    assert [f"{r.source}/{r.delivery_id}" for r in local.records] == expected
    sources = list(flt.sources) or ["github", "stripe"]
    sql = search_sql(flt, "archive_db", "deliveries", sources)
    cursor = duck.execute(sql)
    names = [d[0] for d in cursor.description]
    rows = [
        {n: (None if v is None else str(v)) for n, v in zip(names, row, strict=True)}
        for row in cursor.fetchall()
    ]
    assert _identity([record_of(row) for row in rows]) == _identity(local.records)


def test_worker_processes_give_the_same_result(archive: Any) -> None:
    s3, _ = archive
    for _, flt, _ in CASES:
        alone = search(s3, BUCKET, flt)
        assert search(s3, BUCKET, flt, processes=2, workers=3) == alone


def test_the_sql_keeps_the_most_final_attempt_with_its_own_fields(archive: Any) -> None:
    s3, duck = archive
    flt = ArchiveFilter(delivery_id_prefix="evt_2", **W)
    sql = search_sql(flt, "archive_db", "deliveries", ["stripe"])
    (row,) = duck.execute(sql).fetchall()
    local = search(s3, BUCKET, flt).records
    assert [r.outcome for r in local] == ["applied"]
    assert "applied" in row and local[0].archived_at in row
