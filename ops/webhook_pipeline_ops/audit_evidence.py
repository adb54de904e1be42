"""What ``webhook-pipeline audit`` reconciles (:mod:`.audit`), gathered: the accepted delivery
ids from the ingest function's JSON log lines (:func:`from_log_lines`, the local stack's files)
or from CloudWatch Logs Insights (:func:`from_insights`, a deployed stack, the window split
while a query hits :data:`INSIGHTS_LIMIT`), the metric sums from CloudWatch
(:func:`metric_sums`), the dead-lettered (source, delivery id) pairs from a DLQ peek
(:func:`dead_letter_keys`) and the main queue's in-flight count (:func:`in_flight`)."""

from __future__ import annotations

import json
import time
from collections.abc import Iterable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

from webhook_pipeline_ops.audit import Accepted, Key
from webhook_pipeline_ops.aws import Aws, OpsError

if TYPE_CHECKING:
    from mypy_boto3_cloudwatch import CloudWatchClient
    from mypy_boto3_cloudwatch.type_defs import MetricDataQueryTypeDef
    from mypy_boto3_logs import CloudWatchLogsClient

ACCEPTED_MESSAGES = frozenset({"accepted", "batch enqueued"})
INGEST_METRICS = ("Accepted", "DuplicateDiscarded", "SignatureInvalid", "EnqueueFailed")
PROCESSOR_METRICS = ("Applied", "Duplicate", "Stale", "Malformed", "Retry")
#: Logs Insights returns at most this many rows per query; a full answer splits the window.
INSIGHTS_LIMIT = 10_000


def json_lines(paths: Iterable[Path]) -> Iterator[dict[str, Any]]:
    """Every JSON object of the files, one per line (text before the first ``{`` is ignored:
    a line may carry a prefix such as a function name)."""
    for path in paths:
        with path.open(errors="replace") as fh:
            for line in fh:
                start = line.find("{")
                if start < 0:
                    continue
                try:
                    doc = json.loads(line[start:])
                except ValueError:
                    continue
                if isinstance(doc, dict):
                    yield doc


def log_time(doc: dict[str, Any]) -> datetime | None:
    """The time of a Powertools log line (``2026-12-01 11:42:51,389+0000``) or of an EMF line
    (``_aws.Timestamp`` in milliseconds)."""
    value = doc.get("timestamp")
    if isinstance(value, str):
        try:
            return datetime.strptime(value, "%Y-%m-%d %H:%M:%S,%f%z")
        except ValueError:
            return None
    stamp = (doc.get("_aws") or {}).get("Timestamp") if isinstance(doc.get("_aws"), dict) else None
    return datetime.fromtimestamp(stamp / 1000, UTC) if isinstance(stamp, int | float) else None


def accepted_in(doc: dict[str, Any], at: datetime) -> list[Accepted]:
    """The acceptances one ingest log line records (none for other lines)."""
    if doc.get("message") not in ACCEPTED_MESSAGES or not isinstance(doc.get("source"), str):
        return []
    ids = (
        doc.get("delivery_ids") if doc["message"] == "batch enqueued" else [doc.get("delivery_id")]
    )
    return [Accepted(doc["source"], str(i), at) for i in ids or [] if i]


def from_log_lines(
    docs: Iterable[dict[str, Any]], since: datetime, until: datetime
) -> tuple[list[Accepted], dict[str, float]]:
    """Acceptances and metric sums (EMF lines) in ``[since, until)``."""
    accepted: list[Accepted] = []
    metrics: dict[str, float] = {}
    for doc in docs:
        at = log_time(doc)
        if at is None or not since <= at < until:
            continue
        accepted += accepted_in(doc, at)
        if isinstance(doc.get("_aws"), dict):
            for definition in doc["_aws"].get("CloudWatchMetrics", []):
                for metric in definition.get("Metrics", []):
                    value = doc.get(metric.get("Name"))
                    total = sum(value) if isinstance(value, list) else value
                    if isinstance(total, int | float):
                        metrics[metric["Name"]] = metrics.get(metric["Name"], 0.0) + total
    return accepted, metrics


