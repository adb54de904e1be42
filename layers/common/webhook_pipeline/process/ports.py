"""What the processor needs from the outside: the delivery store and the claim-check reader."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from webhook_pipeline.envelope import BodyPointer
from webhook_pipeline.process.coalesce import GroupWrite
from webhook_pipeline.process.model import (
    DeliveryRecord,
    FailureNote,
    ReprocessState,
    StoreResult,
)


class PayloadReader(Protocol):
    """Where claim-check bodies are read from (S3 in :mod:`webhook_pipeline.adapters.s3`)."""

    def get(self, pointer: BodyPointer) -> bytes:
        """The raw body bytes at ``pointer``.

        Raises
        ------
        PayloadIntegrityError
            The object does not exist.
        PayloadUnavailableError
            A transient failure.
        """
        ...


class DeliveryStore(Protocol):
    """The conditional writes the processor needs (DynamoDB in
    :mod:`webhook_pipeline.adapters.dynamodb`)."""

    #: The most deliveries one :meth:`record_group` call may carry.
    group_limit: int

    def record(self, delivery: DeliveryRecord) -> StoreResult:
        """Record the delivery at most once and move the resource watermark forward.

        Raises
        ------
        TransientError
            Throttling, transaction conflict, missing cancellation reasons, timeouts, 5xx.
        StoreBugError
            The request was rejected as invalid.
        """
        ...

    def read_watermark(self, source: str, resource_key: str) -> int | None:
        """The resource's stored watermark (strongly consistent), ``None`` when it has none.

        Raises
        ------
        TransientError, StoreBugError
            As :meth:`record`.
        """
        ...

    def record_group(self, write: GroupWrite) -> str | None:
        """Write the delivery records of ``write`` (each at most once) and move the watermark to
        ``write.advances``, all or nothing, only while the watermark is still
        ``write.expected_watermark``.

        Returns
        -------
        str | None
            ``None`` when the write committed; otherwise why it did not (a record already
            exists, the watermark moved, a conflict, throttling, a timeout...). The caller then
            records the deliveries one by one: after a timeout the write may have committed, and
            the per-delivery path finds the records as duplicates. Never raises for the
            service's answer.
        """
        ...

    def note_body_mismatch(self, source: str, delivery_id: str, digest: str) -> None:
        """Count on the delivery record a copy whose content digest differs from the recorded
        one (``duplicate_body_mismatches``, ``last_mismatch_sha256``).

        Raises
        ------
        TransientError, StoreBugError
            As :meth:`record`; the caller treats the note as best effort.
        """
        ...

    def mark_hook_done(
        self, source: str, delivery_id: str, effects: Sequence[Mapping[str, Any]] = ()
    ) -> bool:
        """Set the delivery record's ``hook_state`` to ``done``, committing the hook's
        ``effects`` (DynamoDB writes) in the same transaction when there are any.

        Returns
        -------
        bool
            ``False`` when ``effects`` were given and the hook was no longer pending (another run
            marked it done first): nothing was written. ``True`` otherwise.

        Raises
        ------
        TransientError
            The write may succeed later (throttling, timeouts, a conflict).
        HookError
            One of ``effects``' own conditions failed (the hook is retried).
        StoreBugError
            The request is invalid, or the delivery is not recorded.
        """
        ...

    def read_reprocess(self, source: str, delivery_id: str, generation: int) -> ReprocessState:
        """The stored record of a delivery and whether ``generation``'s mark exists (strongly
        consistent reads; writes nothing).

        Raises
        ------
        TransientError, StoreBugError
            As :meth:`record`.
        """
        ...

    def mark_reprocessed(
        self,
        source: str,
        delivery_id: str,
        generation: int,
        *,
        job: str,
        expires_at: int | None,
        effects: Sequence[Mapping[str, Any]] = (),
    ) -> bool:
        """Write ``generation``'s mark of a delivery only if it does not exist, with the hook's
        ``effects`` (DynamoDB writes) in the same transaction; ``expires_at`` (epoch seconds) is
        the mark's TTL (the delivery record's; ``None``: none). Never touches the delivery
        record or a watermark.

        Returns
        -------
        bool
            ``False`` when the mark existed (another run of this generation committed first):
            nothing was written. ``True`` when the mark and the effects committed.

        Raises
        ------
        TransientError
            Throttling, timeouts, a conflict: the write may succeed later.
        HookError
            One of ``effects``' own conditions failed (the hook is retried).
        StoreBugError
            The request is invalid.
        """
        ...

    def record_failure(self, note: FailureNote) -> None:
        """Keep why a message failed, keyed by its SQS message id (which redrive preserves).

        Raises
        ------
        TransientError, StoreBugError
            As :meth:`record`; the caller treats the note as best effort.
        """
        ...
