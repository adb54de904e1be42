"""Running an archive search in Athena: start the query, poll it, page through its results and
map the rows back to :class:`~webhook_pipeline.archive.record.ArchiveRecord` (the SQL:
:mod:`webhook_pipeline_ops.archive.sql`)."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from webhook_pipeline.archive.query import ArchiveFilter, SearchResult
from webhook_pipeline.archive.record import ArchiveRecord, LineProblem

from webhook_pipeline_ops.archive.sql import COLUMNS, search_sql
from webhook_pipeline_ops.aws import OpsError

#: Integer columns (Athena returns every value as text).
INTEGER_COLUMNS = frozenset(
    {"sequence", "body_size", "receive_count", "replay_count", "batch_index", "batch_count"}
)
FINISHED = frozenset({"SUCCEEDED", "FAILED", "CANCELLED"})


@dataclass(frozen=True)
class AthenaTarget:
    """Where the archive table is: Glue ``database`` and ``table``, Athena ``workgroup`` (stack
    outputs ``ArchiveDatabaseName``, ``ArchiveTableName``, ``ArchiveWorkGroupName``)."""

    database: str
    table: str
    workgroup: str


def run_query(
    athena: Any,
    sql: str,
    target: AthenaTarget,
    *,
    poll_seconds: float = 0.5,
    timeout_seconds: float = 600.0,
    sleep: Callable[[float], None] = time.sleep,
) -> Iterator[dict[str, str | None]]:
    """Run ``sql`` in ``target.workgroup`` and yield each result row as ``{column: text or
    None}`` (every page of ``GetQueryResults``; the header row skipped).

    Raises
    ------
    OpsError
        The query failed, was cancelled, or did not finish within ``timeout_seconds``.
    """
    started = athena.start_query_execution(
        QueryString=sql,
        QueryExecutionContext={"Database": target.database},
        WorkGroup=target.workgroup,
    )
    query_id = started["QueryExecutionId"]
    waited = 0.0
    while True:
        status = athena.get_query_execution(QueryExecutionId=query_id)["QueryExecution"]["Status"]
        state = status["State"]
        if state in FINISHED:
            break
        if waited >= timeout_seconds:
            athena.stop_query_execution(QueryExecutionId=query_id)
            raise OpsError(f"Athena query {query_id} still {state} after {timeout_seconds:g} s")
        sleep(poll_seconds)
        waited += poll_seconds
    if state != "SUCCEEDED":
        reason = status.get("StateChangeReason", "")
        raise OpsError(f"Athena query {query_id} {state}: {reason}")
    yield from _rows(athena, query_id)


def _rows(athena: Any, query_id: str) -> Iterator[dict[str, str | None]]:
    paginator = athena.get_paginator("get_query_results")
    names: list[str] | None = None
    for page in paginator.paginate(QueryExecutionId=query_id):
        result_set = page["ResultSet"]
        rows = result_set.get("Rows", [])
        if names is None:
            info = result_set.get("ResultSetMetadata", {}).get("ColumnInfo", [])
            names = [c["Name"] for c in info] or list(COLUMNS)
            if rows and [cell.get("VarCharValue") for cell in rows[0].get("Data", [])] == names:
                rows = rows[1:]  # a SELECT's first page starts with the header row
        for row in rows:
            values = [cell.get("VarCharValue") for cell in row.get("Data", [])]
            yield dict(zip(names, values, strict=False))


def record_of(row: dict[str, str | None]) -> ArchiveRecord:
    """An :class:`ArchiveRecord` from one result row (``NULL`` -> field left out).

    Raises
    ------
    pydantic.ValidationError
        The row is not a record.
    """
    fields: dict[str, Any] = {}
    for name, value in row.items():
        if value is None or name not in COLUMNS:
            continue
        fields[name] = int(value) if name in INTEGER_COLUMNS else value
    return ArchiveRecord.model_validate(fields)


def athena_search(
    athena: Any,
    target: AthenaTarget,
    flt: ArchiveFilter,
    sources: list[str],
    **poll: Any,
) -> SearchResult:
    """What :func:`webhook_pipeline.archive.query.search` gives, from one Athena query over
    ``sources`` (a row that is not a record is a problem keyed ``athena:<delivery id>``;
    ``objects_read`` is 0: Athena reads them)."""
    from pydantic import ValidationError

    result = SearchResult()
    sql = search_sql(flt, target.database, target.table, sources)
    for row in run_query(athena, sql, target, **poll):
        try:
            result.records.append(record_of(row))
        except (ValidationError, ValueError) as exc:
            problem = f"not a record: {type(exc).__name__}"
            result.problems.append(LineProblem(f"athena:{row.get('delivery_id')}", 0, problem))
    return result
