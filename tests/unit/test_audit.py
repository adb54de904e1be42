"""The reconciliation and its readers (log lines, Logs Insights answers)."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from webhook_pipeline_ops.audit import Accepted, reconcile
from webhook_pipeline_ops.audit_evidence import INSIGHTS_LIMIT, from_insights, from_log_lines
from webhook_pipeline_ops.aws import OpsError
from webhook_pipeline_ops.commands.audit import parse_time

pytestmark = pytest.mark.unit

T0 = datetime(2026, 12, 1, 10, 0, tzinfo=UTC)
WINDOW = (T0, T0 + timedelta(hours=1))


def acc(source: str, delivery_id: str, minutes: float = 1) -> Accepted:
    return Accepted(source, delivery_id, T0 + timedelta(minutes=minutes))


def test_every_accepted_delivery_recorded_or_dead_lettered_is_ok() -> None:
    report = reconcile(
        [acc("stripe", "a"), acc("stripe", "b"), acc("stripe", "a", 2), acc("github", "g")],
        [
            {"source": "stripe", "delivery_id": "a", "outcome": "applied"},
            {"source": "stripe", "delivery_id": "b", "outcome": "stale"},
        ],
        [("github", "g")],
        window=WINDOW,
        settle_before=T0 + timedelta(minutes=55),
    )
    assert report.ok and report.gaps == 0
    stripe, github = report.sources["stripe"], report.sources["github"]
    assert (stripe.accepted, stripe.recorded, stripe.applied, stripe.stale) == (2, 2, 1, 1)
    assert (github.accepted, github.in_dlq) == (1, 1)


def test_an_accepted_delivery_neither_recorded_nor_dead_lettered_is_a_gap() -> None:
    report = reconcile(
        [acc("stripe", "lost", 5), acc("stripe", "late", 58)],
        [{"source": "stripe", "delivery_id": "replayed", "outcome": "applied"}],
        [],
        window=WINDOW,
        settle_before=T0 + timedelta(minutes=55),
        in_flight=0,
    )
    assert not report.ok and report.gaps == 1
    stripe = report.sources["stripe"]
    assert (stripe.gaps, stripe.unsettled) == (["lost"], ["late"])
    assert stripe.recorded_without_accepted == 1
    doc = report.as_dict()
    assert doc["sources"]["stripe"]["gaps"] == ["lost"] and doc["ok"] is False


def test_a_record_or_dlq_entry_of_another_source_with_the_same_id_accounts_for_nothing() -> None:
    """Delivery ids are unique per source only: stripe's ``evt_1`` and ``evt_2`` are not
    accounted for by github's ``evt_1`` in the DLQ or github's ``evt_2`` in the table."""
    report = reconcile(
        [acc("stripe", "evt_1"), acc("stripe", "evt_2"), acc("github", "evt_1")],
        [{"source": "github", "delivery_id": "evt_2", "outcome": "applied"}],
        [("github", "evt_1")],
        window=WINDOW,
        settle_before=T0 + timedelta(minutes=55),
    )
    assert not report.ok and report.gaps == 2
    stripe, github = report.sources["stripe"], report.sources["github"]
    assert (stripe.gaps, stripe.recorded, stripe.in_dlq) == (["evt_1", "evt_2"], 0, 0)
    assert (github.gaps, github.in_dlq, github.recorded_without_accepted) == ([], 1, 1)


def test_parse_time_reads_durations_and_iso_times() -> None:
    now = T0
    assert parse_time("90m", now) == now - timedelta(minutes=90)
    assert parse_time("1d", now) == now - timedelta(days=1)
    assert parse_time("2026-12-01T09:00:00Z", now) == datetime(2026, 12, 1, 9, tzinfo=UTC)
    assert parse_time("2026-12-01T09:00:00", now).tzinfo is UTC
    with pytest.raises(OpsError):
        parse_time("yesterday", now)


FORMAT = "%Y-%m-%d %H:%M:%S,%f%z"


def stamp(at: datetime) -> str:
    """A Powertools log timestamp (milliseconds)."""
    return at.strftime("%Y-%m-%d %H:%M:%S,%f")[:-3] + "+0000"


def line(message: str, minute: float, **extra: Any) -> dict[str, Any]:
    at = stamp(T0 + timedelta(minutes=minute))
    return {"level": "INFO", "message": message, "timestamp": at, **extra}


def test_log_lines_give_single_and_batch_acceptances_and_metric_sums() -> None:
    emf = {
        "_aws": {
            "Timestamp": int((T0 + timedelta(minutes=3)).timestamp() * 1000),
            "CloudWatchMetrics": [{"Metrics": [{"Name": "Accepted"}, {"Name": "AckLatency"}]}],
        },
        "Accepted": [1, 2],
        "AckLatency": 3.5,
    }
    docs = [
        line("accepted", 1, source="stripe", delivery_id="evt_1"),
        line("batch enqueued", 2, source="sendgrid", delivery_ids=["sg-1", "sg-2"]),
        line("duplicate discarded at the gate", 2, source="stripe", delivery_id="evt_1"),
        line("accepted", 90, source="stripe", delivery_id="after-window"),
        emf,
    ]
    accepted, metrics = from_log_lines(docs, *WINDOW)
    assert [(a.source, a.delivery_id) for a in accepted] == [
        ("stripe", "evt_1"),
        ("sendgrid", "sg-1"),
        ("sendgrid", "sg-2"),
    ]
    assert metrics == {"Accepted": 3.0, "AckLatency": 3.5}


class FakeLogs:
    """Logs Insights that answers from lines, at most ``INSIGHTS_LIMIT`` rows per query."""

    def __init__(self, docs: list[dict[str, Any]]) -> None:
        self.docs, self.queries = docs, []

    def start_query(self, **kw: Any) -> dict[str, str]:
        self.queries.append((kw["startTime"], kw["endTime"]))
        return {"queryId": str(len(self.queries) - 1)}

    def get_query_results(self, queryId: str) -> dict[str, Any]:
        start, end = self.queries[int(queryId)]
        rows = [
            [{"field": "@message", "value": json.dumps(d)}]
            for d in self.docs
            if start
            <= datetime.strptime(d["timestamp"], "%Y-%m-%d %H:%M:%S,%f%z").timestamp()
            < end
        ]
        return {"status": "Complete", "results": rows[:INSIGHTS_LIMIT]}


def test_insights_answers_that_hit_the_row_limit_are_split_until_complete() -> None:
    docs = [
        line("accepted", 0, source="stripe", delivery_id=f"evt_{i}")
        | {
            "timestamp": (T0 + timedelta(seconds=i * 0.3)).strftime("%Y-%m-%d %H:%M:%S,%f")[:-3]
            + "+0000"
        }
        for i in range(INSIGHTS_LIMIT + 500)
    ]
    logs = FakeLogs(docs)
    accepted = from_insights(logs, "g", T0, T0 + timedelta(hours=1), poll_seconds=0)
    assert len({a.delivery_id for a in accepted}) == INSIGHTS_LIMIT + 500
    assert len(logs.queries) >= 3
