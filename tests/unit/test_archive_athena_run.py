"""The Athena call path's failure states (moto's Athena always succeeds at once; the successful
path runs against moto in tests/integration/test_archive_search_cli.py): a failed query is one
clear error with Athena's reason, a query still running at the timeout is stopped, and results
are read across pages with the header row skipped once."""

from __future__ import annotations

from typing import Any

import pytest
from webhook_pipeline_ops.archive.athena import AthenaTarget, run_query
from webhook_pipeline_ops.aws import OpsError

pytestmark = pytest.mark.unit

TARGET = AthenaTarget("db", "tbl", "wg")


class Athena:
    """Answers as Athena does: states in turn, then pages of results."""

    def __init__(self, states: list[str], pages: list[list[list[str]]] | None = None) -> None:
        self.states = states
        self.pages = pages or []
        self.stopped: list[str] = []
        self.started: list[dict[str, Any]] = []

    def start_query_execution(self, **kwargs: Any) -> dict[str, Any]:
        self.started.append(kwargs)
        return {"QueryExecutionId": "q-1"}

    def get_query_execution(self, QueryExecutionId: str) -> dict[str, Any]:
        state = self.states.pop(0) if len(self.states) > 1 else self.states[0]
        status = {"State": state, "StateChangeReason": "SYNTAX_ERROR: line 1:8"}
        return {"QueryExecution": {"Status": status}}

    def stop_query_execution(self, QueryExecutionId: str) -> None:
        self.stopped.append(QueryExecutionId)

    def get_paginator(self, name: str) -> Any:
        assert name == "get_query_results"
        pages = self.pages

        class Paginator:
            def paginate(self, **_: Any) -> Any:
                for page in pages:
                    rows = [{"Data": [{"VarCharValue": v} for v in row]} for row in page]
                    info = [{"Name": n} for n in pages[0][0]]
                    yield {"ResultSet": {"Rows": rows, "ResultSetMetadata": {"ColumnInfo": info}}}

        return Paginator()


def test_a_failed_query_is_one_error_with_athenas_reason() -> None:
    athena = Athena(["QUEUED", "RUNNING", "FAILED"])
    with pytest.raises(OpsError, match="q-1 FAILED: SYNTAX_ERROR: line 1:8"):
        list(run_query(athena, "SELECT 1", TARGET, sleep=lambda s: None))
    assert athena.started == [
        {"QueryString": "SELECT 1", "QueryExecutionContext": {"Database": "db"}, "WorkGroup": "wg"}
    ]


def test_a_query_still_running_at_the_timeout_is_stopped() -> None:
    athena = Athena(["RUNNING"])
    slept: list[float] = []
    with pytest.raises(OpsError, match="still RUNNING after 2 s"):
        list(run_query(athena, "SELECT 1", TARGET, poll_seconds=0.5, timeout_seconds=2,
                       sleep=slept.append))  # fmt: skip
    assert athena.stopped == ["q-1"]
    assert slept == [0.5, 0.5, 0.5, 0.5]


def test_rows_are_read_from_every_page_with_the_header_skipped_once() -> None:
    pages = [
        [["delivery_id", "outcome"], ["a", "applied"]],
        [["b", "stale"], ["delivery_id", "outcome"]],
    ]
    athena = Athena(["SUCCEEDED"], pages)
    rows = list(run_query(athena, "SELECT 1", TARGET, sleep=lambda s: None))
    assert [r["delivery_id"] for r in rows] == ["a", "b", "delivery_id"]
