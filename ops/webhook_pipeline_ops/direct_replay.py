"""The replay run here, against SQS directly (:func:`run_direct`), with the same domain code as the
ReplayFunction (:func:`webhook_pipeline.replay.run.replay`): ``webhook-pipeline replay`` and the
console's replay jobs run it; :class:`Tally` counts a run as it goes, for progress displays."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from webhook_pipeline.replay.report import MessageResult, summary
from webhook_pipeline.replay.request import ReplayRequest
from webhook_pipeline.replay.run import replay

from webhook_pipeline_ops.aws import Aws


@dataclass
class Tally:
    """Running counts of a replay, updated from each :class:`MessageResult` (for progress
    displays; the final figures are the report's)."""

    examined: int = 0
    matched: int = 0
    replayed: int = 0
    skipped: int = 0
    failed: int = 0

    def add(self, result: MessageResult) -> None:
        """Count one examined message."""
        self.examined += 1
        if result.outcome in ("replayed", "delete_failed"):
            self.replayed += 1
        elif result.outcome in ("skipped", "malformed"):
            self.skipped += 1
        elif result.outcome == "failed":
            self.failed += 1
        if result.outcome in ("replayed", "delete_failed", "failed", "would_replay"):
            self.matched += 1


def run_direct(
    aws: Aws,
    request: ReplayRequest,
    *,
    on_message: Callable[[MessageResult], None] | None = None,
    time_limit: float | None = None,
) -> dict[str, Any]:
    """Run :func:`webhook_pipeline.replay.run.replay` here, against SQS directly; the DLQ's
    attributes are read first, so an unreachable endpoint fails before anything is received.

    Parameters
    ----------
    aws : Aws
        Connection; its resources must give the DLQ and the main queue URLs.
    request : ReplayRequest
        The validated request.
    on_message : Callable[[MessageResult], None] | None
        Called after each examined message (progress, listings).
    time_limit : float | None
        Stop cleanly after about this many seconds (``stopped="time_limit"``).

    Returns
    -------
    dict
        The report (:meth:`ReplayReport.to_dict`); in a dry run ``would_replay`` lists every
        match, not only the first 100.

    Raises
    ------
    OpsError
        A queue URL is missing.
    QueueOperationError
        The DLQ cannot be read at all (its cause is the botocore error).
    """
    from webhook_pipeline.adapters.sqs_replay import (
        SqsDeadLetterQueue,
        SqsReplaySender,
        queue_attributes,
    )

    resources = aws.resources
    dlq_url = resources.require("dlq_url")
    queue_url = resources.require("queue_url")
    sqs = aws.client("sqs")
    queue_attributes(sqs, dlq_url)
    listed, each = _listing(on_message)
    report = replay(
        request,
        SqsDeadLetterQueue(sqs, dlq_url),
        SqsReplaySender(sqs, queue_url),
        remaining_time_ms=_remaining_ms(time_limit),
        safety_margin_ms=0,
        on_message=each,
    )
    data = report.to_dict()
    if request.dry_run:
        data["would_replay"] = listed
    return data


def _listing(
    on_message: Callable[[MessageResult], None] | None,
) -> tuple[list[dict[str, Any]], Callable[[MessageResult], None]]:
    """``(summaries, callback)``: the callback lists every ``would_replay`` message's summary,
    then calls ``on_message``."""
    listed: list[dict[str, Any]] = []

    def each(result: MessageResult) -> None:
        if result.outcome == "would_replay" and result.envelope is not None:
            listed.append(summary(result.envelope, result.message))
        if on_message is not None:
            on_message(result)

    return listed, each


def _remaining_ms(time_limit: float | None) -> Callable[[], int] | None:
    """Milliseconds left of ``time_limit`` seconds from now, as the replay asks for them
    (``None``: no limit)."""
    if time_limit is None:
        return None
    deadline = time.monotonic() + time_limit
    return lambda: int((deadline - time.monotonic()) * 1000)
