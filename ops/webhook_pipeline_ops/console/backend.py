"""What the console reads and runs, through the CLI's own functions.

Nothing here re-implements a lookup, the peek or the replay: records come from
:mod:`webhook_pipeline_ops.delivery_records` (the processor's ``DynamoDBDeliveryStore``), lists
from :mod:`webhook_pipeline_ops.time_index`, DLQ rows from
:func:`webhook_pipeline_ops.dlq_peek.peek_rows`, queue counters from
:func:`webhook_pipeline_ops.queue_status.queue_status`, replays from
:class:`webhook_pipeline_ops.console.jobs.ReplayJobs`.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from webhook_pipeline.adapters.sqs_replay import queue_attributes, queue_depth

from webhook_pipeline_ops import delivery_records as records
from webhook_pipeline_ops import dlq_peek as dlq
from webhook_pipeline_ops import queue_status as status
from webhook_pipeline_ops import resource_history as history
from webhook_pipeline_ops import time_index
from webhook_pipeline_ops.aws import Aws, describe_aws_error
from webhook_pipeline_ops.console import bodies, health
from webhook_pipeline_ops.console.jobs import ReplayJobs

if TYPE_CHECKING:
    from webhook_pipeline.archive.query import ArchiveFilter, SearchResult


@dataclass(frozen=True)
class Target:
    """What the console is looking at.

    Attributes
    ----------
    local : bool
        The local stack (moto), else a deployed stack or explicit resources.
    label : str
        Shown in every page's header (``local stack``, ``stack NAME (REGION)``).
    stack : str | None
        The stack name (metric dimensions, alarm names), when known.
    region : str
    """

    local: bool
    label: str
    stack: str | None
    region: str


def describe_error(exc: BaseException) -> str:
    """One line for an error shown on a page (the CLI's wording and hints)."""
    cause = exc.__cause__ if exc.__cause__ is not None else exc
    from botocore.exceptions import BotoCoreError, ClientError

    if isinstance(cause, ClientError | BotoCoreError):
        return describe_aws_error(cause)
    return str(exc) or type(exc).__name__


class Backend:
    """The console's data access; clients are created once here (they are thread-safe).

    Parameters
    ----------
    aws : Aws
        Connection and resources (the main queue, the DLQ and the deliveries table are needed;
        the payload and archive buckets are used when known).
    target : Target

    Raises
    ------
    OpsError
        A needed resource is not given anywhere.
    """

    def __init__(self, aws: Aws, target: Target) -> None:
        self.aws = aws
        self.target = target
        resources = aws.resources
        self.table = resources.require("table")
        self.queue_url = resources.require("queue_url")
        self.dlq_url = resources.require("dlq_url")
        self.bucket = resources.payload_bucket
        self.archive_bucket = resources.archive_bucket
        self.ddb = aws.client("dynamodb")
        self.sqs = aws.client("sqs")
        self.s3 = aws.client("s3")
        self.cloudwatch = aws.client("cloudwatch")
        self.jobs = ReplayJobs(aws, describe_error)
        self.names = health.Names(
            stack=target.stack or "",
            main_queue=health.queue_name(self.queue_url),
            dlq=health.queue_name(self.dlq_url),
        )
        self.sampler = health.QueueSampler(self.queue_counters) if target.local else None

    # -- lifecycle -----------------------------------------------------------------------------
    def check(self) -> None:
        """Read the DLQ's attributes once: fails early when the endpoint cannot be reached.

        Raises
        ------
        QueueOperationError
            With the botocore error as its cause.
        """
        queue_attributes(self.sqs, self.dlq_url)

    def start(self) -> None:
        if self.sampler is not None:
            self.sampler.start()

    def stop(self) -> None:
        if self.sampler is not None:
            self.sampler.stop()
        self.jobs.join()

    # -- deliveries ----------------------------------------------------------------------------
    def deliveries(
        self,
        filters: time_index.DeliveryFilters,
        *,
        newest: datetime,
        oldest: datetime,
        limit: int,
        cursor: str | None,
    ) -> time_index.DeliveryPage:
        """A page of delivery records, newest first."""
        return time_index.list_deliveries(
            self.ddb,
            self.table,
            newest=newest,
            oldest=oldest,
            limit=limit,
            cursor=cursor,
            filters=filters,
        )

    def delivery(self, source: str, delivery_id: str) -> dict[str, Any] | None:
        """The delivery record (strongly consistent), or ``None``."""
        return records.get_delivery(self.aws, source, delivery_id)

    def delivery_body(self, record: dict[str, Any]) -> bodies.BodyView | None:
        """The delivery's raw body from the payload bucket, when it is still there."""
        if not self.bucket or "body_sha256" not in record:
            return None
        return bodies.find_claim_check_body(
            self.s3,
            self.bucket,
            str(record["source"]),
            str(record["delivery_id"]),
            int(record.get("body_size", -1)),
            str(record["body_sha256"]),
        )

    def resource(self, source: str, key: str) -> dict[str, Any] | None:
        """The resource item (watermark), or ``None``."""
        return records.get_resource(self.aws, source, key)

    def resource_history(
        self, source: str, key: str, *, newest: datetime, oldest: datetime, max_items: int
    ) -> tuple[list[dict[str, Any]], bool, time_index.ReadStats]:
        """The resource's delivery records of the window in sequence order (see
        :func:`webhook_pipeline_ops.resource_history.resource_history` for what it reads)."""
        stats = time_index.ReadStats()
        items, truncated = history.resource_history(
            self.ddb,
            self.table,
            source=source,
            resource_key=key,
            newest=newest,
            oldest=oldest,
            max_items=max_items,
            stats=stats,
        )
        return items, truncated, stats

    # -- archive -------------------------------------------------------------------------------
    def archive_sources(self) -> list[str]:
        """Sources with an archive partition (``[]`` without an archive bucket).

        Raises
        ------
        botocore.exceptions.ClientError, botocore.exceptions.BotoCoreError
            S3 failed.
        """
        if not self.archive_bucket:
            return []
        from webhook_pipeline.archive.query import list_sources

        return list_sources(self.s3, self.archive_bucket)

    def archive_search(self, flt: ArchiveFilter) -> SearchResult:
        """The archived deliveries ``flt`` selects, deduplicated, in order of receipt
        (:func:`webhook_pipeline.archive.query.search`, as ``archive search`` reads them).

        Raises
        ------
        OpsError
            No archive bucket is known.
        botocore.exceptions.ClientError, botocore.exceptions.BotoCoreError
            Listing the archive failed (an object that cannot be read is a problem of the
            result, not an error).
        """
        if not self.archive_bucket:
            self.aws.resources.require("archive_bucket")
        from webhook_pipeline.archive.query import search

        return search(self.s3, str(self.archive_bucket), flt)

    # -- DLQ -----------------------------------------------------------------------------------
    def dlq_messages(self, max_messages: int) -> list[dict[str, Any]]:
        """DLQ messages with their failure reasons and bodies, not consumed (``dlq peek``)."""
        return dlq.peek_rows(self.aws, max_messages, show_body=True)

    def dlq_depth(self) -> int | None:
        """Approximate DLQ depth (visible + in flight + delayed)."""
        return queue_depth(self.sqs, self.dlq_url)

    # -- health --------------------------------------------------------------------------------
    def queue_status(self) -> list[dict[str, Any]]:
        """``webhook-pipeline status`` rows of both queues."""
        return [
            status.queue_status(self.aws, label, url)
            for label, url in (("main", self.queue_url), ("dlq", self.dlq_url))
        ]

    def queue_counters(self) -> dict[str, int]:
        """The counters the local sampler keeps."""
        main = queue_attributes(self.sqs, self.queue_url)
        dlq = queue_attributes(self.sqs, self.dlq_url)
        return {
            "main_visible": int(main.get("ApproximateNumberOfMessages", 0)),
            "main_in_flight": int(main.get("ApproximateNumberOfMessagesNotVisible", 0)),
            "dlq_visible": int(dlq.get("ApproximateNumberOfMessages", 0)),
        }

    def health(self) -> dict[str, Any]:
        """Everything the Health page shows (each part reports its own error)."""
        doc: dict[str, Any] = {"series": {}, "notes": [], "errors": []}
        try:
            doc["queues"] = self.queue_status()
        except Exception as exc:  # each part reports its own failure on the page
            doc["queues"] = []
            doc["errors"].append(f"queues: {describe_error(exc)}")
        if self.sampler is not None:
            doc["series"].update(self.sampler.series())
            doc["notes"].append(
                "Local stack: queue depths are sampled by the console every "
                f"{health.SAMPLE_SECONDS:.0f} s since it started (moto publishes no SQS metrics)."
            )
        if self.target.stack:
            try:
                doc["series"].update(
                    health.metric_series(self.cloudwatch, self.names, local=self.target.local)
                )
            except Exception as exc:
                doc["errors"].append(f"metrics: {describe_error(exc)}")
            try:
                doc["alarms"] = health.alarms(
                    self.cloudwatch, self.target.stack, local=self.target.local
                )
            except Exception as exc:
                doc["alarms"] = []
                doc["errors"].append(f"alarms: {describe_error(exc)}")
        else:
            doc["alarms"] = []
            doc["notes"].append(
                "No stack name (explicit resources): metrics and alarms need --stack or --local."
            )
        if self.target.local:
            pipeline = [
                k
                for k, s in doc["series"].items()
                if s["chart"] in ("ingest", "latency") and s["v"]
            ]
            if not pipeline:
                doc["notes"].append(
                    "Local stack: no ingest or latency metrics in its CloudWatch (moto): the local "
                    "functions print their metrics as EMF log lines and do not publish them, so "
                    "these charts stay empty locally."
                )
            doc["notes"].append(
                "Local stack: moto does not evaluate alarms; they stay in the state they were "
                "created in."
            )
        doc["charts"] = [{"key": c.key, "title": c.title, "unit": c.unit} for c in health.CHARTS]
        return doc
