"""One archive fixture for the search tests: the same gzip JSON Lines objects in moto S3 (for
``query.search``) and on disk (for the generated SQL run in DuckDB, standing in for Athena).

What it holds, so that a filter tells right from plausibly wrong: two sources with one delivery
id, a delivery archived three times with three outcomes in two objects, one delivery id with two
bodies, deliveries exactly at a window's start and end and just outside, event types with ``%``,
``_`` and ``.``, delivery ids with ``_`` and ``%``, numbers and numeric strings, a quote in a
value, ``null``/``false``, keys with ``-`` and ``.``, a body that is not JSON and one that is not
UTF-8.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from webhook_pipeline.archive.record import (
    ArchiveRecord,
    encode_object,
    format_time,
    hour_of,
    object_key,
)
from webhook_pipeline.envelope import sha256_hex

BUCKET = "archive-fixture"
T10 = datetime(2026, 3, 1, 10, 0, tzinfo=UTC)


def record(
    source: str,
    delivery_id: str,
    received: datetime,
    *,
    outcome: str = "applied",
    archived: timedelta = timedelta(seconds=1),
    event_type: str | None = "charge.succeeded",
    resource_key: str | None = None,
    body: Any = None,
    raw: bytes | None = None,
) -> ArchiveRecord:
    """One archived attempt (``body`` as JSON, or ``raw`` bytes)."""
    data = raw if raw is not None else json.dumps(body if body is not None else {}).encode()
    return ArchiveRecord(
        source=source,
        delivery_id=delivery_id,
        event_type=event_type,
        resource_key=resource_key,
        received_at=format_time(received),
        body_sha256=sha256_hex(data),
        body_size=len(data),
        headers={"content-type": "application/json"},
        outcome=outcome,
        archived_at=format_time(received + archived),
        **ArchiveRecord.body_fields(data),
    )


def charge(amount: Any, currency: str = "usd", **more: Any) -> dict[str, Any]:
    return {"type": "charge", "data": {"object": {"amount": amount, "currency": currency}}, **more}


def attempts() -> list[list[ArchiveRecord]]:
    """The fixture's objects, each a list of records of one (source, hour)."""
    m = timedelta(minutes=1)
    s = timedelta(seconds=1)
    evt2 = dict(body=charge(2500), resource_key="cus_1")
    return [
        [  # stripe, 10h, first object
            record("stripe", "evt_1", T10, body=charge(1500), resource_key="cus_1"),
            record("stripe", "evt_2", T10 + 10 * m, outcome="retry", archived=s, **evt2),
            record("stripe", "evt_3", T10 + 20 * m, body=charge("2000")),
            record("stripe", "evt_3", T10 + 21 * m, body=charge(999)),  # one id, two bodies
            record("stripe", "evtAx", T10 + 22 * m, event_type="invoice_paid", body=charge(1)),
            record("stripe", "evt%x", T10 + 23 * m, event_type="invoice%paid", body=charge(2)),
            record("stripe", "evt_9", T10 + 24 * m, event_type="invoiceXpaid", body=charge(3)),
            record("stripe", "evt_10", T10 + 25 * m, event_type="invoice.paid", body=charge(4)),
        ],
        [  # stripe, 10h, second object: more attempts of evt_2
            record("stripe", "evt_2", T10 + 10 * m, outcome="duplicate", archived=3 * s, **evt2),
            record("stripe", "evt_2", T10 + 10 * m, outcome="applied", archived=5 * s, **evt2),
            record(
                "stripe",
                "evt_q",
                T10 + 30 * m,
                event_type=None,
                body={"note": 'it\'s "quoted"', "livemode": False, "deleted": None},
            ),
            record("stripe", "evt_b", T10 + 31 * m, raw=b"\xff\xfe not utf-8"),
            record("stripe", "evt_t", T10 + 32 * m, raw=b"amount=5 (not JSON)"),
            record("stripe", "evt_k", T10 + 33 * m, body={"a-b": 1, "x.y": "z", "n": [1, 2]}),
            record("stripe", "evt_f", T10 + 34 * m, outcome="malformed", archived=2 * s),
            record("stripe", "evt_f", T10 + 34 * m, outcome="retry", archived=4 * s),
            record("stripe", "evt_w", T10 + 35 * m, outcome="weird", resource_key="cus_2"),
        ],
        [  # stripe, 11h: the last microsecond of the window
            record(
                "stripe",
                "evt_4",
                T10 + 2 * 60 * m - timedelta(microseconds=1),
                outcome="stale",
                body=charge(999),
                resource_key="cus_1",
            ),
        ],
        [  # stripe, 12h: exactly at the window's end (excluded)
            record("stripe", "evt_5", T10 + 2 * 60 * m, body=charge(5000)),
        ],
        [  # stripe, 9h: just before the window's start
            record("stripe", "evt_6", T10 - timedelta(microseconds=1), body=charge(7000)),
        ],
        [  # github, 10h: the same id as a stripe delivery
            record(
                "github",
                "evt_1",
                T10 + 5 * m,
                event_type="push",
                body={"ref": "refs/heads/main", "commits": [{"id": "c1"}], "size": 3},
            ),
            record(
                "github",
                "evt_7",
                T10 + 40 * m,
                event_type="push",
                outcome="stale",
                body={"ref": "refs/tags/v1", "commits": [], "size": 0},
            ),
        ],
    ]


