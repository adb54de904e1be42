"""The SQL docs/archive.md gives users to paste into Athena runs, and selects what the search
selects (over the search fixture, in DuckDB with Athena's JSON functions as macros)."""

from __future__ import annotations

import re
from datetime import timedelta
from pathlib import Path

import pytest
from webhook_pipeline.archive.predicate import parse_predicate
from webhook_pipeline.archive.query import ArchiveFilter, search

from tests.archive_fixture import T10, duckdb_athena, write_fixture
from tests.helpers import ROOT

pytestmark = pytest.mark.integration


def sql_blocks() -> list[str]:
    text = (ROOT / "docs" / "archive.md").read_text()
    return re.findall(r"```sql\n(.*?)```", text, flags=re.DOTALL)


def test_the_documented_search_query_selects_what_the_search_selects(tmp_path: Path) -> None:
    from moto import mock_aws

    write_fixture(None, tmp_path)
    duck = duckdb_athena(tmp_path, "webhook_pipeline_archive", "deliveries")
    query = next(b for b in sql_blocks() if "webhook_pipeline_archive" in b and "LIKE" in b)
    rows = duck.execute(query).fetchall()
    flt = ArchiveFilter(
        sources=("stripe", "github"),
        start=T10,
        end=T10 + timedelta(hours=2),
        event_types=("charge.*",),
        where=(parse_predicate("data.object.amount>=1000"),),
    )
    with mock_aws():
        import boto3

        s3 = boto3.client("s3", region_name="us-east-1")
        write_fixture(s3, None)
        local = search(s3, "archive-fixture", flt).records
    assert [(r[0], r[1]) for r in rows] == [(r.source, r.delivery_id) for r in local]
    assert [r.delivery_id for r in local] == ["evt_1", "evt_2"]


def test_the_documented_hourly_counts_run_and_count_each_delivery_once(tmp_path: Path) -> None:
    write_fixture(None, tmp_path)
    duck = duckdb_athena(tmp_path, "webhook_pipeline_archive", "deliveries")
    query = next(b for b in sql_blocks() if "GROUP BY hour, outcome" in b)
    counts = {(hour, outcome): n for hour, outcome, n in duck.execute(query).fetchall()}
    # stripe at 10h: 14 deliveries (evt_2 once for three attempts, evt_3 twice: two bodies)
    assert counts[("2026-03-01-10", "applied")] == 12
    assert counts[("2026-03-01-10", "malformed")] == 1
    assert counts[("2026-03-01-10", "weird")] == 1
    assert ("2026-03-01-10", "retry") not in counts
    assert ("2026-03-01-10", "duplicate") not in counts