# -- acceptances and metrics of a deployed stack -----------------------------------------------


def from_insights(
    logs: CloudWatchLogsClient,
    log_group: str,
    since: datetime,
    until: datetime,
    poll_seconds: float = 1.0,
) -> list[Accepted]:
    """Acceptances in the ingest log group through Logs Insights; a window whose answer hits
    the 10,000-row limit is split in two and read again."""
    query = (
        "fields @timestamp, @message | filter message in ['accepted', 'batch enqueued'] "
        f"| sort @timestamp asc | limit {INSIGHTS_LIMIT}"
    )
    started = logs.start_query(
        logGroupName=log_group,
        startTime=int(since.timestamp()),
        endTime=int(until.timestamp()),
        queryString=query,
    )
    while True:
        answer = logs.get_query_results(queryId=started["queryId"])
        if answer["status"] in ("Complete", "Failed", "Cancelled", "Timeout"):
            break
        time.sleep(poll_seconds)
    if answer["status"] != "Complete":
        raise OpsError(f"Logs Insights query on {log_group} ended {answer['status']}")
    rows = answer.get("results", [])
    if len(rows) >= INSIGHTS_LIMIT and until - since > timedelta(seconds=2):
        middle = since + (until - since) / 2
        return from_insights(logs, log_group, since, middle, poll_seconds) + from_insights(
            logs, log_group, middle, until, poll_seconds
        )
    accepted: list[Accepted] = []
    for row in rows:
        fields = {f["field"]: f["value"] for f in row}
        try:
            doc = json.loads(fields.get("@message", ""))
        except ValueError:
            continue
        at = log_time(doc) or since
        accepted += accepted_in(doc, at)
    return accepted


def metric_sums(
    cloudwatch: CloudWatchClient, stack: str, since: datetime, until: datetime
) -> dict[str, float]:
    """Sums of the pipeline's counters over the window (namespace ``WebhookPipeline``)."""
    queries: list[MetricDataQueryTypeDef] = []
    for names, service in ((INGEST_METRICS, "ingest"), (PROCESSOR_METRICS, "processor")):
        for name in names:
            queries.append(
                {
                    "Id": f"m{len(queries)}",
                    "Label": name,
                    "MetricStat": {
                        "Metric": {
                            "Namespace": "WebhookPipeline",
                            "MetricName": name,
                            "Dimensions": [{"Name": "service", "Value": f"{stack}-{service}"}],
                        },
                        "Period": 60,
                        "Stat": "Sum",
                    },
                }
            )
    answer = cloudwatch.get_metric_data(
        MetricDataQueries=queries, StartTime=since, EndTime=until, ScanBy="TimestampAscending"
    )
    return {r["Label"]: float(sum(r.get("Values", []))) for r in answer["MetricDataResults"]}


# -- the run -----------------------------------------------------------------------------------


def dead_letter_keys(aws: Aws, max_messages: int) -> list[Key]:
    """(source, delivery id) of the DLQ's envelopes (peeked, released)."""
    from webhook_pipeline_ops.dlq_peek import peek_rows

    rows = peek_rows(aws, max_messages, show_body=False)
    return [(r["source"], r["delivery_id"]) for r in rows if r.get("source")]


def in_flight(aws: Aws) -> int | None:
    from webhook_pipeline.adapters.sqs_replay import queue_depth

    return queue_depth(aws.client("sqs"), aws.resources.require("queue_url"))


def local_logs() -> list[Path]:
    """The local stack's log files: its state folder's ``logs/*`` (what a stack whose stdout
    is a terminal, a pipe or a file elsewhere keeps,
    :mod:`webhook_pipeline_ops.local.function_log`), else its ``*.log`` (``stack.log`` of a
    stack started in the background). Never both: the same lines would count twice."""
    from webhook_pipeline_ops.local import state_dir

    folder = state_dir()
    kept = sorted(p for p in folder.glob("logs/*") if p.is_file())
    return kept or sorted(p for p in folder.glob("*.log") if p.is_file())


def local_logs_folder() -> Path:
    from webhook_pipeline_ops.local import state_dir

    return state_dir()
