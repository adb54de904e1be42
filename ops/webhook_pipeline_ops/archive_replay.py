"""``webhook-pipeline replay --from-archive``: the request from the options (every usage error
before anything is read), the run here or through the ReplayFunction, progress and the report."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from webhook_pipeline.errors import ConfigurationError, InvalidReplayRequestError
from webhook_pipeline.replay.archive_report import ArchiveReplayReport
from webhook_pipeline.replay.archive_request import ArchiveReplayRequest

from webhook_pipeline_ops.aws import Aws, OpsError
from webhook_pipeline_ops.output import Progress, print_json, print_table

if TYPE_CHECKING:
    from collections.abc import Callable

#: Options of the archive replay only, as (dest, flag).
ARCHIVE_ONLY = (
    ("mode", "--mode"),
    ("start", "--from"),
    ("end", "--to"),
    ("outcomes", "--outcome"),
    ("resource_key", "--resource-key"),
    ("delivery_id_prefix", "--delivery-id-prefix"),
    ("where", "--where"),
    ("max", "--max"),
    ("job", "--job"),
)
#: Options of the DLQ replay only, as (dest, flag).
DLQ_ONLY = (
    ("max_messages", "--max-messages"),
    ("delivery_id", "--delivery-id"),
    ("received_after", "--received-after"),
    ("received_before", "--received-before"),
)
SAMPLE_COLUMNS = ("source", "delivery_id", "event_type", "received_at")


def add_options(parser: argparse.ArgumentParser) -> None:
    """The ``--from-archive`` options of ``replay``."""
    group = parser.add_argument_group(
        "replay from the archive (--from-archive; same as the ReplayFunction's from_archive)"
    )
    group.add_argument(
        "--from-archive", action="store_true", help="replay archived deliveries of a window"
    )
    group.add_argument(
        "--mode",
        choices=("redeliver", "reprocess"),
        help="redeliver: deliveries without a record; reprocess: run applied hooks again",
    )
    group.add_argument("--from", dest="start", metavar="TIME", help="window start (ISO 8601)")
    group.add_argument("--to", dest="end", metavar="TIME", help="window end, exclusive")
    group.add_argument("--outcome", dest="outcomes", action="append", help="archived outcome")
    group.add_argument("--resource-key", help="only this resource key")
    group.add_argument("--delivery-id-prefix", help="only delivery ids starting with this")
    group.add_argument(
        "--where",
        action="append",
        metavar="COND",
        help="a condition on body fields, as archive search's (repeatable: all must hold)",
    )
    group.add_argument("--max", type=int, metavar="N", help="at most the first N deliveries")
    group.add_argument("--job", metavar="ID", help="job id: the same id resumes the job")


def check_usage(args: argparse.Namespace) -> None:
    """Refuse options of the other kind of replay (:class:`OpsError`, exit code 2)."""
    if args.from_archive:
        given = [flag for dest, flag in DLQ_ONLY if getattr(args, dest) is not None]
        if given:
            raise OpsError(f"{', '.join(given)}: DLQ replay only, not --from-archive", 2)
    else:
        given = [flag for dest, flag in ARCHIVE_ONLY if getattr(args, dest) is not None]
        if given:
            raise OpsError(f"{', '.join(given)}: give --from-archive too", 2)


def request_from_args(args: argparse.Namespace) -> ArchiveReplayRequest:
    """The validated request (:class:`OpsError` with exit code 2 when it is not)."""
    if args.mode is None:
        raise OpsError("--from-archive needs --mode redeliver or --mode reprocess", 2)
    if args.start is None or args.end is None:
        raise OpsError("--from-archive needs a window: --from TIME --to TIME", 2)
    if args.rate is not None and not args.rate > 0:
        raise OpsError(f"--rate must be more than 0 messages per second (got {args.rate:g})", 2)
    if args.source is not None:
        _check_source(args.source)
    data: dict[str, Any] = {
        "mode": args.mode,
        "start": args.start,
        "end": args.end,
        "dry_run": args.dry_run,
        "sources": [args.source] if args.source else [],
        "event_types": [args.event_type] if args.event_type else [],
        "outcomes": args.outcomes or [],
        "resource_key": args.resource_key,
        "delivery_id_prefix": args.delivery_id_prefix,
        "where": args.where,
        "rate_per_second": args.rate,
        "max_deliveries": args.max,
        "job": args.job,
    }
    try:
        return ArchiveReplayRequest.parse({k: v for k, v in data.items() if v is not None})
    except InvalidReplayRequestError as exc:
        raise OpsError(str(exc), exit_code=2) from None


def _check_source(name: str) -> None:
    from webhook_pipeline.providers import all_providers
    from webhook_pipeline.sources import source_providers

    try:
        known = set(source_providers(catalogue=True))
    except ConfigurationError:
        known = set(all_providers())
    if name not in known:
        raise OpsError(f"--source {name}: unknown source (known: {', '.join(sorted(known))})", 2)


def run(args: argparse.Namespace, invoke: Callable[[Aws, dict[str, Any]], dict[str, Any]]) -> int:
    """Run the archive replay (``invoke``: how to call the ReplayFunction with a payload, for
    ``--via-function``); print the report. Exit 0; 1 when the run failed, or a delivery or an
    archive object could not be read (each reported, the others replayed)."""
    request = request_from_args(args)
    aws = Aws(args)
    if args.via_function:
        report = _invoke_until_done(aws, request, invoke)
    else:
        report = _run_here(aws, request, args).to_dict()
    _print(args, request, report)
    problems = report["failed"] or report["corrupt_objects"]
    return 1 if report["status"] == "failed" or problems else 0


def _run_here(aws: Aws, request: ArchiveReplayRequest, args: argparse.Namespace) -> Any:
    from webhook_pipeline.replay.archive_job import ArchiveReplayTarget, run_archive_replay

    found = aws.resources
    target = ArchiveReplayTarget(
        s3=aws.client("s3"),
        dynamodb=aws.client("dynamodb"),
        sqs=aws.client("sqs"),
        archive_bucket=found.require("archive_bucket"),
        table=found.require("table"),
        queue_url=found.require("queue_url") if not request.dry_run else found.queue_url or "",
        payload_bucket=found.payload_bucket,
    )
    from webhook_pipeline.replay.archive_state import JobStateError

    progress = Progress(enabled=not args.no_progress)
    try:
        return run_archive_replay(
            request,
            target,
            remaining_time_ms=_deadline(args.time_limit),
            safety_margin_ms=0,
            on_progress=lambda r: progress.update(_progress_line(r)),
        )
    except InvalidReplayRequestError as exc:
        raise OpsError(str(exc), exit_code=2) from None
    except JobStateError as exc:
        raise OpsError(str(exc)) from None
    finally:
        progress.done()


def _deadline(seconds: float | None) -> Callable[[], int] | None:
    if seconds is None:
        return None
    import time

    end = time.monotonic() + seconds
    return lambda: int((end - time.monotonic()) * 1000)


def _progress_line(report: ArchiveReplayReport) -> str:
    total = max(report.total, 1)
    width = 30
    done = int(width * report.cursor / total)
    verb = "would send" if report.dry_run else "sent"
    return (
        f"[{'#' * done}{'.' * (width - done)}] {report.cursor}/{report.total}  {verb} "
        f"{report.matched if report.dry_run else report.sent}  skipped "
        f"{sum(report.skipped.values())}  failed {len(report.failed)}"
    )


def _invoke_until_done(
    aws: Aws,
    request: ArchiveReplayRequest,
    invoke: Callable[[Aws, dict[str, Any]], dict[str, Any]],
) -> dict[str, Any]:
    """Invoke the ReplayFunction, again with the job id while it answers ``incomplete``."""
    payload = request.model_dump(mode="json", exclude_none=True)
    while True:
        report = invoke(aws, {"from_archive": payload})
        if report.get("status") != "incomplete":
            return report
        payload["job"] = report["job"]


def _print(args: argparse.Namespace, request: ArchiveReplayRequest, report: dict[str, Any]) -> None:
    if args.json:
        print_json(report)
        return
    window = f"{request.start.isoformat()} .. {request.end.isoformat()}"
    if report["status"] == "empty":
        print(f"Nothing archived in the window {window} matches: nothing to replay.")
        return
    if request.dry_run:
        print(f"Would send {report['matched']} of {report['total']} deliveries ({request.mode}):")
        print_table(report.get("sample", []), SAMPLE_COLUMNS)
        print()
    skipped = ", ".join(f"{k} {v}" for k, v in report["skipped"].items()) or "none"
    resumed = "" if report["resumed_from"] is None else f", resumed from {report['resumed_from']}"
    print(
        f"{'Dry run' if request.dry_run else 'Replay'} {request.mode} {window}: job "
        f"{report['job']}{resumed}; {report['status']}; examined {report['examined']} of "
        f"{report['total']}, matched {report['matched']}, sent {report['sent']}, skipped "
        f"({skipped}), failed {len(report['failed'])}; {report['elapsed_seconds']:.1f} s, "
        f"{report['achieved_rate']:.1f}/s"
    )
    for item in report["failed"]:
        print(f"failed: {item['source']} {item['delivery_id']}: {item['reason']}")
    for item in report["corrupt_objects"]:
        print(f"corrupt archive object: {item['key']} line {item['line']}: {item['reason']}")
    if report["status"] == "incomplete":
        print(f"incomplete: run again with --job {report['job']} to go on")
    if report.get("error"):
        print(f"error: {report['error']}")
