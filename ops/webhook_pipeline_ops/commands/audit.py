"""``webhook-pipeline audit``: reconcile every delivery accepted in a time window.

For a deployed stack (``--stack NAME``) the accepted delivery ids come from the ingest
function's log group through CloudWatch Logs Insights, the metric sums from CloudWatch; for the
local stack (``--local``) both come from the local stack's log files (``--log`` to name
others). Recorded deliveries come from the time index of the deliveries table, dead-lettered
ones from a peek of the DLQ (messages are received with a visibility timeout and released, never
consumed). See :mod:`webhook_pipeline_ops.audit` for what is compared.

Exit code 0 when every delivery accepted before the settle window is recorded or in the DLQ,
1 when some is not (they are listed), 2 for a usage error.
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Iterable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

from webhook_pipeline_ops.audit import Accepted, AuditReport, Key, reconcile
from webhook_pipeline_ops.aws import Aws, OpsError, common_options
from webhook_pipeline_ops.output import print_json, print_table

if TYPE_CHECKING:
    from mypy_boto3_cloudwatch import CloudWatchClient
    from mypy_boto3_cloudwatch.type_defs import MetricDataQueryTypeDef
    from mypy_boto3_logs import CloudWatchLogsClient

ACCEPTED_MESSAGES = frozenset({"accepted", "batch enqueued"})
INGEST_METRICS = ("Accepted", "DuplicateDiscarded", "SignatureInvalid", "EnqueueFailed")
PROCESSOR_METRICS = ("Applied", "Duplicate", "Stale", "Malformed", "Retry")
#: Logs Insights returns at most this many rows per query; a full answer splits the window.
INSIGHTS_LIMIT = 10_000
#: How far outside the window records are read (receipt times and log times differ slightly).
RECORD_MARGIN = timedelta(minutes=2)


def register(subparsers: Any) -> None:
    """Add ``audit``."""
    parser = subparsers.add_parser(
        "audit",
        parents=[common_options(resources=("queue_url", "dlq_url", "table"))],
        help="reconcile accepted deliveries with records and the DLQ",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--since", default="1h", help="window start: a duration back from now (90m, 2h, 1d) "
        "or an ISO-8601 time (default 1h)"
    )  # fmt: skip
    parser.add_argument("--until", help="window end, ISO-8601 (default: now)")
    parser.add_argument(
        "--settle",
        type=float,
        default=300.0,
        metavar="SECONDS",
        help="deliveries accepted this close to now may still be on their way (default 300)",
    )
    parser.add_argument(
        "--log",
        action="append",
        type=Path,
        metavar="FILE",
        help="read acceptances and metrics from this JSON-lines log file (repeatable; "
        "default with --local: the local stack's log files)",
    )
    parser.add_argument("--log-group", help="the ingest log group (default: from --stack)")
    parser.add_argument("--max-dlq", type=int, default=10_000, help="DLQ messages to peek")
    parser.set_defaults(func=run)


def parse_time(text: str, now: datetime) -> datetime:
    """``90m``, ``2h``, ``1d``, ``30s`` back from ``now``, or an ISO-8601 time (UTC if naive).

    Raises
    ------
    OpsError
        Neither form (exit code 2).
    """
    units = {"s": 1, "m": 60, "h": 3600, "d": 86_400}
    if text and text[-1] in units and text[:-1].replace(".", "", 1).isdigit():
        return now - timedelta(seconds=float(text[:-1]) * units[text[-1]])
    try:
        moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise OpsError(f"not a duration or an ISO-8601 time: {text!r}", exit_code=2) from None
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


# -- acceptances and metrics from JSON log lines (the local stack, exported logs) -----------


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
    from webhook_pipeline_ops.commands.dlq import peek_rows

    rows = peek_rows(aws, max_messages, show_body=False)
    return [(r["source"], r["delivery_id"]) for r in rows if r.get("source")]


def in_flight(aws: Aws) -> int | None:
    from webhook_pipeline.adapters.sqs_replay import queue_depth

    return queue_depth(aws.client("sqs"), aws.resources.require("queue_url"))


def local_logs() -> list[Path]:
    """The local stack's log files: its state folder's ``logs/*`` (what a stack started in a
    terminal keeps, :mod:`webhook_pipeline_ops.local.function_log`), else its ``*.log``
    (``stack.log`` of a stack started in the background). Never both: the same lines would
    count twice."""
    from webhook_pipeline_ops.local import state_dir

    folder = state_dir()
    kept = sorted(p for p in folder.glob("logs/*") if p.is_file())
    return kept or sorted(p for p in folder.glob("*.log") if p.is_file())


def local_logs_folder() -> Path:
    from webhook_pipeline_ops.local import state_dir

    return state_dir()


def audit(args: argparse.Namespace, now: datetime | None = None) -> AuditReport:
    """Gather the four views and reconcile them."""
    from webhook_pipeline_ops.time_index import iter_deliveries

    now = now or datetime.now(UTC)
    since = parse_time(args.since, now)
    until = parse_time(args.until, now) if args.until else now
    if until <= since:
        raise OpsError("--until must be later than --since", exit_code=2)
    aws = Aws(args)
    if args.log or args.local:
        paths = args.log or local_logs()
        if not paths:
            raise OpsError(
                f"no log files in {local_logs_folder()}: start the local stack there (or set "
                "WEBHOOK_PIPELINE_LOCAL_DIR to its folder), or give --log FILE"
            )
        accepted, metrics = from_log_lines(json_lines(paths), since, until)
    elif args.stack:
        group = args.log_group or f"/aws/lambda/{args.stack}-IngestFunction"
        accepted = from_insights(aws.client("logs"), group, since, until)
        metrics = metric_sums(aws.client("cloudwatch"), args.stack, since, until)
    else:
        raise OpsError("give --stack NAME, --local or --log FILE", exit_code=2)
    records = list(
        iter_deliveries(
            aws.client("dynamodb"),
            aws.resources.require("table"),
            newest=min(now, until + RECORD_MARGIN),
            oldest=since - RECORD_MARGIN,
            page_size=1000,
        )
    )
    return reconcile(
        accepted,
        records,
        dead_letter_keys(aws, args.max_dlq),
        window=(since, until),
        settle_before=now - timedelta(seconds=args.settle),
        in_flight=in_flight(aws),
        metrics=metrics,
    )


def run(args: argparse.Namespace) -> int:
    report = audit(args)
    if args.json:
        print_json(report.as_dict())
    else:
        render(report)
    return 0 if report.ok else 1


def render(report: AuditReport) -> None:
    start, end = report.window
    print(f"window {start.isoformat()} .. {end.isoformat()} (settled before "
          f"{report.settle_before.isoformat()})")  # fmt: skip
    rows = [
        {
            "source": name,
            "accepted": r.accepted,
            "recorded": r.recorded,
            "applied": r.applied,
            "stale": r.stale,
            "in dlq": r.in_dlq,
            "unsettled": len(r.unsettled),
            "gaps": len(r.gaps),
        }
        for name, r in sorted(report.sources.items())
    ]
    columns = ["source", "accepted", "recorded", "applied", "stale", "in dlq", "unsettled"]
    print_table(rows, [*columns, "gaps"])
    if report.metrics:
        print("metrics: " + ", ".join(f"{k} {v:g}" for k, v in sorted(report.metrics.items())))
    print(f"main queue: {report.in_flight if report.in_flight is not None else 'unknown'} "
          "messages still queued or in flight")  # fmt: skip
    for name, r in sorted(report.sources.items()):
        for delivery_id in sorted(r.gaps):
            print(f"GAP {name} {delivery_id}: accepted, neither recorded nor in the DLQ")
    print("ok: every accepted delivery is recorded or in the DLQ" if report.ok
          else f"{report.gaps} accepted deliveries are unaccounted for")  # fmt: skip
