"""Replay of dead-lettered deliveries: DLQ -> main queue, with a filter, a dry run and a rate limit.

AWS's own redrive (``StartMessageMoveTask``) moves everything, cannot filter, has no dry run and
reports nothing. :func:`replay` does all three and works only against two small interfaces
(:class:`DeadLetterReader`, :class:`MainQueueSender`); the boto3 adapters live in
:mod:`webhook_pipeline.adapters.sqs_replay` and are wired in the replay function and the
operator CLI.

Semantics, per received DLQ message:

- the body is parsed as an :class:`~webhook_pipeline.envelope.Envelope`. A body that does not
  parse is **skipped** (counted in ``skipped`` and in ``malformed``) and left in the DLQ, visible
  again at once: replaying it would only poison the main queue again. It needs a human (inspect it
  with ``webhook-pipeline dlq peek --show-body``, then delete it by hand);
- an envelope that does not match the filter is **skipped** and made visible again at once
  (``ChangeMessageVisibility`` to 0);
- a matching envelope in a **dry run** is counted in ``matched``, listed in ``would_replay`` and
  made visible again at once;
- otherwise the envelope is sent to the main queue with ``replay_count + 1`` and
  ``gate = "replayed"`` (every other field unchanged), and deleted from the DLQ **only after** the
  send succeeded. If the send fails the message is made visible again and counted in ``failed``;
  it stays in the DLQ. If the send succeeded but the delete failed the delivery is counted as
  replayed and in ``delete_failed``: the DLQ copy will be replayed again later, which the
  processor's conditional writes make harmless (recorded once, applied once).

Replays skip the signature and freshness checks (they were verified at receipt) but never the
database guarantees: the processor treats a replayed envelope like any other.

Because a message made visible again can be received again in the same run, the message ids seen
are tracked. A message received a second time is not counted again and is *parked*: kept hidden
(for the visibility timeout of that receive) instead of being released, so the following receives
reach messages not yet seen instead of cycling through the same ones; every parked message is made
visible again at the end of the run. The run ends (``stopped="drained"``) when a receive returns
nothing, or :data:`MAX_IDLE_RECEIVES` receives in a row return only messages already seen.
"""

from __future__ import annotations

import contextlib
import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal

from webhook_pipeline.envelope import Envelope
from webhook_pipeline.errors import MalformedEnvelopeError, QueueOperationError
from webhook_pipeline.replay.ports import DeadLetterReader, DlqMessage, MainQueueSender
from webhook_pipeline.replay.rate import RateLimiter
from webhook_pipeline.replay.report import MessageResult, ReplayReport, summary
from webhook_pipeline.replay.request import ReplayRequest

#: SQS returns at most 10 messages per receive.
SQS_MAX_BATCH = 10


#: Default safety margin before the caller's own timeout (milliseconds).
DEFAULT_SAFETY_MARGIN_MS = 10_000


#: At most this many entries are listed in ``would_replay`` of a dry-run report.
MAX_LISTED = 100


#: Extra seconds added to the visibility timeout of a received batch.
VISIBILITY_MARGIN_SECONDS = 30


#: SQS's maximum visibility timeout (12 hours).
MAX_VISIBILITY_SECONDS = 43_200


#: The run ends after this many receives in a row that brought no message not seen yet.
MAX_IDLE_RECEIVES = 3


StopReason = Literal["drained", "max_messages", "time_limit", "send_failures", "receive_failed"]


def replayed_envelope(envelope: Envelope) -> Envelope:
    """The envelope as it goes back to the main queue: ``replay_count + 1``, ``gate="replayed"``."""
    return envelope.model_copy(
        update={"replay_count": envelope.replay_count + 1, "gate": "replayed"}
    )


class _Stop(Exception):  # internal control flow, not an error
    def __init__(self, reason: StopReason) -> None:
        self.reason = reason


