"""``webhook-pipeline replay``: move dead-lettered deliveries back to the main queue.

By default the replay runs here, against SQS directly, with the same domain code as the
ReplayFunction (:func:`webhook_pipeline.replay.run.replay`); ``--via-function`` invokes the deployed
ReplayFunction instead and prints its report. ``--dry-run`` lists what would move and moves
nothing. A progress line is drawn on stderr when it is a terminal.

``--from-archive`` replays archived deliveries of a window instead (``--mode redeliver`` or
``reprocess``, ``--from``/``--to``, filters, ``--dry-run``, ``--rate``, ``--max``, ``--job`` to
resume): a resumable job whose state is kept in the archive bucket.

Exit code 0 when nothing failed; 1 when a send failed, a receive failed, or the run stopped on
repeated send failures (the report is printed either way); 2 for an invalid request.
"""

from __future__ import annotations

import argparse
import json
from typing import TYPE_CHECKING, Any

from webhook_pipeline.errors import InvalidReplayRequestError
from webhook_pipeline.replay.report import MessageResult
from webhook_pipeline.replay.request import ReplayRequest

from webhook_pipeline_ops import archive_replay
from webhook_pipeline_ops.aws import Aws, OpsError, common_options
from webhook_pipeline_ops.direct_replay import Tally, run_direct
from webhook_pipeline_ops.output import Progress, print_json, print_table

if TYPE_CHECKING:
    from botocore.config import Config


def lambda_config() -> Config:
    """Lambda invocations may run up to 15 minutes; never retry one (it could replay twice as
    much)."""
    from botocore.config import Config

    return Config(
        connect_timeout=5, read_timeout=910, retries={"mode": "standard", "total_max_attempts": 1}
    )


FAILED_STOPS = ("send_failures", "receive_failed")
LISTED_COLUMNS = (
    "source",
    "delivery_id",
    "event_type",
    "received_at",
    "replay_count",
    "message_id",
)


