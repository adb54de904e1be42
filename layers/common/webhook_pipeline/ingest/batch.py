"""A batched POST (SendGrid, HubSpot, Adyen, LINE, Microsoft Graph): each event claimed and
enqueued as its own envelope, the claims confirmed chunk by chunk (I1), within the request's
time budget (I6).

One Redis round trip claims every event of the POST. Then, per ``SendMessageBatch`` call (10
entries at most): the call, and one round trip confirming the claims of the events it enqueued.
Before each call the request's remaining time is compared with the worst case of one more call,
its confirm and the release of the claims left (``IngestPolicy.batch_chunk_reserve_ms``); when
it does not fit, nothing more is sent, the claims of the events not sent are released and the
answer is 503 + ``Retry-After`` (``time_budget_exhausted``). What was sent stays confirmed, so
the sender's retry finds those events duplicates and sends only the rest: each retry makes
progress, whatever the batch's size.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

from webhook_pipeline.envelope import Envelope
from webhook_pipeline.errors import DeliveryInFlightError, EnqueueError, TimeBudgetError
from webhook_pipeline.ingest.claims import Claim, ClaimOutcome, ClaimResult
from webhook_pipeline.ingest.envelopes import EnvelopeFactory
from webhook_pipeline.ingest.events import DeliveryEvent
from webhook_pipeline.ingest.gatekeeper import Gatekeeper
from webhook_pipeline.ingest.policy import IngestPolicy
from webhook_pipeline.ingest.ports import EnvelopeQueue
from webhook_pipeline.observability import MetricName, count, logger
from webhook_pipeline.providers.model import Answer
from webhook_pipeline.sources import ResolvedSource

#: Delivery ids per ``batch enqueued`` log line (the first line also has the counts; every id
#: enqueued is on one line, for ``webhook-pipeline audit``): 500 ids of up to 256 characters
#: stay under CloudWatch Logs' 256 KB event size, which truncates a longer line.
IDS_PER_LOG_LINE = 500


@dataclass(frozen=True)
class TimeBudget:
    """What is left of one request's time.

    ``remaining_ms`` gives the milliseconds the request may still run (the handler: its
    ``INGEST_TIME_BUDGET_MS`` less the time spent, never more than Lambda's remaining time);
    the default never runs out.
    """

    remaining_ms: Callable[[], float] = field(default=lambda: math.inf)

    def allows(self, needed_ms: float) -> bool:
        """Whether ``needed_ms`` milliseconds are still left."""
        return self.remaining_ms() >= needed_ms


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
class _Sent:
    """What the chunks of one POST did, by index into its envelopes."""

    sent: dict[int, str] = field(default_factory=dict)
    failed: dict[int, str] = field(default_factory=dict)
    out_of_time: bool = False


@dataclass
class BatchIngest:
    """Claim, enqueue and acknowledge the events of one batched POST: for n small new events,
    ceil(n / 10) ``SendMessageBatch`` calls and 1 + ceil(n / 10) Redis round trips (the claims,
    then one confirm per call; one more to release claims when an event is not enqueued)."""

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
        claims = [new_claim(event) for event in events]
        results = self.gatekeeper.claim_many(claims)
        new, in_flight = self._new_events(events, results)
        held = [claims[i] if results[i] is not None else None for i in new]
        try:
            envelopes = [
                factory.build(events[i], claims[i].token, results[i] is not None, (i, len(events)))
                for i in new
            ]
        except Exception as exc:  # the claim-check body could not be stored
            count(MetricName.ENQUEUE_FAILED)
            self.gatekeeper.release([claim for claim in held if claim is not None])
            raise EnqueueError(detail=type(exc).__name__) from exc
        done = self._send(source, envelopes, held, budget)
        self.gatekeeper.release(
            [claim for i, claim in enumerate(held) if claim is not None and i not in done.sent]
        )
        return self._answer(source, received, [events[i] for i in new], in_flight, done)

    @staticmethod
    def _answer(
        source: ResolvedSource,
        received: list[DeliveryEvent],
        new: list[DeliveryEvent],
        in_flight: int,
        done: _Sent,
    ) -> Answer:
        """Log what was enqueued (every id, for ``webhook-pipeline audit``) and answer."""
        count(MetricName.ACCEPTED, len(done.sent))
        ids = [new[i].delivery_id for i in sorted(done.sent)]
        logger.info(
            "batch enqueued",
            extra={
                "events": len(received),
                "delivery_ids": ids[:IDS_PER_LOG_LINE],
                "accepted": len(done.sent),
                "duplicates": len(received) - len(new) - in_flight,
                "in_flight": in_flight,
                "failed": len(done.failed),
                "not_sent": len(new) - len(done.sent) - len(done.failed),
            },
        )
        for start in range(IDS_PER_LOG_LINE, len(ids), IDS_PER_LOG_LINE):
            logger.info(
                "batch enqueued",
                extra={"continued": True, "delivery_ids": ids[start : start + IDS_PER_LOG_LINE]},
            )
        if done.failed:
            count(MetricName.ENQUEUE_FAILED, len(done.failed))
        if len(done.sent) < len(new):
            missing = f"{len(new) - len(done.sent)} of {len(new)} not enqueued"
            if done.out_of_time and not done.failed:
                logger.warning("time budget ran out; the sender's retry sends the rest")
                raise TimeBudgetError(detail=missing)
            raise EnqueueError(detail=missing)
        if in_flight:
            raise DeliveryInFlightError(detail=f"{in_flight} events in flight elsewhere")
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
        envelopes: list[Envelope],
        held: list[Claim | None],
        budget: TimeBudget,
    ) -> _Sent:
        """Send ``envelopes`` chunk by chunk, confirming each chunk's claims (``held[i]`` is the
        claim of envelope ``i``, ``None`` where the gate was bypassed) before the next, while the
        budget leaves time for one more chunk."""
        done = _Sent()
        chunks = self.queue.send_chunks(envelopes)
        while len(done.sent) + len(done.failed) < len(envelopes):
            if not budget.allows(self.policy.batch_chunk_reserve_ms):
                done.out_of_time = True
                return done
            result = next(chunks, None)
            if result is None:  # a call failed as a whole: the later chunks were not tried
                return done
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
