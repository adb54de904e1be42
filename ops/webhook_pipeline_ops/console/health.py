"""The Health page's data: queue counters now, metric series over time, the alarms.

Series come from CloudWatch ``GetMetricData``, the metrics the template's dashboard and alarms
use (:data:`CHARTS`): SQS's queue metrics (depth, in flight, oldest message age) and the pipeline's
own (``Accepted``, ``DuplicateDiscarded``, ``SignatureInvalid`` + ``TimestampRejected`` as
"rejected", ``AckLatency``), with ``service = <stack>-ingest`` as Powertools publishes them.

On the local stack, CloudWatch is moto's: it has no SQS metrics and holds the pipeline's metrics
only if something puts them there (the local stack's functions print them as EMF log lines), and
it computes no percentiles. So locally the queue series are sampled by the console itself from the
queue attributes (:class:`QueueSampler`, every :data:`SAMPLE_SECONDS` since the console started),
the pipeline series are read from moto's CloudWatch all the same (averages and maxima instead of
percentiles) and a note on the page says when they are empty.

Alarms: ``DescribeAlarms`` with the stack's name as prefix (CloudFormation names them
``<stack>-<LogicalId>-<suffix>``, the local stack ``<stack>-<LogicalId>``). moto does not
evaluate alarms: locally they stay in the state they were created in.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from webhook_pipeline_ops.output import utc_time

if TYPE_CHECKING:
    from mypy_boto3_cloudwatch import CloudWatchClient

#: Seconds between two local queue samples, and how many are kept (one hour).
SAMPLE_SECONDS = 5.0
SAMPLES_KEPT = 720
#: Namespace of the pipeline's own metrics (template.yaml POWERTOOLS_METRICS_NAMESPACE).
NAMESPACE = "WebhookPipeline"


@dataclass(frozen=True)
class Metric:
    """One CloudWatch series of a chart."""

    key: str
    label: str
    namespace: str
    name: str
    dimension: str  # "main", "dlq" (QueueName) or "ingest" (service)
    stat: str
    local_stat: str | None = None  # what moto can compute instead (no percentiles)


@dataclass(frozen=True)
class Chart:
    """A chart of the Health page."""

    key: str
    title: str
    unit: str
    metrics: tuple[Metric, ...]
    sampled_locally: bool = False  # locally drawn from the console's own queue samples


def _ingest(key: str, label: str, name: str, stat: str = "Sum", local: str | None = None) -> Metric:
    return Metric(key, label, NAMESPACE, name, "ingest", stat, local)


CHARTS: tuple[Chart, ...] = (
    Chart(
        "queues",
        "Queue depth",
        "messages",
        (
            Metric(
                "main_visible",
                "main: visible",
                "AWS/SQS",
                "ApproximateNumberOfMessagesVisible",
                "main",
                "Maximum",
            ),
            Metric(
                "main_in_flight",
                "main: in flight",
                "AWS/SQS",
                "ApproximateNumberOfMessagesNotVisible",
                "main",
                "Maximum",
            ),
            Metric(
                "dlq_visible",
                "dead-letter queue",
                "AWS/SQS",
                "ApproximateNumberOfMessagesVisible",
                "dlq",
                "Maximum",
            ),
        ),
        sampled_locally=True,
    ),
    Chart(
        "age",
        "Oldest main-queue message",
        "seconds",
        (
            Metric(
                "oldest_age",
                "oldest message age",
                "AWS/SQS",
                "ApproximateAgeOfOldestMessage",
                "main",
                "Maximum",
            ),
        ),
    ),
    Chart(
        "ingest",
        "Ingest answers per minute",
        "requests / min",
        (
            _ingest("accepted", "accepted (202)", "Accepted"),
            _ingest("duplicate", "duplicate (200)", "DuplicateDiscarded"),
            _ingest("signature_invalid", "rejected: signature", "SignatureInvalid"),
            _ingest("timestamp_rejected", "rejected: timestamp", "TimestampRejected"),
        ),
    ),
    Chart(
        "latency",
        "Acknowledgement latency",
        "ms",
        (
            _ingest("ack_p50", "p50", "AckLatency", "p50", "Average"),
            _ingest("ack_p99", "p99", "AckLatency", "p99", "Maximum"),
        ),
    ),
)
#: Series added up into one (label, parts).
COMBINED = {"rejected": ("rejected (401)", ("signature_invalid", "timestamp_rejected"))}


@dataclass(frozen=True)
class Names:
    """What the metrics' dimensions refer to."""

    stack: str
    main_queue: str
    dlq: str

    @property
    def ingest_service(self) -> str:
        """``POWERTOOLS_SERVICE_NAME`` of the ingest function (template: ``<stack>-ingest``)."""
        return f"{self.stack}-ingest"

    def dimensions(self, metric: Metric) -> list[dict[str, str]]:
        if metric.dimension == "ingest":
            return [{"Name": "service", "Value": self.ingest_service}]
        queue = self.main_queue if metric.dimension == "main" else self.dlq
        return [{"Name": "QueueName", "Value": queue}]


