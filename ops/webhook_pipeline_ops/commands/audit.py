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
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from webhook_pipeline_ops.audit import AuditReport, reconcile
from webhook_pipeline_ops.audit_evidence import (
    dead_letter_keys,
    from_insights,
    from_log_lines,
    in_flight,
    json_lines,
    local_logs,
    local_logs_folder,
    metric_sums,
)
from webhook_pipeline_ops.aws import Aws, OpsError, common_options
from webhook_pipeline_ops.output import print_json, print_table

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
