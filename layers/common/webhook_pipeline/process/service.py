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

This module knows nothing of boto3: the store and the payload reader are Protocols injected by the
handler.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import Executor
from datetime import datetime, timedelta

from webhook_pipeline.envelope import Envelope, claim_check_prefix, sha256_hex, utcnow
from webhook_pipeline.errors import (
    HookError,
    MalformedEnvelopeError,
    PayloadIntegrityError,
    StoreBugError,
    TransientError,
)
from webhook_pipeline.hooks import Effects, Hook, HookEvent, HookRegistry
from webhook_pipeline.observability import logger
from webhook_pipeline.process.model import (
    DeliveryRecord,
    FailureNote,
    HookState,
    Message,
    Outcome,
    RecordResult,
    StoreResult,
)
from webhook_pipeline.process.ports import DeliveryStore, PayloadReader


def load_body(envelope: Envelope, payloads: PayloadReader) -> bytes:
    """The raw body of ``envelope`` (inline or claim check), integrity-checked.

    Returns
    -------
    bytes
        Exactly ``envelope.body_size`` bytes whose SHA-256 is ``envelope.body_sha256``.

    Raises
    ------
    PayloadIntegrityError
        Not valid base64, wrong size or hash, the claim-check object is missing, or the pointer
        is not one of ours: a key outside ``bodies/<source>/`` (here) or another bucket than
        the payload bucket (the reader) (poison).
    PayloadUnavailableError
        S3 failed transiently (retry).
    """
    if envelope.body_ref is not None:
        if not envelope.body_ref.key.startswith(claim_check_prefix(envelope.source)):
            raise PayloadIntegrityError(
                f"claim-check key is not under {claim_check_prefix(envelope.source)}"
            )
        body = payloads.get(envelope.body_ref)
    else:
        try:
            body = base64.b64decode(envelope.body_b64 or "", validate=True)
        except (binascii.Error, ValueError) as exc:
            raise PayloadIntegrityError("body_b64 is not valid base64") from exc
    if len(body) != envelope.body_size:
        raise PayloadIntegrityError(
            f"body size mismatch: envelope says {envelope.body_size} bytes, got {len(body)}"
        )
    if sha256_hex(body) != envelope.body_sha256:
        raise PayloadIntegrityError("body sha256 mismatch")
    return body


def group_key(envelope: Envelope) -> tuple[str, str, str]:
    """Records with the same key are applied one after the other, in sequence order."""
    if envelope.resource_key is not None:
        return (envelope.source, "resource", envelope.resource_key)
    return (envelope.source, "delivery", envelope.delivery_id)


def plan(
    messages: Sequence[Message],
) -> tuple[list[RecordResult], list[list[tuple[Message, Envelope]]]]:
    """Parse every message and order the valid ones.

    Returns
    -------
    malformed : list[RecordResult]
        One ``MALFORMED`` result per message whose body is not a valid envelope.
    groups : list[list[tuple[Message, Envelope]]]
        Groups in first-arrival order; within a group, ascending sequence (stable for ties and
        for records without a sequence).
    """
    malformed: list[RecordResult] = []
    groups: dict[tuple[str, str, str], list[tuple[Message, Envelope]]] = {}
    for message in messages:
        try:
            envelope = Envelope.from_json(message.body)
        except MalformedEnvelopeError as exc:
            malformed.append(
                RecordResult(message.message_id, Outcome.MALFORMED, reason=str(exc), error=exc)
            )
            continue
        groups.setdefault(group_key(envelope), []).append((message, envelope))
    ordered = [
        sorted(members, key=lambda pair: pair[1].sequence if pair[1].sequence is not None else 0)
        for members in groups.values()
    ]
    return malformed, ordered


def attempt_token(message: Message) -> str:
    """A 36-character token per (message id, receive count): an SDK retry of one attempt reuses
    it, a redelivery gets a new one."""
    return hashlib.sha256(f"{message.message_id}:{message.receive_count}".encode()).hexdigest()[:36]


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
    ) -> None:
        self._store = store
        self._payloads = payloads
        self._hooks = hooks
        self._executor = executor
        self._retention = retention
        self._clock = clock

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
        return [self.process(message, envelope) for message, envelope in group]

    def process(self, message: Message, envelope: Envelope) -> RecordResult:
        """Load and check the body, record the delivery, run its hook when one is due."""
        mid = message.message_id
        try:
            body = load_body(envelope, self._payloads)
        except MalformedEnvelopeError as exc:
            return RecordResult(mid, Outcome.MALFORMED, envelope, reason=str(exc), error=exc)
        except TransientError as exc:
            return RecordResult(mid, Outcome.RETRY, envelope, reason=str(exc), error=exc)

        handler = self._hooks.find(envelope.source, envelope.event_type)
        record = self._record(message, envelope, hook_pending=handler is not None)
        try:
            stored = self._store.record(record)
        except TransientError as exc:
            return RecordResult(mid, Outcome.RETRY, envelope, reason=str(exc), error=exc)
        except StoreBugError as exc:
            return RecordResult(mid, Outcome.BUG, envelope, reason=str(exc), error=exc)

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
                mid, stored.outcome, envelope, reason=reason, body_mismatch=mismatch
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
        event = HookEvent(
            source=envelope.source,
            delivery_id=envelope.delivery_id,
            event_type=envelope.event_type,
            resource_key=envelope.resource_key,
            sequence=envelope.sequence,
            received_at=envelope.received_at,
            headers=dict(envelope.headers),
            body=body,
        )
        try:
            returned = handler(event)
        except KeyboardInterrupt:
            raise  # the operator stopping the process (local stack): not the hook's failure
        except BaseException as exc:  # SystemExit, CancelledError...: only this record fails
            error = HookError(f"hook failed: {type(exc).__name__}: {exc}")
            error.__cause__ = exc
            return RecordResult(
                mid, Outcome.RETRY, envelope, reason=str(error), hook="failed", error=error
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
            mid, stored.outcome, envelope, reason=reason, hook="ran", body_mismatch=mismatch
        )


def _describe(stored: StoreResult) -> str | None:
    if stored.outcome is Outcome.STALE:
        return f"older than the resource watermark {stored.watermark}"
    if stored.outcome is Outcome.DUPLICATE:
        return f"already recorded as {stored.stored_outcome or 'unknown'}"
    return None
