"""Replay from the archive: a resumable job that sends archived deliveries to the main queue again.

:func:`run_archive_replay` selects the candidates with
:func:`webhook_pipeline.archive.query.search` (deduplicated, in order of receipt: the same order
on every run), then works through them in chunks of 10 from the job's cursor:

- every candidate's body is read from the archive record (``body_bytes()`` checks its SHA-256):
  a body that fails is reported by id and skipped, as is an archive object that cannot be read;
  nothing else is ever sent (no bytes from anywhere but the archive, no signature or timestamp
  check again: ingest verified the delivery once);
- the delivery records of the chunk are read (one ``BatchGetItem``, consistent reads);
  ``redeliver`` sends a candidate only when its record is missing (present: skipped ``already
  recorded``); ``reprocess`` only when its record is ``applied`` (missing: ``not recorded``;
  else skipped by the record's outcome), with ``reprocess={generation, job}``;
- the chunk is sent (``SendMessageBatch``, at the rate limit) and **then** the cursor is
  checkpointed in ``replay-jobs/<job>.json``: a run killed between the two sends that chunk again
  when resumed (at most :data:`CHUNK` messages), which the processor's conditional write
  (redeliver) or per-generation mark (reprocess) makes harmless.

A dry run does the same reads and checks, sends nothing and writes no state.
"""

from __future__ import annotations

import sys
import time
from collections import Counter
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from webhook_pipeline.archive.query import search
from webhook_pipeline.archive.record import ArchiveRecord, CorruptRecordError
from webhook_pipeline.envelope import Envelope, Reprocess
from webhook_pipeline.replay.archive_envelopes import (
    RecordLookupError,
    envelope_from_record,
    recorded_outcomes,
)
from webhook_pipeline.replay.archive_report import (
    SAMPLE_SIZE,
    ArchiveReplayReport,
    ChunkNotSentError,
    send_chunk,
)
from webhook_pipeline.replay.archive_request import ArchiveReplayRequest
from webhook_pipeline.replay.archive_state import (
    MAX_LISTED_FAILURES,
    Gone,
    JobState,
    JobStateError,
    JobStore,
    candidates_digest,
    check_resumable,
    new_job_id,
)
from webhook_pipeline.replay.rate import RateLimiter

#: Candidates per chunk (one ``SendMessageBatch`` and one checkpoint).
CHUNK = 10
#: Default milliseconds kept before the caller's timeout.
DEFAULT_SAFETY_MARGIN_MS = 10_000
#: The ingest's default inline threshold (``INLINE_BODY_MAX_BYTES``).
DEFAULT_INLINE_BODY_MAX_BYTES = 150_000


@dataclass(frozen=True)
class ArchiveReplayTarget:
    """Where a replay from the archive reads and sends.

    Attributes
    ----------
    s3, dynamodb, sqs : botocore clients
    archive_bucket : str
        The archive (and the jobs' state).
    table : str
        The deliveries table.
    queue_url : str
        The main queue.
    payload_bucket : str | None
        Claim-check bodies (needed for bodies over ``inline_body_max_bytes``).
    inline_body_max_bytes : int
    """

    s3: Any
    dynamodb: Any
    sqs: Any
    archive_bucket: str
    table: str
    queue_url: str
    payload_bucket: str | None = None
    inline_body_max_bytes: int = DEFAULT_INLINE_BODY_MAX_BYTES


def run_archive_replay(
    request: ArchiveReplayRequest,
    target: ArchiveReplayTarget,
    *,
    remaining_time_ms: Callable[[], int] | None = None,
    safety_margin_ms: int = DEFAULT_SAFETY_MARGIN_MS,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
    on_progress: Callable[[ArchiveReplayReport], None] | None = None,
) -> ArchiveReplayReport:
    """Run (or resume) the job of ``request`` until done or out of time (module docstring).

    Parameters
    ----------
    request : ArchiveReplayRequest
        Validated request; its ``job`` id resumes that job.
    target : ArchiveReplayTarget
        Clients and resources.
    remaining_time_ms : Callable[[], int] | None
        Milliseconds the caller has left; the run checkpoints and returns ``incomplete`` before
        a chunk that could cross ``safety_margin_ms``. ``None``: no limit.
    clock, sleep : Callable
        For the rate limiter (seconds).
    on_progress : Callable[[ArchiveReplayReport], None] | None
        Called after each chunk with the report so far.

    Returns
    -------
    ArchiveReplayReport

    Raises
    ------
    InvalidReplayRequestError
        The job exists with another request.
    JobStateError
        The job's state could not be read or created (nothing was sent).
    """
    started = clock()
    report = ArchiveReplayReport(mode=request.mode, dry_run=request.dry_run)
    found = search(target.s3, target.archive_bucket, request.archive_filter())
    report.corrupt_objects = [
        {"key": p.key, "line": p.line, "reason": p.reason} for p in found.problems
    ]
    candidates: list[ArchiveRecord | Gone] = list(found.records[: request.max_deliveries])
    report.total = len(candidates)
    if not candidates and not _job_exists(target, request):
        report.status = "empty"
        return report
    limiter = RateLimiter(request.rate_per_second, clock, sleep, burst=CHUNK)
    run = _JobRun(request, target, report, candidates, limiter, clock)
    if not request.dry_run:
        state = run.open_state()
        if state.status == "complete":
            report.cursor = state.cursor
            return report
    run.work(remaining_time_ms, safety_margin_ms, on_progress)
    run.finish(started)
    return report