def register(subparsers: Any) -> None:
    """Add ``replay``."""
    parser = subparsers.add_parser(
        "replay",
        parents=[common_options(("queue_url", "dlq_url", "replay_function", "archive_bucket"))],
        help="replay dead-lettered deliveries to the main queue (filters, dry run, rate limit)",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    group = parser.add_argument_group("replay request (same as the ReplayFunction's input)")
    group.add_argument("--max-messages", type=int, help="examine at most N messages (default 100)")
    group.add_argument("--dry-run", action="store_true", help="list what would move; move nothing")
    group.add_argument(
        "--rate", type=float, metavar="PER_SECOND", help="at most N sends per second"
    )
    group.add_argument("--source", help="only this source")
    group.add_argument("--event-type", help="only this event type")
    group.add_argument("--delivery-id", help="only this delivery id")
    group.add_argument(
        "--received-after", metavar="TIME", help="received at or after (ISO 8601; no zone = UTC)"
    )
    group.add_argument(
        "--received-before", metavar="TIME", help="received before (ISO 8601; no zone = UTC)"
    )
    how = parser.add_argument_group("how")
    how.add_argument(
        "--via-function", action="store_true", help="invoke the deployed ReplayFunction"
    )
    how.add_argument(
        "--time-limit",
        type=float,
        metavar="SECONDS",
        help="stop (cleanly) after about this long; direct runs only",
    )
    how.add_argument("--no-progress", action="store_true", help="no progress line on stderr")
    archive_replay.add_options(parser)
    parser.set_defaults(func=run)


def request_from_args(args: argparse.Namespace) -> ReplayRequest:
    """Build and validate the replay request (:class:`OpsError` with exit code 2 if invalid)."""
    criteria = {
        "source": args.source,
        "event_type": args.event_type,
        "delivery_id": args.delivery_id,
        "received_after": args.received_after,
        "received_before": args.received_before,
    }
    data: dict[str, Any] = {
        "max_messages": 100 if args.max_messages is None else args.max_messages,
        "dry_run": args.dry_run,
        "filter": {k: v for k, v in criteria.items() if v is not None},
    }
    if args.rate is not None:
        data["rate_per_second"] = args.rate
    try:
        return ReplayRequest.parse(data)
    except InvalidReplayRequestError as exc:
        raise OpsError(str(exc), exit_code=2) from None


def run(args: argparse.Namespace) -> int:
    archive_replay.check_usage(args)
    if args.from_archive:
        return archive_replay.run(args, invoke_function)
    request = request_from_args(args)
    aws = Aws(args)
    if args.via_function:
        if args.time_limit is not None:
            raise OpsError("--time-limit applies to direct runs only", exit_code=2)
        report = _invoke_function(aws, request)
        listed = list(report.get("would_replay", []))
    else:
        report, listed = _run_here(aws, request, args)
    _print(args, request, report, listed)
    failed = report.get("failed", 0) or report.get("stopped") in FAILED_STOPS
    return 1 if failed else 0


def _run_here(
    aws: Aws, request: ReplayRequest, args: argparse.Namespace
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    progress = Progress(enabled=not args.no_progress)
    tally = Tally()

    def on_message(result: MessageResult) -> None:
        tally.add(result)
        progress.update(
            f"{'dry run: ' if request.dry_run else ''}examined {tally.examined}"
            f"/{request.max_messages}  matched {tally.matched}  replayed {tally.replayed}"
            f"  skipped {tally.skipped}  failed {tally.failed}"
        )

    try:
        data = run_direct(aws, request, on_message=on_message, time_limit=args.time_limit)
    finally:
        progress.done()
    return data, list(data.get("would_replay", []))


def _invoke_function(aws: Aws, request: ReplayRequest) -> dict[str, Any]:
    return invoke_function(aws, request.model_dump(mode="json", exclude_none=True))


def invoke_function(aws: Aws, payload: dict[str, Any]) -> dict[str, Any]:
    """Invoke the ReplayFunction with ``payload``; its report (:class:`OpsError` when it
    failed: exit code 2 for an invalid request)."""
    name = aws.resources.require("replay_function")
    client = aws.client("lambda", config=lambda_config())
    response = client.invoke(
        FunctionName=name, InvocationType="RequestResponse", Payload=json.dumps(payload).encode()
    )
    raw = response["Payload"].read()
    try:
        body = json.loads(raw or b"null")
    except ValueError:
        body = raw.decode(errors="replace")
    if response.get("FunctionError"):
        if isinstance(body, dict):
            kind = body.get("errorType", "error")
            message = body.get("errorMessage", "")
        else:
            kind, message = "error", str(body)
        code = 2 if kind == "InvalidReplayRequestError" else 1
        raise OpsError(f"{name} failed: {kind}: {message}", exit_code=code)
    if not isinstance(body, dict):
        raise OpsError(f"{name} returned something that is not a report: {body!r}")
    return body


def _print(
    args: argparse.Namespace,
    request: ReplayRequest,
    report: dict[str, Any],
    listed: list[dict[str, Any]],
) -> None:
    if args.json:
        print_json(report)
        return
    if request.dry_run:
        if listed:
            print(f"Would replay {report.get('matched', len(listed))} deliveries:")
            print_table(listed, LISTED_COLUMNS)
        else:
            print("Would replay nothing.")
        print()
    remaining = report.get("remaining")
    print(
        f"{'Dry run' if request.dry_run else 'Replay'} ({request.filter.describe()}): "
        f"examined {report.get('examined')}, matched {report.get('matched')}, "
        f"replayed {report.get('replayed')}, skipped {report.get('skipped')} "
        f"(malformed {report.get('malformed', 0)}), failed {report.get('failed')}"
    )
    state = "complete" if report.get("complete") else f"stopped early: {report.get('stopped')}"
    depth = (
        "unknown (its attributes could not be read)" if remaining is None else f"about {remaining}"
    )
    print(f"{state}; DLQ depth now {depth}")
    if report.get("error"):
        print(f"error: {report['error']}")