def queue_name(url: str) -> str:
    """The queue name at the end of a queue URL."""
    return url.rstrip("/").rsplit("/", 1)[-1]


def metric_series(
    cloudwatch: CloudWatchClient,
    names: Names,
    *,
    local: bool,
    minutes: int = 180,
    period: int = 60,
    now: datetime | None = None,
    charts: tuple[Chart, ...] = CHARTS,
) -> dict[str, dict[str, Any]]:
    """Every chart's CloudWatch series over the last ``minutes``.

    Returns
    -------
    dict
        ``key -> {"label", "chart", "t": [epoch seconds], "v": [values]}``, oldest point first,
        one entry per :class:`Metric` (and per :data:`COMBINED` series). Charts drawn from the
        console's own samples locally are left out when ``local``.

    Raises
    ------
    botocore.exceptions.ClientError, botocore.exceptions.BotoCoreError
        CloudWatch failed (no permission, no connection).
    """
    now = now or datetime.now(UTC)
    metrics = [
        (chart, metric)
        for chart in charts
        if not (local and chart.sampled_locally)
        for metric in chart.metrics
    ]
    queries = [_query(metric, names, local=local, period=period) for _, metric in metrics]
    points = _fetch(cloudwatch, queries, start=now - timedelta(minutes=minutes), end=now)
    out: dict[str, dict[str, Any]] = {}
    for chart, metric in metrics:
        stamps = sorted(points[metric.key])
        out[metric.key] = {
            "label": metric.label,
            "chart": chart.key,
            "t": stamps,
            "v": [points[metric.key][s] for s in stamps],
        }
    _combine(out)
    return out


def _query(metric: Metric, names: Names, *, local: bool, period: int) -> dict[str, Any]:
    """One ``MetricDataQueries`` entry of ``GetMetricData``."""
    return {
        "Id": metric.key,
        "Label": metric.label,
        "MetricStat": {
            "Metric": {
                "Namespace": metric.namespace,
                "MetricName": metric.name,
                "Dimensions": names.dimensions(metric),
            },
            "Period": period,
            "Stat": (metric.local_stat or metric.stat) if local else metric.stat,
        },
        "ReturnData": True,
    }


def _fetch(
    cloudwatch: CloudWatchClient, queries: list[dict[str, Any]], *, start: datetime, end: datetime
) -> dict[str, dict[float, float]]:
    """Query id -> ``{epoch seconds: value}``, every page of ``GetMetricData`` read."""
    points: dict[str, dict[float, float]] = {query["Id"]: {} for query in queries}
    request: dict[str, Any] = {
        "MetricDataQueries": queries,
        "StartTime": start,
        "EndTime": end,
        "ScanBy": "TimestampAscending",
    }
    while queries:
        response = cloudwatch.get_metric_data(**request)
        for result in response.get("MetricDataResults", []):
            series = points.get(result["Id"])
            if series is None:
                continue
            for stamp, value in zip(
                result.get("Timestamps", []), result.get("Values", []), strict=False
            ):
                series[stamp.timestamp()] = float(value)
        token = response.get("NextToken")
        if not token:
            break
        request["NextToken"] = token
    return points