def _job_exists(target: ArchiveReplayTarget, request: ArchiveReplayRequest) -> bool:
    if request.dry_run or request.job is None:
        return False
    return JobStore(target.s3, target.archive_bucket).load(request.job) is not None


class _JobRun:
    """One run of a job: its state (``None`` in a dry run) and the chunk loop."""

    def __init__(
        self,
        request: ArchiveReplayRequest,
        target: ArchiveReplayTarget,
        report: ArchiveReplayReport,
        candidates: list[ArchiveRecord | Gone],
        limiter: RateLimiter,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.request = request
        self.target = target
        self.report = report
        self.candidates = candidates
        self.limiter = limiter
        self.clock = clock
        self.store = JobStore(target.s3, target.archive_bucket)
        self.state: JobState | None = None
        self.base: JobState | None = None
        self.first_send_at: float | None = None

    def open_state(self) -> JobState:
        """Load the job's state (checked against the request) or create it (with a generation
        for reprocess). A resumed job goes on over the candidates it started with."""
        request, report = self.request, self.report
        job = request.job or new_job_id()
        state = self.store.load(job)
        if state is None:
            state = self._create_state(job)
        check_resumable(state, request.fingerprint())
        if state.cursor > 0 or state.status != "running":
            report.resumed_from = state.cursor
        if state.candidates_sha256 != candidates_digest(self.candidates):
            self.candidates = self._frozen_candidates(state)
        report.total = len(self.candidates)
        report.job, report.generation, report.cursor = job, state.generation, state.cursor
        self.state = state
        self.base = state.model_copy(deep=True)
        return state

    def _create_state(self, job: str) -> JobState:
        request = self.request
        digest = candidates_digest(self.candidates)
        identities = [c.identity for c in self.candidates]
        candidates_key = self.store.save_candidates(job, digest, identities)
        now = datetime.now(UTC).isoformat()
        generation = self.store.allocate_generation(job) if request.mode == "reprocess" else None
        return self.store.create(
            JobState(
                job=job,
                fingerprint=request.fingerprint(),
                request=request.model_dump(mode="json", exclude={"job", "dry_run"}),
                mode=request.mode,
                generation=generation,
                total=len(self.candidates),
                candidates_sha256=digest,
                candidates_key=candidates_key,
                started_at=now,
                updated_at=now,
            )
        )

    def _frozen_candidates(self, state: JobState) -> list[ArchiveRecord | Gone]:
        """The job's candidates as it started, each with its record found now, or
        :class:`Gone` when the archive no longer has it."""
        found = {c.identity: c for c in self.candidates if isinstance(c, ArchiveRecord)}
        return [
            found.get(identity) or Gone(*identity)
            for identity in self.store.load_candidates(state.candidates_key)
        ]

    def work(
        self,
        remaining_time_ms: Callable[[], int] | None,
        safety_margin_ms: int,
        on_progress: Callable[[ArchiveReplayReport], None] | None,
    ) -> None:
        """The chunk loop from the cursor; sets the report's status. The records of the next
        chunk are read while the current one is sent (one read ahead, never a send)."""
        report = self.report
        cursor = report.cursor
        with ThreadPoolExecutor(max_workers=1) as pool:
            ahead = self._lookup(pool, cursor)
            while cursor < len(self.candidates):
                chunk = self.candidates[cursor : cursor + CHUNK]
                if remaining_time_ms is not None:
                    needed_ms = len(chunk) * self.limiter.interval * 1000 + safety_margin_ms
                    if remaining_time_ms() < needed_ms:
                        report.status = "incomplete"
                        break
                try:
                    outcomes = ahead.result()
                    ahead = self._lookup(pool, cursor + len(chunk))
                    self._chunk(chunk, outcomes)
                    cursor += len(chunk)
                    if self.state is not None:
                        self._checkpoint(cursor, "running")  # after the send, never before
                    report.cursor = cursor
                except (RecordLookupError, ChunkNotSentError, JobStateError) as exc:
                    report.status, report.error = "failed", str(exc)
                    break
                if on_progress is not None:
                    on_progress(report)
            else:
                report.status = "complete"
        if self.state is not None:
            final = "complete" if report.status == "complete" else "incomplete"
            try:
                self._checkpoint(cursor, final)
                report.cursor = cursor
            except JobStateError as exc:
                report.status, report.error = "failed", str(exc)

    def _lookup(self, pool: ThreadPoolExecutor, cursor: int) -> Future[dict[Any, str | None]]:
        """Read (in ``pool``) the record outcomes of the chunk at ``cursor``."""
        chunk = self.candidates[cursor : cursor + CHUNK]
        identities = [(r.source, r.delivery_id) for r in chunk]
        return pool.submit(recorded_outcomes, self.target.dynamodb, self.target.table, identities)

    def _chunk(self, chunk: list[ArchiveRecord | Gone], outcomes: dict[Any, str | None]) -> None:
        """Send (real run) or count (dry run) the candidates of one chunk that pass the
        record checks (``outcomes``: their records' outcomes)."""
        report = self.report
        envelopes: list[Envelope] = []
        for record in chunk:
            report.examined += 1
            if isinstance(record, Gone):
                self._failed(record, "no longer in the archive")
                continue
            reason = self._skip_reason(outcomes[(record.source, record.delivery_id)])
            if reason is not None:
                report.skipped[reason] += 1
                continue
            envelope = self._envelope(record)
            if envelope is None:
                continue
            report.matched += 1
            if self.request.dry_run:
                if len(report.sample) < SAMPLE_SIZE:
                    report.sample.append(_summary(record))
                continue
            envelopes.append(envelope)
        if envelopes:
            for _ in envelopes:
                self.limiter.acquire()
                if self.first_send_at is None:
                    self.first_send_at = self.clock()
            send_chunk(self.target.sqs, self.target.queue_url, envelopes)
            report.sent += len(envelopes)

    def finish(self, started: float) -> None:
        """Set the report's elapsed time (since ``started``) and achieved rate."""
        ended = self.clock()
        self.report.elapsed_seconds = ended - started
        if self.first_send_at is not None and ended > self.first_send_at:
            self.report.achieved_rate = self.report.sent / (ended - self.first_send_at)

    def _skip_reason(self, outcome: str | None) -> str | None:
        if self.request.mode == "redeliver":
            return None if outcome is None else "already recorded"
        if outcome is None:
            return "not recorded"
        return None if outcome == "applied" else outcome

    def _envelope(self, record: ArchiveRecord) -> Envelope | None:
        """The envelope to send, or ``None`` (reported in ``failed``) when the archived body is
        corrupt, makes no valid envelope or cannot be stored as a claim check. A dry run
        builds it to check it, never storing a claim-check body."""
        target, dry_run = self.target, self.request.dry_run
        reprocess = None
        if self.request.mode == "reprocess":
            generation = self.state.generation if self.state is not None else None
            reprocess = Reprocess(generation=generation or 1, job=self.report.job or "dry-run")
        try:
            return envelope_from_record(
                record,
                record.body_bytes(),
                inline_body_max_bytes=sys.maxsize if dry_run else target.inline_body_max_bytes,
                s3=target.s3,
                payload_bucket=target.payload_bucket,
                reprocess=reprocess,
            )
        except CorruptRecordError as exc:
            self._failed(record, str(exc))
        except ValueError as exc:  # pydantic's ValidationError: the record makes no envelope
            self._failed(record, f"not a valid envelope: {type(exc).__name__}")
        except Exception as exc:  # a claim-check body not stored: reported, the job goes on
            self._failed(record, f"body not stored: {type(exc).__name__}")
        return None

    def _failed(self, record: ArchiveRecord | Gone, reason: str) -> None:
        self.report.failed.append(
            {"source": record.source, "delivery_id": record.delivery_id, "reason": reason}
        )

    def _checkpoint(self, cursor: int, status: str) -> None:
        """Write the state: this run's counts on top of the counts the run started from."""
        state, report, base = self.state, self.report, self.base
        assert state is not None and base is not None
        state.cursor = cursor
        state.status = status
        state.sent = base.sent + report.sent
        state.skipped = dict(Counter(base.skipped) + report.skipped)
        state.failed = (base.failed + report.failed)[:MAX_LISTED_FAILURES]
        state.failed_count = base.failed_count + len(report.failed)
        state.updated_at = datetime.now(UTC).isoformat()
        self.store.save(state)


def _summary(record: ArchiveRecord) -> dict[str, str]:
    return {
        "source": record.source,
        "delivery_id": record.delivery_id,
        "event_type": record.event_type or "",
        "received_at": record.received_at,
    }