def write_fixture(s3: Any | None, folder: Path | None) -> list[str]:
    """Write every object to ``s3`` (bucket :data:`BUCKET`, created) and under ``folder``
    (same keys); return the keys."""
    if s3 is not None:
        s3.create_bucket(Bucket=BUCKET)
    keys = []
    for number, records in enumerate(attempts()):
        first = records[0]
        hour = hour_of(first.received)
        key = object_key(first.source, hour, T10 + timedelta(hours=5), unique=f"{number:032x}")
        data = encode_object(records)
        if s3 is not None:
            s3.put_object(Bucket=BUCKET, Key=key, Body=data)
        if folder is not None:
            path = folder / key
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(data)
        keys.append(key)
    return keys


def duckdb_athena(folder: Path, database: str, table: str) -> Any:
    """A DuckDB connection where ``"database"."table"`` reads the fixture under ``folder`` as the
    Athena table does (partition columns ``source`` and ``hour`` from the Hive-style keys), with
    the Presto/Trino JSON functions the generated SQL uses defined as macros."""
    import duckdb
    from webhook_pipeline_ops.archive.sql import COLUMNS

    types = {"sequence", "body_size", "receive_count", "replay_count", "batch_index", "batch_count"}
    columns = {c: ("BIGINT" if c in types else "VARCHAR") for c in COLUMNS if c != "source"}
    spec = ", ".join(f"'{name}': '{kind}'" for name, kind in columns.items())
    con = duckdb.connect()
    # Athena's json_extract: NULL for text that is not JSON; paths ["key"] as DuckDB's ."key"
    con.execute(
        "CREATE MACRO json_extract(j, p) AS CASE WHEN json_valid(j) THEN system.main.json_extract("
        "j, replace(replace(p, '[\"', '.\"'), '\"]', '\"')) END"
    )
    con.execute(
        "CREATE MACRO json_extract_scalar(j, p) AS CASE WHEN json_type(json_extract(j, p)) "
        "NOT IN ('OBJECT', 'ARRAY') THEN json_extract_string(json_extract(j, p), '$') END"
    )
    con.execute("CREATE MACRO json_format(j) AS CAST(j AS VARCHAR)")
    con.execute(f'CREATE SCHEMA "{database}"')
    con.execute(
        f'CREATE VIEW "{database}"."{table}" AS SELECT * FROM read_json('
        f"'{folder}/archive/*/*/*.jsonl.gz', format = 'newline_delimited', "
        "hive_partitioning = true, hive_types = {'source': 'VARCHAR', 'hour': 'VARCHAR'}, "
        f"columns = {{{spec}}})"
    )
    return con