def _combine(out: dict[str, dict[str, Any]]) -> None:
    """Add the :data:`COMBINED` series (sums of their parts, which are then hidden) to ``out``."""
    for key, (label, parts) in COMBINED.items():
        if all(part in out for part in parts):
            total: dict[float, float] = {}
            for part in parts:
                for stamp, value in zip(out[part]["t"], out[part]["v"], strict=True):
                    total[stamp] = total.get(stamp, 0.0) + value
            stamps = sorted(total)
            chart = out[parts[0]]["chart"]
            out[key] = {
                "label": label,
                "chart": chart,
                "t": stamps,
                "v": [total[s] for s in stamps],
            }
            for part in parts:
                out[part]["hidden"] = True  # drawn as their sum


#: The state shown for every alarm of the local stack: moto stores alarms, never evaluates them.
NOT_EVALUATED = "NOT EVALUATED"
NOT_EVALUATED_REASON = (
    "not evaluated locally: the local stack's CloudWatch (moto) keeps the alarm as created "
    "(state {state}, {reason!r}) and never evaluates it"
)


def alarms(cloudwatch: CloudWatchClient, stack: str, local: bool = False) -> list[dict[str, Any]]:
    """The stack's CloudWatch alarms: name (without the stack prefix), state, why, since when
    (:func:`webhook_pipeline_ops.output.utc_time`). With ``local`` every state is
    :data:`NOT_EVALUATED` and the reason says why (moto's "OK / Unchecked: Initial alarm
    creation" is no evaluation).

    Raises
    ------
    botocore.exceptions.ClientError, botocore.exceptions.BotoCoreError
        CloudWatch failed.
    """
    rows: list[dict[str, Any]] = []
    paginator = cloudwatch.get_paginator("describe_alarms")
    for page in paginator.paginate(AlarmNamePrefix=f"{stack}-"):
        for alarm in [*page.get("MetricAlarms", []), *page.get("CompositeAlarms", [])]:
            updated = alarm.get("StateUpdatedTimestamp")
            state, reason = alarm.get("StateValue", "?"), alarm.get("StateReason", "")
            if local:
                state, reason = (
                    NOT_EVALUATED,
                    NOT_EVALUATED_REASON.format(state=state, reason=reason),
                )
            rows.append(
                {
                    "name": alarm["AlarmName"].removeprefix(f"{stack}-"),
                    "full_name": alarm["AlarmName"],
                    "state": state,
                    "reason": reason,
                    "since": utc_time(updated) if updated else None,
                    "description": alarm.get("AlarmDescription", ""),
                }
            )
    order = {"ALARM": 0, "INSUFFICIENT_DATA": 1, "OK": 2}
    rows.sort(key=lambda r: (order.get(r["state"], 3), r["name"]))
    return rows


@dataclass
class QueueSampler:
    """Samples the queues' counters every ``interval`` seconds on a thread (the local stack has
    no SQS metrics). ``read`` returns ``{"main_visible": n, "main_in_flight": n, "dlq_visible":
    n}`` and may raise (a failed sample is skipped)."""

    read: Callable[[], dict[str, int]]
    interval: float = SAMPLE_SECONDS
    kept: int = SAMPLES_KEPT
    samples: deque[tuple[float, dict[str, int]]] = field(init=False)
    _stop: threading.Event = field(init=False, default_factory=threading.Event)
    _thread: threading.Thread | None = field(init=False, default=None)
    _lock: threading.Lock = field(init=False, default_factory=threading.Lock)

    def __post_init__(self) -> None:
        self.samples = deque(maxlen=self.kept)

    def start(self) -> None:
        """Take samples until :meth:`stop`."""
        self._thread = threading.Thread(target=self._run, name="console-sampler", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stop sampling and wait for the thread."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)
            self._thread = None

    def sample(self) -> None:
        """Take one sample now (failures are skipped: the stack may be stopping)."""
        try:
            values = self.read()
        except Exception:  # any failure only means "no point this time"
            return
        with self._lock:
            self.samples.append((time.time(), values))

    def series(self) -> dict[str, dict[str, Any]]:
        """The samples as chart series (the ``queues`` chart's keys)."""
        with self._lock:
            samples = list(self.samples)
        chart = next(c for c in CHARTS if c.key == "queues")
        return {
            metric.key: {
                "label": metric.label,
                "chart": chart.key,
                "t": [stamp for stamp, _ in samples],
                "v": [float(values.get(metric.key, 0)) for _, values in samples],
            }
            for metric in chart.metrics
        }

    def _run(self) -> None:
        while not self._stop.is_set():
            self.sample()
            self._stop.wait(self.interval)