def replay(
    request: ReplayRequest,
    dlq: DeadLetterReader,
    main_queue: MainQueueSender,
    *,
    remaining_time_ms: Callable[[], int] | None = None,
    safety_margin_ms: int = DEFAULT_SAFETY_MARGIN_MS,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
    on_message: Callable[[MessageResult], None] | None = None,
    max_consecutive_failures: int = 5,
) -> ReplayReport:
    """Move matching DLQ messages back to the main queue (or, in a dry run, count them).

    Parameters
    ----------
    request : ReplayRequest
        Validated request (filter, dry run, max messages, rate).
    dlq, main_queue : DeadLetterReader, MainQueueSender
        The queues (see the module docstring for what is done with each message).
    remaining_time_ms : Callable[[], int] | None
        Milliseconds the caller has left (Lambda ``context.get_remaining_time_in_millis``);
        ``None`` = no time limit. The run stops, releasing messages it holds, as soon as less
        than ``safety_margin_ms`` would remain (also before a rate-limit sleep that would cross
        it), and reports ``stopped="time_limit"``.
    safety_margin_ms : int
        Milliseconds kept in reserve before the caller's timeout.
    clock, sleep : Callable
        Monotonic clock (s) and sleep (s) used by the rate limiter (injectable for tests).
    on_message : Callable[[MessageResult], None] | None
        Called after each examined message (progress display, dry-run listing).
    max_consecutive_failures : int
        Stop (``stopped="send_failures"``) after this many send failures in a row.

    Returns
    -------
    ReplayReport
        Counts, ``remaining`` (approximate DLQ depth after the run) and why the run stopped.
    """
    run = _Run(
        request,
        dlq,
        main_queue,
        RateLimiter(None if request.dry_run else request.rate_per_second, clock, sleep),
        ReplayReport(dry_run=request.dry_run),
        remaining_time_ms,
        safety_margin_ms,
        on_message,
        max_consecutive_failures,
    )
    return run.run()


