"""Processor domain: from an SQS message to an outcome, in order per resource.

Outcomes (:class:`Outcome`): ``applied`` (recorded, watermark moved or equal), ``duplicate`` (the
delivery was already recorded), ``stale`` (older than the resource watermark: recorded as
stale and acknowledged), ``retry`` (transient failure: reported in ``batchItemFailures``),
``malformed`` (poison: reported as failed, reaches the DLQ through redrive) and ``bug`` (the store
rejected a request as invalid: reported as failed, logged at ERROR).

Ordering: the records of one batch are grouped by (source, resource key) (records without a
resource key by (source, delivery id), so two copies of one delivery never race each other); each
group is processed in ascending sequence order (ties keep arrival order) and the groups run
concurrently on a bounded thread pool.

Coalescing (``coalesce=True``, as the handler wires it): a group of k > 1 deliveries of one
resource is written with one conditional write (:mod:`webhook_pipeline.process.coalesce`: the
watermark read once, every outcome decided as k writes in order would, all records and the
watermark committed together); when that write does not commit for any reason, the group's
deliveries are recorded one by one as without coalescing. Hooks run after the write, per applied
delivery, in the group's order.

Reprocess (an envelope with ``reprocess``, :mod:`webhook_pipeline.process.reprocess`): no record,
no watermark; the hook of an applied delivery runs again once per generation (``reprocessed``),
or nothing runs (``skipped``). Never part of a group write; in its group's sequence order.

This module knows nothing of boto3: the store and the payload reader are Protocols injected by the
handler.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import Executor
from datetime import datetime, timedelta

from webhook_pipeline.envelope import Envelope, utcnow
from webhook_pipeline.errors import (
    HookError,
    MalformedEnvelopeError,
    StoreBugError,
    TransientError,
)
from webhook_pipeline.hooks import Effects, Hook, HookRegistry
from webhook_pipeline.observability import logger
from webhook_pipeline.process.bodies import load_body
from webhook_pipeline.process.coalesce import chunk_group, plan_group
from webhook_pipeline.process.model import (
    DeliveryRecord,
    FailureNote,
    HookState,
    Message,
    Outcome,
    RecordResult,
    StoreResult,
    attempt_token,
)
from webhook_pipeline.process.planning import plan, segments
from webhook_pipeline.process.ports import DeliveryStore, PayloadReader
from webhook_pipeline.process.reprocess import Reprocessor, call_hook, hook_event


class ProcessorService:
    """Processes SQS batches of envelopes into outcomes.

    Parameters
    ----------
    store : DeliveryStore
        Conditional writes (delivery record + resource watermark).
    payloads : PayloadReader
        Claim-check bodies.
    hooks : HookRegistry
        User hooks by (source, event type).
    executor : Executor | None
        Bounded pool the groups of a batch run on; ``None`` runs them one after the other.
    retention : timedelta
        Delivery record TTL (``DELIVERY_RETENTION_DAYS``).
    clock : Callable[[], datetime]
        Current UTC time (injectable for tests).
    coalesce : bool
        Write the deliveries of one resource in one batch with one conditional write
        (:mod:`webhook_pipeline.process.coalesce`), falling back to one write per delivery
        whenever that write does not commit. The attribute can be switched (benchmarks).
    """

    def __init__(
        self,
        store: DeliveryStore,
        payloads: PayloadReader,
        hooks: HookRegistry,
        *,
        executor: Executor | None = None,
        retention: timedelta = timedelta(days=30),
        clock: Callable[[], datetime] = utcnow,
        coalesce: bool = False,
    ) -> None:
        self._store = store
        self._payloads = payloads
        self._hooks = hooks
        self._executor = executor
        self._retention = retention
        self._clock = clock
        self.coalesce = coalesce
        self._reprocessor = Reprocessor(store, payloads, hooks)

    def process_batch(self, messages: Sequence[Message]) -> dict[str, RecordResult]:
        """Process a whole batch: groups concurrently, each group in sequence order.

        Returns
        -------
        dict[str, RecordResult]
            One result per message id. Never raises for a single record's failure.
        """
        malformed, groups = plan(messages)
        results: dict[str, RecordResult] = {r.message_id: r for r in malformed}
        if self._executor is None or len(groups) <= 1:
            group_results: Iterable[list[RecordResult]] = map(self._process_group, groups)
        else:
            group_results = self._executor.map(self._process_group, groups)
        for group in group_results:
            results.update((r.message_id, r) for r in group)
        self._note_failures(messages, results)
        return results

    def _note_failures(self, messages: Sequence[Message], results: dict[str, RecordResult]) -> None:
        """Record why each non-transient failure failed, so the DLQ can show it (invariant I5).

        Transient retries (throttling, conflicts) are not noted: they usually succeed, and a
        write per retry would add load to a throttled table. Best effort: a note that cannot be
        written is logged, never turned into a failure of its own.
        """
        receive_counts = {m.message_id: m.receive_count for m in messages}
        for result in results.values():
            if not (result.outcome in (Outcome.MALFORMED, Outcome.BUG) or result.hook == "failed"):
                continue
            env = result.envelope
            note = FailureNote(
                message_id=result.message_id,
                outcome=result.outcome,
                reason=(result.reason or result.outcome.value)[:1000],
                receive_count=receive_counts.get(result.message_id, 1),
                failed_at=self._clock(),
                source=env.source if env else None,
                delivery_id=env.delivery_id if env else None,
            )
            try:
                self._store.record_failure(note)
            except (TransientError, StoreBugError) as exc:
                logger.warning(
                    "failure note not written",
                    extra={"message_id": note.message_id, "error": str(exc)[:200]},
                )

    def _check_body(self, envelope: Envelope, stored: StoreResult) -> bool:
        """Whether a copy of a recorded delivery has other content; if so it is logged (both
        digests, never the bodies) and noted on the record. It stays a duplicate (invariant I8);
        the handler counts ``DuplicateBodyMismatch``."""
        if stored.stored_digest is None or stored.stored_digest == envelope.content_digest:
            return False
        logger.warning(
            "duplicate delivery id with a different body",
            extra={
                "source": envelope.source,
                "delivery_id": envelope.delivery_id,
                "stored_sha256": stored.stored_digest,
                "received_sha256": envelope.content_digest,
            },
        )
        try:
            self._store.note_body_mismatch(
                envelope.source, envelope.delivery_id, envelope.content_digest
            )
        except (TransientError, StoreBugError) as exc:
            logger.warning("body mismatch not noted", extra={"error": str(exc)[:200]})
        return True

    def _process_group(self, group: list[tuple[Message, Envelope]]) -> list[RecordResult]:
        if not self.coalesce or group[0][1].resource_key is None:
            return [self.process(message, envelope) for message, envelope in group]
        results: list[RecordResult] = []
        for run in segments(group):  # a reprocess never joins a group write
            if len(run) > 1:
                results.extend(self._process_coalesced(run))
            else:
                results.append(self.process(*run[0]))
        return results

    def _process_coalesced(self, group: list[tuple[Message, Envelope]]) -> list[RecordResult]:
        """One resource's deliveries: one write for all (:mod:`.coalesce`) when it commits,
        each delivery on its own otherwise; then hooks in order, as :meth:`process` runs them."""
        members: list[RecordResult | tuple[Message, Envelope, bytes, Hook | None]] = []
        records: list[DeliveryRecord] = []
        for message, envelope in group:
            loaded = self._load(message, envelope)
            if isinstance(loaded, RecordResult):
                members.append(loaded)
                continue
            handler = self._hooks.find(envelope.source, envelope.event_type)
            members.append((message, envelope, loaded, handler))
            records.append(self._record(message, envelope, hook_pending=handler is not None))
        committed = self._write_group(records)
        results: list[RecordResult] = []
        index = 0
        for member in members:
            if isinstance(member, RecordResult):
                results.append(member)
                continue
            message, envelope, body, handler = member
            record, done = records[index], committed.get(index)
            index += 1
            if done is None:  # a copy of an earlier delivery, or the group write failed
                results.append(self._store_and_finish(message, envelope, body, handler, record))
            else:
                results.append(self._finish(message, envelope, body, handler, done))
        return results

    def _write_group(self, records: list[DeliveryRecord]) -> dict[int, StoreResult]:
        """Read the watermark, decide the outcomes, write them in chunks of the store's limit.

        Returns
        -------
        dict[int, StoreResult]
            By position in ``records``, the deliveries whose write committed (none when the
            watermark could not be read).
        """
        if len(records) < 2:
            return {}
        first = records[0]
        assert first.resource_key is not None
        try:
            watermark = self._store.read_watermark(first.source, first.resource_key)
        except (TransientError, StoreBugError) as exc:
            logger.info("watermark not read; per delivery", extra={"error": str(exc)[:200]})
            return {}
        planned = plan_group(records, watermark)
        committed: dict[int, StoreResult] = {}
        for write in chunk_group(planned, watermark, self._store.group_limit):
            reason = self._store.record_group(write)
            if reason is not None:
                extra: dict[str, object] = {"source": write.source, "reason": reason[:200]}
                extra |= {"resource_key": write.resource_key, "deliveries": len(write.writes)}
                logger.info("group write not committed; per delivery", extra=extra)
                break
            committed.update((w.index, w.store_result()) for w in write.writes)
        return committed

    def _load(self, message: Message, envelope: Envelope) -> bytes | RecordResult:
        """The checked body, or the result of a message whose body cannot be loaded."""
        mid = message.message_id
        try:
            return load_body(envelope, self._payloads)
        except MalformedEnvelopeError as exc:
            return RecordResult(mid, Outcome.MALFORMED, envelope, reason=str(exc), error=exc)
        except TransientError as exc:
            return RecordResult(mid, Outcome.RETRY, envelope, reason=str(exc), error=exc)

    def process(self, message: Message, envelope: Envelope) -> RecordResult:
        """Load and check the body, record the delivery, run its hook when one is due; a
        reprocess envelope (:mod:`.reprocess`) records nothing and runs its hook again."""
        if envelope.reprocess is not None:
            return self._reprocessor.reprocess(message, envelope)
        body = self._load(message, envelope)
        if isinstance(body, RecordResult):
            return body
        handler = self._hooks.find(envelope.source, envelope.event_type)
        record = self._record(message, envelope, hook_pending=handler is not None)
        return self._store_and_finish(message, envelope, body, handler, record)

    def _store_and_finish(
        self,
        message: Message,
        envelope: Envelope,
        body: bytes,
        handler: Hook | None,
        record: DeliveryRecord,
    ) -> RecordResult:
        """Record one delivery on its own (:meth:`DeliveryStore.record`), then finish it."""
        mid = message.message_id
        try:
            stored = self._store.record(record)
        except TransientError as exc:
            return RecordResult(mid, Outcome.RETRY, envelope, reason=str(exc), error=exc)
        except StoreBugError as exc:
            return RecordResult(mid, Outcome.BUG, envelope, reason=str(exc), error=exc)
        return self._finish(message, envelope, body, handler, stored)

    def _finish(
        self,
        message: Message,
        envelope: Envelope,
        body: bytes,
        handler: Hook | None,
        stored: StoreResult,
    ) -> RecordResult:
        """The result of a recorded delivery: a differing copy noted, its hook run when due."""
        mismatch = stored.outcome is Outcome.DUPLICATE and self._check_body(envelope, stored)
        reason = _describe(stored)
        hook_due = handler is not None and (
            stored.outcome is Outcome.APPLIED
            or (
                stored.outcome is Outcome.DUPLICATE
                and stored.stored_outcome is Outcome.APPLIED
                and stored.hook_state is HookState.PENDING
            )
        )
        if not hook_due or handler is None:
            return RecordResult(
                message.message_id,
                stored.outcome,
                envelope,
                reason=reason,
                body_mismatch=mismatch,
                recorded_outcome=stored.stored_outcome,
            )
        return self._run_hook(
            message, envelope, body, handler, stored, reason=reason, mismatch=mismatch
        )

    def _record(
        self, message: Message, envelope: Envelope, *, hook_pending: bool
    ) -> DeliveryRecord:
        """The delivery record of ``envelope`` as of now, expiring after the retention."""
        now = self._clock()
        return DeliveryRecord(
            source=envelope.source,
            delivery_id=envelope.delivery_id,
            event_type=envelope.event_type,
            resource_key=envelope.resource_key,
            sequence=envelope.sequence,
            received_at=envelope.received_at,
            recorded_at=now,
            expires_at=int((now + self._retention).timestamp()),
            body_size=envelope.body_size,
            body_sha256=envelope.body_sha256,
            content_sha256=envelope.content_digest,
            hook_pending=hook_pending,
            message_id=message.message_id,
            attempt_token=attempt_token(message),
            replay_count=envelope.replay_count,
        )

    def _run_hook(
        self,
        message: Message,
        envelope: Envelope,
        body: bytes,
        handler: Hook,
        stored: StoreResult,
        *,
        reason: str | None,
        mismatch: bool,
    ) -> RecordResult:
        """Run the hook that is due for a recorded delivery, then mark it done."""
        mid = message.message_id
        returned = call_hook(handler, hook_event(envelope, body))
        if isinstance(returned, HookError):
            return RecordResult(
                mid, Outcome.RETRY, envelope, reason=str(returned), hook="failed", error=returned
            )
        effects = returned.writes if isinstance(returned, Effects) else ()
        try:
            committed = self._store.mark_hook_done(envelope.source, envelope.delivery_id, effects)
        except HookError as exc:  # one of the hook's own write conditions failed
            return RecordResult(
                mid, Outcome.RETRY, envelope, reason=str(exc), hook="failed", error=exc
            )
        except TransientError as exc:
            # The hook ran but is not marked: retry, so the flag ends up right (the hook may run
            # again: at-least-once, documented).
            return RecordResult(
                mid, Outcome.RETRY, envelope, reason=str(exc), hook="ran", error=exc
            )
        except StoreBugError as exc:
            return RecordResult(mid, Outcome.BUG, envelope, reason=str(exc), hook="ran", error=exc)
        if not committed:
            logger.info(
                "hook effects discarded: another run of this delivery's hook committed first",
                extra={"source": envelope.source, "delivery_id": envelope.delivery_id},
            )
        return RecordResult(
            mid,
            stored.outcome,
            envelope,
            reason=reason,
            hook="ran",
            body_mismatch=mismatch,
            recorded_outcome=stored.stored_outcome,
        )


def _describe(stored: StoreResult) -> str | None:
    if stored.outcome is Outcome.STALE:
        return f"older than the resource watermark {stored.watermark}"
    if stored.outcome is Outcome.DUPLICATE:
        return f"already recorded as {stored.stored_outcome or 'unknown'}"
    return None
