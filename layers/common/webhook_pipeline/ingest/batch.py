"""A batched POST (SendGrid, HubSpot, Adyen, LINE, Microsoft Graph): each event claimed and
enqueued as its own envelope, the claims confirmed chunk by chunk (I1), within the request's
time budget (I6).

The events are claimed in windows (:func:`claim_windows`: the first ten, then 100, 200, ... up
to 1,000), one Redis round trip each, and each window's new events are sent before the next
window is claimed; their envelopes are built chunk by chunk. Per ``SendMessageBatch`` call (10
entries at most): the call, and one round trip confirming the claims of the events it enqueued.
So the work before the first call is parsing and verifying the POST and claiming ten events,
whatever the batch's size. Before each call the request's remaining time is compared with the
worst case of one more call, its confirm and the release of the claims left
(``IngestPolicy.batch_chunk_reserve_ms``; before a window, one claim more); when it does not
fit, nothing more is sent, the claims of the events not sent are released and the answer is
503 + ``Retry-After`` (``time_budget_exhausted``). The request's first call is held to the
function's own remaining time (its timeout), not to the softer ``INGEST_TIME_BUDGET_MS``, so
every attempt whose parsing and verifying leave room for one call sends one. What was sent
stays confirmed, so the sender's retry finds those events duplicates and sends only the rest:
each retry makes progress, whatever the batch's size.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from webhook_pipeline.envelope import Envelope
from webhook_pipeline.errors import (
    DeliveryInFlightError,
    EnqueueError,
    GateClosedError,
    TimeBudgetError,
)
from webhook_pipeline.ingest.claims import Claim, ClaimOutcome, ClaimResult
from webhook_pipeline.ingest.envelopes import EnvelopeFactory
from webhook_pipeline.ingest.events import DeliveryEvent
from webhook_pipeline.ingest.gatekeeper import Gatekeeper
from webhook_pipeline.ingest.policy import IngestPolicy
from webhook_pipeline.ingest.ports import BatchSendResult, EnvelopeQueue
from webhook_pipeline.observability import MetricName, count, logger
from webhook_pipeline.providers.model import Answer
from webhook_pipeline.sources import ResolvedSource

#: Delivery ids per ``batch enqueued`` log line (the first line also has the counts; every id
#: enqueued is on one line, for ``webhook-pipeline audit``): 500 ids of up to 256 characters
#: stay under CloudWatch Logs' 256 KB event size, which truncates a longer line.
IDS_PER_LOG_LINE = 500
#: Events claimed before the first call (one ``SendMessageBatch`` of them), then the size of
#: the second window, doubled per window up to the last: a window's claims are released in one
#: round trip when time runs out.
FIRST_WINDOW = 10
SECOND_WINDOW = 100
MAX_WINDOW = 1_000


@dataclass(frozen=True)
class TimeBudget:
    """What is left of one request's time.

    ``remaining_ms`` gives the milliseconds the request may still run (the handler: its
    ``INGEST_TIME_BUDGET_MS`` less the time spent, never more than Lambda's remaining time);
    ``hard_ms`` the milliseconds before the function is stopped (Lambda's remaining time, its
    timeout less the time spent). The defaults never run out.
    """

    remaining_ms: Callable[[], float] = field(default=lambda: math.inf)
    hard_ms: Callable[[], float] = field(default=lambda: math.inf)

    def allows(self, needed_ms: float, *, hard: bool = False) -> bool:
        """Whether ``needed_ms`` milliseconds are still left (``hard``: before the function's
        timeout, ignoring the softer budget)."""
        return (self.hard_ms if hard else self.remaining_ms)() >= needed_ms


def first_of_each_id(
    events: list[DeliveryEvent],
) -> tuple[list[DeliveryEvent], list[tuple[DeliveryEvent, DeliveryEvent]]]:
    """The events of one POST with each delivery id once (the first copy, in order), and each
    later copy with the first it repeats: one POST naming an id twice is one delivery (claiming
    both would find the first still pending and answer 503)."""
    first: dict[str, DeliveryEvent] = {}
    repeats = []
    for event in events:
        if event.delivery_id in first:
            repeats.append((event, first[event.delivery_id]))
        else:
            first[event.delivery_id] = event
    return list(first.values()), repeats


def check_body(event: DeliveryEvent, stored_digest: str | None) -> None:
    """Count and log a duplicate whose content differs from the copy claimed before it."""
    if stored_digest is not None and stored_digest != event.digest:
        count(MetricName.DUPLICATE_BODY_MISMATCH)
        logger.warning(
            "duplicate delivery id with a different body",
            extra={
                "delivery_id": event.delivery_id,
                "stored_sha256": stored_digest,
                "received_sha256": event.digest,
            },
        )


@dataclass
class _Progress:
    """What one POST's windows did: ``new`` lists the events claimed (or with the gate bypassed)
    in order; ``sent`` and ``failed`` index into it."""

    new: list[DeliveryEvent] = field(default_factory=list)
    sent: dict[int, str] = field(default_factory=dict)
    failed: dict[int, str] = field(default_factory=dict)
    duplicates: int = 0
    in_flight: int = 0
    unclaimed: int = 0
    calls: int = 0
    out_of_time: bool = False
    stopped: bool = False
    error: GateClosedError | None = None


def claim_windows(n: int) -> Iterator[range]:
    """The windows the ``n`` events of a POST are claimed in, in order: the first
    :data:`FIRST_WINDOW` events (one ``SendMessageBatch`` call), then windows of
    :data:`SECOND_WINDOW` events doubling up to :data:`MAX_WINDOW`."""
    start, size = 0, FIRST_WINDOW
    while start < n:
        yield range(start, min(start + size, n))
        start += size
        size = min(max(size * 2, SECOND_WINDOW), MAX_WINDOW)


@dataclass
class BatchIngest:
    """Claim, enqueue and acknowledge the events of one batched POST: for n small new events,
    ceil(n / 10) ``SendMessageBatch`` calls and ceil(n / 10) + w Redis round trips (one confirm
    per call, one claim per window, w = len(claim_windows(n)); one more per window to release
    claims when an event is not enqueued)."""

    gatekeeper: Gatekeeper
    queue: EnvelopeQueue
    policy: IngestPolicy

    def handle(
        self,
        source: ResolvedSource,
        received: list[DeliveryEvent],
        new_claim: Callable[[DeliveryEvent], Claim],
        factory: EnvelopeFactory,
        budget: TimeBudget,
    ) -> Answer:
        """The answer to a verified batched POST whose events are ``received`` (in order).

        The events are claimed window by window (:func:`claim_windows`), each window's new
        events built into envelopes and sent chunk by chunk before the next window is claimed,
        so the work before the first call does not grow with the batch beyond parsing and
        verifying it. The first call of the request needs only the function's remaining time
        to allow its worst case (``TimeBudget.hard_ms``); later windows and calls need the
        softer ``remaining_ms``.

        Returns
        -------
        Answer
            202 (some events new) or 200 (all duplicates) with the provider's acknowledgement
            (by default ``{"status", "events", "accepted", "duplicates"}``).

        Raises
        ------
        EnqueueError
            An event was not enqueued (a claim-check body not stored, an entry SQS refused or
            did not answer, a call that failed): 503, the claims of the events not enqueued
            released, those enqueued confirmed.
        TimeBudgetError
            The time budget ran out before every chunk was sent: 503 as above.
        DeliveryInFlightError
            Every new event was enqueued, but another request holds the claim of some (503).
        """
        events, repeats = first_of_each_id(received)
        for repeat, earlier in repeats:
            count(MetricName.DUPLICATE_DISCARDED)
            check_body(repeat, earlier.digest)
        progress = _Progress(duplicates=len(repeats))
        for window in claim_windows(len(events)):
            needed = self.policy.batch_chunk_reserve_ms + self.policy.batch_claim_reserve_ms
            stop = progress.stopped or progress.out_of_time
            if stop or not budget.allows(needed, hard=progress.calls == 0):
                progress.out_of_time = not progress.stopped
                progress.unclaimed = len(events) - window.start
                break
            try:
                self._window(source, events, window, new_claim, factory, budget, progress)
            except GateClosedError as exc:  # fail closed: what was sent is still logged
                progress.error, progress.stopped = exc, True
                progress.unclaimed = len(events) - window.start
                break
        return self._answer(source, received, progress)

    def _window(
        self,
        source: ResolvedSource,
        events: list[DeliveryEvent],
        window: range,
        new_claim: Callable[[DeliveryEvent], Claim],
        factory: EnvelopeFactory,
        budget: TimeBudget,
        progress: _Progress,
    ) -> None:
        """Claim the events of ``window``, send the new ones (envelopes built chunk by chunk),
        confirm what was sent and release the claims of the rest."""
        claims = [new_claim(events[i]) for i in window]
        results = self.gatekeeper.claim_many(claims)
        new, in_flight = self._new_events([events[i] for i in window], results)
        progress.in_flight += in_flight
        progress.duplicates += len(window) - len(new) - in_flight
        base = len(progress.new)
        progress.new.extend(events[window.start + i] for i in new)
        held = [claims[i] if results[i] is not None else None for i in new]
        envelopes = (
            factory.build(
                events[window.start + i],
                claims[i].token,
                results[i] is not None,
                (window.start + i, len(events)),
            )
            for i in new
        )
        sent = self._send(source, envelopes, held, budget, progress)
        for i, message_id in sent.sent.items():
            progress.sent[base + i] = message_id
        for i, reason in sent.failed.items():
            progress.failed[base + i] = reason
        self.gatekeeper.release(
            [claim for i, claim in enumerate(held) if claim is not None and i not in sent.sent]
        )

    @staticmethod
    def _answer(source: ResolvedSource, received: list[DeliveryEvent], done: _Progress) -> Answer:
        """Log what was enqueued (every id, for ``webhook-pipeline audit``) and answer."""
        new = done.new
        count(MetricName.ACCEPTED, len(done.sent))
        ids = [new[i].delivery_id for i in sorted(done.sent)]
        logger.info(
            "batch enqueued",
            extra={
                "events": len(received),
                "delivery_ids": ids[:IDS_PER_LOG_LINE],
                "accepted": len(done.sent),
                "duplicates": done.duplicates,
                "in_flight": done.in_flight,
                "failed": len(done.failed),
                "not_sent": len(new) - len(done.sent) - len(done.failed) + done.unclaimed,
            },
        )
        for start in range(IDS_PER_LOG_LINE, len(ids), IDS_PER_LOG_LINE):
            logger.info(
                "batch enqueued",
                extra={"continued": True, "delivery_ids": ids[start : start + IDS_PER_LOG_LINE]},
            )
        if done.failed:
            count(MetricName.ENQUEUE_FAILED, len(done.failed))
        if done.error is not None:
            raise done.error
        if len(done.sent) < len(new) or done.unclaimed:
            total = len(new) + done.unclaimed
            missing = f"{total - len(done.sent)} of {total} not enqueued"
            if done.out_of_time and not done.failed and not done.stopped:
                logger.warning("time budget ran out; the sender's retry sends the rest")
                raise TimeBudgetError(detail=missing)
            raise EnqueueError(detail=missing)
        if done.in_flight:
            raise DeliveryInFlightError(detail=f"{done.in_flight} events in flight elsewhere")
        return source.provider.acknowledgement(
            202 if new else 200,
            {
                "status": "accepted" if new or not received else "duplicate",
                "events": len(received),
                "accepted": len(new),
                "duplicates": len(received) - len(new),
            },
        )

    def _send(
        self,
        source: ResolvedSource,
        envelopes: Iterator[Envelope],
        held: list[Claim | None],
        budget: TimeBudget,
        progress: _Progress,
    ) -> BatchSendResult:
        """Send ``envelopes`` chunk by chunk, confirming each chunk's claims (``held[i]`` is the
        claim of envelope ``i``, ``None`` where the gate was bypassed) before the next, while the
        budget leaves time for one more chunk (the request's first: its hard limit)."""
        done = BatchSendResult()
        chunks = self.queue.send_chunks(envelopes)
        while len(done.sent) + len(done.failed) < len(held):
            if not budget.allows(self.policy.batch_chunk_reserve_ms, hard=progress.calls == 0):
                progress.out_of_time = True
                return done
            try:
                result = next(chunks, None)
            except Exception as exc:  # a claim-check body could not be stored
                count(MetricName.ENQUEUE_FAILED)
                logger.warning("envelope not built", extra={"error": type(exc).__name__})
                progress.stopped = True
                return done
            if result is None:  # a call failed as a whole: the later chunks were not tried
                progress.stopped = True
                return done
            progress.calls += 1
            done.sent.update(result.sent)
            done.failed.update(result.failed)
            confirmed = [claim for i in result.sent if (claim := held[i]) is not None]
            if confirmed:
                self.gatekeeper.confirm(confirmed, source)
        return done

    @staticmethod
    def _new_events(
        events: list[DeliveryEvent], results: list[ClaimResult | None]
    ) -> tuple[list[int], int]:
        """The indexes of the events claimed now (or with the gate bypassed) and how many are
        in flight elsewhere; duplicates are counted and their bodies compared."""
        new: list[int] = []
        in_flight = 0
        for index, (event, result) in enumerate(zip(events, results, strict=True)):
            if result is None or result.outcome is ClaimOutcome.CLAIMED:
                new.append(index)
            elif result.outcome is ClaimOutcome.DUPLICATE:
                count(MetricName.DUPLICATE_DISCARDED)
                check_body(event, result.stored_digest)
            else:
                in_flight += 1
        return new, in_flight