@dataclass
class _Run:
    """The state of one :func:`replay` run: the messages seen, held (received in the current
    batch, not yet examined) and parked (received again: kept hidden until the run ends)."""

    request: ReplayRequest
    dlq: DeadLetterReader
    main_queue: MainQueueSender
    limiter: RateLimiter
    report: ReplayReport
    remaining_time_ms: Callable[[], int] | None
    safety_margin_ms: int
    on_message: Callable[[MessageResult], None] | None
    max_consecutive_failures: int
    seen: set[str] = field(default_factory=set)
    held: list[DlqMessage] = field(default_factory=list)
    parked: dict[str, DlqMessage] = field(default_factory=dict)
    consecutive_failures: int = 0

    def run(self) -> ReplayReport:
        """Receive and examine until a stop reason; release what is held; read the depth."""
        report = self.report
        idle_receives = 0
        try:
            while True:
                if not self._receive():
                    idle_receives += 1
                    if idle_receives >= MAX_IDLE_RECEIVES:
                        raise _Stop("drained")
                    continue
                idle_receives = 0
                while self.held:
                    self._examine(self.held[0])
        except _Stop as stop:
            report.stopped = stop.reason
        finally:
            for message in [*self.held, *self.parked.values()]:
                self._release(message)
        report.complete = report.stopped == "drained"
        try:
            report.remaining = self.dlq.approximate_depth()
        except QueueOperationError:
            report.remaining = None
        return report

    def _check_time(self) -> None:
        if _out_of_time(self.remaining_time_ms, self.safety_margin_ms, 0.0):
            raise _Stop("time_limit")

    def _release(self, message: DlqMessage) -> None:
        # On failure it becomes visible anyway when its visibility timeout runs out.
        with contextlib.suppress(QueueOperationError):
            self.dlq.change_visibility(message, 0)

    def _finish(self, result: MessageResult) -> None:
        if self.on_message is not None:
            self.on_message(result)

    def _receive(self) -> bool:
        """Receive the next batch into :attr:`held`; ``False`` when it brought only messages
        already seen (those are parked).

        Raises
        ------
        _Stop
            ``max_messages``, ``time_limit``, ``receive_failed`` or ``drained`` (nothing came).
        """
        report = self.report
        budget = self.request.max_messages - report.examined
        if budget <= 0:
            raise _Stop("max_messages")
        self._check_time()
        batch = min(SQS_MAX_BATCH, budget)
        try:
            received = list(self.dlq.receive(batch, _visibility_for(batch, self.limiter.interval)))
        except QueueOperationError as exc:
            report.error = str(exc)
            raise _Stop("receive_failed") from None
        if not received:
            raise _Stop("drained")
        self.held = []
        for message in received:
            if message.message_id in self.seen:
                self.parked[message.message_id] = message  # newest receipt handle wins
            elif all(m.message_id != message.message_id for m in self.held):
                self.held.append(message)
        return bool(self.held)

    def _examine(self, message: DlqMessage) -> None:
        """Parse and filter the first held message, then list it (dry run) or send it; it
        leaves :attr:`held` unless the time limit stops the run first."""
        report = self.report
        self._check_time()
        self.seen.add(message.message_id)
        report.examined += 1
        try:
            envelope = Envelope.from_json(message.body)
        except MalformedEnvelopeError as exc:
            report.skipped += 1
            report.malformed += 1
            self._release(self.held.pop(0))
            self._finish(MessageResult(message, None, "malformed", str(exc)))
            return
        if not self.request.filter.matches(envelope):
            report.skipped += 1
            self._release(self.held.pop(0))
            self._finish(MessageResult(message, envelope, "skipped", "filter"))
            return
        report.matched += 1
        if self.request.dry_run:
            if len(report.would_replay) < MAX_LISTED:
                report.would_replay.append(summary(envelope, message))
            self._release(self.held.pop(0))
            self._finish(MessageResult(message, envelope, "would_replay"))
            return
        if _out_of_time(self.remaining_time_ms, self.safety_margin_ms, self.limiter.delay()):
            # Not examined after all: it stays for the next run.
            self.seen.discard(message.message_id)
            report.examined -= 1
            report.matched -= 1
            raise _Stop("time_limit")
        self.limiter.acquire()
        self.held.pop(0)
        self._send(message, envelope)

    def _send(self, message: DlqMessage, envelope: Envelope) -> None:
        """Send to the main queue, then delete from the DLQ (only after the send succeeded).

        Raises
        ------
        _Stop
            ``send_failures``: :attr:`max_consecutive_failures` sends failed in a row.
        """
        report = self.report
        try:
            self.main_queue.send(replayed_envelope(envelope).to_json(), message.message_attributes)
        except QueueOperationError as exc:
            report.failed += 1
            self.consecutive_failures += 1
            self._release(message)
            self._finish(MessageResult(message, envelope, "failed", str(exc)))
            if self.consecutive_failures >= self.max_consecutive_failures:
                raise _Stop("send_failures") from None
            return
        self.consecutive_failures = 0
        report.replayed += 1
        try:
            self.dlq.delete(message)
        except QueueOperationError as exc:
            report.delete_failed += 1
            self._finish(MessageResult(message, envelope, "delete_failed", str(exc)))
            return
        self._finish(MessageResult(message, envelope, "replayed"))


def _out_of_time(
    remaining_time_ms: Callable[[], int] | None, safety_margin_ms: int, wait_seconds: float
) -> bool:
    """Whether waiting ``wait_seconds`` would leave less than the safety margin."""
    if remaining_time_ms is None:
        return False
    return remaining_time_ms() - wait_seconds * 1000 < safety_margin_ms


def _visibility_for(batch: int, interval: float) -> int:
    """Visibility timeout (s) long enough to work through a batch at the rate limit."""
    seconds = math.ceil(batch * interval) + VISIBILITY_MARGIN_SECONDS
    return min(seconds, MAX_VISIBILITY_SECONDS)
