"""Reconciliation: every delivery the ingest function accepted is recorded or in the DLQ.

The proof of "nothing silently gone" (invariant I5, I9) for a deployed or local stack, without
the sender's log: the ingest function logs each delivery id it enqueued (``accepted`` and
``batch enqueued`` lines), the processor records each one in DynamoDB (the time index lists
them by receipt time), and what it could not apply sits in the dead-letter queue with a
reason. :func:`reconcile` compares the three, per source:

- **gaps**: accepted but neither recorded nor in the DLQ. A gap received before the settle
  window is *unexplained* (lost unless the main queue still holds it: see ``in_flight``); one
  received inside it may still be on its way.
- **recorded without an accepted line**: recorded deliveries whose acceptance was not logged in
  the window (a replay, a fail-open duplicate, log retention): listed, not an error.

The readers (CloudWatch Logs Insights or the local stack's log file, the time index, the DLQ
peek, the queue's attributes, the metrics) live in :mod:`webhook_pipeline_ops.commands.audit`.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

Key = tuple[str, str]  # (source, delivery id)


@dataclass(frozen=True)
class Accepted:
    """One delivery id the ingest function enqueued, and when (its log line's time)."""

    source: str
    delivery_id: str
    at: datetime


@dataclass
class SourceReport:
    """The reconciliation of one source."""

    accepted: int = 0
    recorded: int = 0
    applied: int = 0
    stale: int = 0
    in_dlq: int = 0
    gaps: list[str] = field(default_factory=list)
    unsettled: list[str] = field(default_factory=list)
    recorded_without_accepted: int = 0

    def as_dict(self) -> dict[str, Any]:
        return {
            "accepted": self.accepted,
            "recorded": self.recorded,
            "applied": self.applied,
            "stale": self.stale,
            "in_dlq": self.in_dlq,
            "gaps": sorted(self.gaps),
            "unsettled": sorted(self.unsettled),
            "recorded_without_accepted": self.recorded_without_accepted,
        }


@dataclass
class AuditReport:
    """What :func:`reconcile` found; ``ok`` when no settled gap exists."""

    window: tuple[datetime, datetime]
    settle_before: datetime
    sources: dict[str, SourceReport]
    in_flight: int | None
    metrics: dict[str, float]

    @property
    def gaps(self) -> int:
        return sum(len(r.gaps) for r in self.sources.values())

    @property
    def ok(self) -> bool:
        return self.gaps == 0

    def as_dict(self) -> dict[str, Any]:
        return {
            "window": [self.window[0].isoformat(), self.window[1].isoformat()],
            "settle_before": self.settle_before.isoformat(),
            "ok": self.ok,
            "gaps": self.gaps,
            "in_flight": self.in_flight,
            "metrics": self.metrics,
            "sources": {name: r.as_dict() for name, r in sorted(self.sources.items())},
        }


def reconcile(
    accepted: Iterable[Accepted],
    records: Iterable[dict[str, Any]],
    dead_letters: Iterable[Key],
    *,
    window: tuple[datetime, datetime],
    settle_before: datetime,
    in_flight: int | None = None,
    metrics: dict[str, float] | None = None,
) -> AuditReport:
    """Compare what was accepted with what was recorded and what was dead-lettered.

    Parameters
    ----------
    accepted : Iterable[Accepted]
        Every enqueued delivery id logged in ``window`` (duplicates of one id are one).
    records : Iterable[dict]
        Delivery records (``source``, ``delivery_id``, ``outcome``) received around the window.
    dead_letters : Iterable[tuple[str, str]]
        (source, delivery id) of every envelope in the DLQ.
    window : tuple[datetime, datetime]
        ``[since, until)`` the acceptances were read for.
    settle_before : datetime
        Acceptances at or after this time may still be on their way: reported as unsettled.
    in_flight : int | None
        Messages the main queue still holds (visible + in flight), when known.
    metrics : dict[str, float] | None
        Metric sums over the window, reported as they are (``Accepted``, ``DuplicateDiscarded``,
        ``Applied``, ``Duplicate``, ``Stale``...).
    """
    first_seen = _first_seen(accepted)
    outcome: dict[Key, str] = {
        (str(r["source"]), str(r["delivery_id"])): str(r.get("outcome", "")) for r in records
    }
    dlq = set(dead_letters)
    sources: dict[str, SourceReport] = defaultdict(SourceReport)
    outcomes: Counter[tuple[str, str]] = Counter()
    for (source, delivery_id), at in first_seen.items():
        report = sources[source]
        report.accepted += 1
        if (source, delivery_id) in outcome:
            report.recorded += 1
            outcomes[(source, outcome[(source, delivery_id)])] += 1
        elif (source, delivery_id) in dlq:
            report.in_dlq += 1
        elif at < settle_before:
            report.gaps.append(delivery_id)
        else:
            report.unsettled.append(delivery_id)
    _count_outcomes(sources, outcomes)
    for key in outcome.keys() - first_seen.keys():
        sources[key[0]].recorded_without_accepted += 1
    return AuditReport(
        window=window,
        settle_before=settle_before,
        sources=dict(sources),
        in_flight=in_flight,
        metrics=dict(metrics or {}),
    )


def _count_outcomes(sources: dict[str, SourceReport], outcomes: Counter[tuple[str, str]]) -> None:
    """Add the recorded ``applied`` and ``stale`` outcomes to their sources' reports."""
    for (source, state), n in outcomes.items():
        if state == "applied":
            sources[source].applied += n
        elif state == "stale":
            sources[source].stale += n


def _first_seen(accepted: Iterable[Accepted]) -> dict[Key, datetime]:
    """(source, delivery id) -> when it was first accepted (one id logged twice is one)."""
    first_seen: dict[Key, datetime] = {}
    for item in accepted:
        key = (item.source, item.delivery_id)
        if key not in first_seen or item.at < first_seen[key]:
            first_seen[key] = item.at
    return first_seen
