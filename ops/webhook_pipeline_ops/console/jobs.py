"""Replays started from the console: one at a time, on a thread, with live progress.

A job runs :func:`webhook_pipeline_ops.direct_replay.run_direct` (the CLI's direct replay, i.e.
:func:`webhook_pipeline.replay.run.replay` against SQS) with a :class:`SelectionFilter`: the
deliveries the operator ticked on the DLQ page. Only one job runs at a time: two replays of the
same DLQ would hide messages from each other.
"""

from __future__ import annotations

import secrets
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from pydantic import Field
from webhook_pipeline.envelope import Envelope
from webhook_pipeline.replay.report import MessageResult
from webhook_pipeline.replay.request import ReplayFilter, ReplayRequest

from webhook_pipeline_ops.aws import Aws
from webhook_pipeline_ops.direct_replay import Tally, run_direct

#: Finished jobs kept for their report.
KEPT_JOBS = 20
#: At most this many per-message results are kept for the page.
MAX_RESULTS = 1_000


class SelectionFilter(ReplayFilter):
    """A replay filter that also requires the (source, delivery id) to be one of ``deliveries``.

    The replay's own criteria (source, event type, received range) still apply.
    """

    deliveries: frozenset[tuple[str, str]] = Field(default_factory=frozenset, max_length=10_000)

    def matches(self, envelope: Envelope) -> bool:
        """Whether the envelope is selected and matches the other criteria."""
        selected = (envelope.source, envelope.delivery_id) in self.deliveries
        return selected and super().matches(envelope)

    def describe(self) -> str:
        """Short human description."""
        rest = super().describe()
        picked = f"{len(self.deliveries)} selected deliveries"
        return picked if rest == "all" else f"{picked}, {rest}"


class BusyError(Exception):
    """A replay is already running."""


@dataclass
class ReplayJob:
    """One replay run and what is known of it so far (read by the progress endpoint).

    Attributes
    ----------
    total : int
        What the progress bar measures against: the number of selected deliveries.
    results : list[dict]
        Per examined message: message id, source, delivery id, outcome, reason.
    report : dict | None
        The final report, once done.
    error : str | None
        Why the run could not happen (no connection...), once failed.
    """

    id: str
    request: ReplayRequest
    total: int
    selected: list[tuple[str, str]]
    started_at: float = field(default_factory=time.time)
    finished_at: float | None = None
    state: str = "running"
    tally: Tally = field(default_factory=Tally)
    results: list[dict[str, Any]] = field(default_factory=list)
    report: dict[str, Any] | None = None
    error: str | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def record(self, result: MessageResult) -> None:
        """Count one examined message (the replay's ``on_message``)."""
        envelope = result.envelope
        with self._lock:
            self.tally.add(result)
            if len(self.results) < MAX_RESULTS:
                self.results.append(
                    {
                        "message_id": result.message.message_id,
                        "source": envelope.source if envelope else None,
                        "delivery_id": envelope.delivery_id if envelope else None,
                        "outcome": result.outcome,
                        "reason": _reason(result),
                        "selected": envelope is not None
                        and (envelope.source, envelope.delivery_id) in set(self.selected),
                    }
                )

    def snapshot(self) -> dict[str, Any]:
        """The job as JSON for the page."""
        with self._lock:
            tally = self.tally
            done = tally.matched if self.request.dry_run else tally.replayed + tally.failed
            found = {(r["source"], r["delivery_id"]) for r in self.results if r["selected"]}
            return {
                "id": self.id,
                "state": self.state,
                "dry_run": self.request.dry_run,
                "rate_per_second": self.request.rate_per_second,
                "max_messages": self.request.max_messages,
                "total": self.total,
                "done": done,
                "examined": tally.examined,
                "matched": tally.matched,
                "replayed": tally.replayed,
                "skipped": tally.skipped,
                "failed": tally.failed,
                "elapsed_seconds": round((self.finished_at or time.time()) - self.started_at, 1),
                "results": [r for r in self.results if r["selected"] or r["outcome"] != "skipped"],
                "not_found": [
                    {"source": s, "delivery_id": d}
                    for s, d in self.selected
                    if (s, d) not in found and self.state != "running"
                ],
                "report": self.report,
                "error": self.error,
            }


def _reason(result: MessageResult) -> str | None:
    if result.outcome == "skipped":
        return "not selected" if result.reason == "filter" else result.reason
    if result.outcome == "malformed":
        return "not a valid envelope: needs a human (dlq peek --show-body)"
    if result.outcome == "would_replay":
        return "would be sent back to the main queue"
    return result.reason


class ReplayJobs:
    """The console's replay jobs.

    Parameters
    ----------
    aws : Aws
        Connection and resources (DLQ and main queue URLs).
    describe_error : callable
        Turns an exception of a failed run into one line for the page.
    """

    def __init__(self, aws: Aws, describe_error: Any) -> None:
        self._aws = aws
        self._describe = describe_error
        self._jobs: dict[str, ReplayJob] = {}
        self._lock = threading.Lock()
        self._threads: list[threading.Thread] = []

    def start(
        self,
        deliveries: Iterable[tuple[str, str]],
        *,
        dry_run: bool,
        rate_per_second: float | None,
        max_messages: int,
    ) -> ReplayJob:
        """Start a replay of the selected deliveries.

        Raises
        ------
        BusyError
            Another replay is running.
        webhook_pipeline.errors.InvalidReplayRequestError, pydantic.ValidationError
            Invalid rate or count.
        """
        selected = list(dict.fromkeys((str(s), str(d)) for s, d in deliveries))
        data: dict[str, Any] = {
            "dry_run": dry_run,
            "max_messages": max_messages,
            "filter": SelectionFilter(deliveries=frozenset(selected)),
        }
        if rate_per_second is not None:
            data["rate_per_second"] = rate_per_second
        request = ReplayRequest.model_validate(data)
        with self._lock:
            if any(job.state == "running" for job in self._jobs.values()):
                raise BusyError("a replay is already running; wait for it to finish")
            job = ReplayJob(
                id=secrets.token_hex(8), request=request, total=len(selected), selected=selected
            )
            self._jobs[job.id] = job
            finished = [j for j in self._jobs.values() if j.state != "running"]
            for old in finished[:-KEPT_JOBS]:
                self._jobs.pop(old.id, None)
        thread = threading.Thread(target=self._run, args=(job,), name=f"replay-{job.id}")
        self._threads.append(thread)
        thread.start()
        return job

    def get(self, job_id: str) -> ReplayJob | None:
        """The job, or ``None``."""
        with self._lock:
            return self._jobs.get(job_id)

    def join(self, timeout: float = 30.0) -> None:
        """Wait for running jobs (at shutdown)."""
        for thread in self._threads:
            thread.join(timeout=timeout)

    def _run(self, job: ReplayJob) -> None:
        try:
            report = run_direct(self._aws, job.request, on_message=job.record)
        except Exception as exc:  # reported on the page; the job thread must not die silently
            with job._lock:
                job.error = self._describe(exc)
                job.state = "failed"
                job.finished_at = time.time()
            return
        with job._lock:
            job.report = report
            job.state = "done"
            job.finished_at = time.time()
