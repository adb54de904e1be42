"""The processor's domain values: outcomes, delivery records, store results, failure notes."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum

from webhook_pipeline.envelope import Envelope


class Outcome(StrEnum):
    """What processing one SQS record ended in."""

    APPLIED = "applied"
    DUPLICATE = "duplicate"
    STALE = "stale"
    RETRY = "retry"
    MALFORMED = "malformed"
    BUG = "bug"
    #: A reprocess whose hook ran again and committed its generation's mark.
    REPROCESSED = "reprocessed"
    #: A reprocess that ran no hook: the record is stale, missing, its first hook still pending,
    #: or the generation was reprocessed already (the reason says which).
    SKIPPED = "skipped"

    @property
    def acknowledged(self) -> bool:
        """True when the message is done (deleted from the queue), False when it is reported in
        ``batchItemFailures``."""
        return self in _ACKNOWLEDGED


_ACKNOWLEDGED = frozenset(
    {Outcome.APPLIED, Outcome.DUPLICATE, Outcome.STALE, Outcome.REPROCESSED, Outcome.SKIPPED}
)


class HookState(StrEnum):
    """``hook_state`` of a delivery record; absent when no hook was registered."""

    PENDING = "pending"
    DONE = "done"


@dataclass(frozen=True)
class DeliveryRecord:
    """What the store writes for one delivery.

    Attributes
    ----------
    source, delivery_id : str
        The delivery's identity (unique together).
    event_type, resource_key : str | None
        From the envelope.
    sequence : int | None
        Ordering value for ``resource_key`` (both or neither).
    received_at : datetime
        Receipt time at ingest (UTC).
    recorded_at : datetime
        When the processor writes the record (UTC).
    expires_at : int
        TTL of the delivery record, epoch seconds.
    body_size : int
        Raw body size in bytes.
    body_sha256 : str
        Hex SHA-256 of the raw body.
    content_sha256 : str
        The content digest later copies are compared with (``body_sha256`` unless the provider
        declares volatile fields).
    hook_pending : bool
        A hook is registered for this delivery: write ``hook_state = pending`` when applied.
    message_id : str
        SQS message id (for operators).
    attempt_token : str
        Identifies this attempt (message id and receive count): the transaction's idempotency
        token, so an SDK-level retry of the same attempt is not mistaken for a duplicate.
    replay_count : int
        How often the envelope went through the replay function.
    """

    source: str
    delivery_id: str
    event_type: str | None
    resource_key: str | None
    sequence: int | None
    received_at: datetime
    recorded_at: datetime
    expires_at: int
    body_size: int
    body_sha256: str
    hook_pending: bool
    message_id: str
    attempt_token: str
    replay_count: int = 0
    content_sha256: str = ""

    @property
    def content_digest(self) -> str:
        """The digest copies are compared with."""
        return self.content_sha256 or self.body_sha256


@dataclass(frozen=True)
class StoreResult:
    """What the store's conditional write decided.

    Attributes
    ----------
    outcome : Outcome
        ``APPLIED``, ``DUPLICATE`` or ``STALE``.
    hook_state : HookState | None
        For a duplicate: the stored record's hook state (``PENDING`` means the hook has not
        completed yet); for a new record: what was written.
    stored_outcome : Outcome | None
        For a duplicate: the outcome the stored record holds (``applied`` or ``stale``).
    watermark : int | None
        For a stale delivery: the resource's stored watermark, when the store returned it.
    stored_digest : str | None
        For a duplicate: the content digest of the recorded copy, when the store returned it.
    """

    outcome: Outcome
    hook_state: HookState | None = None
    stored_outcome: Outcome | None = None
    watermark: int | None = None
    stored_digest: str | None = None


@dataclass(frozen=True)
class ReprocessState:
    """What a reprocess finds stored for one delivery and generation.

    Attributes
    ----------
    stored_outcome : Outcome | None
        The delivery record's outcome (``applied`` or ``stale``); ``None`` when not recorded.
    hook_state : HookState | None
        The record's ``hook_state`` (absent when no hook was registered at its first run).
    stored_digest : str | None
        The recorded content digest.
    expires_at : int | None
        The record's TTL, epoch seconds (the generation's mark expires with it).
    marked : bool
        This generation's mark exists: its hook ran again and committed already.
    """

    stored_outcome: Outcome | None
    hook_state: HookState | None = None
    stored_digest: str | None = None
    expires_at: int | None = None
    marked: bool = False


@dataclass(frozen=True)
class FailureNote:
    """Why a message failed in a way retries will not fix: what ``dlq peek`` shows as its reason.

    Attributes
    ----------
    message_id : str
        SQS message id (kept when SQS moves the message to the DLQ).
    outcome : Outcome
        ``MALFORMED``, ``BUG`` or ``RETRY`` (a failing hook).
    reason : str
        The error, short (no body content).
    receive_count : int
        The receive on which it failed.
    source, delivery_id : str | None
        When the envelope could be parsed.
    failed_at : datetime
        When (UTC).
    """

    message_id: str
    outcome: Outcome
    reason: str
    receive_count: int
    failed_at: datetime
    source: str | None = None
    delivery_id: str | None = None


@dataclass(frozen=True)
class Message:
    """One SQS record as the domain sees it."""

    message_id: str
    body: str
    receive_count: int = 1


@dataclass(frozen=True)
class RecordResult:
    """The outcome of one message, with what an operator needs to read in its log line.

    Attributes
    ----------
    message_id : str
        SQS message id (what ``batchItemFailures`` reports).
    outcome : Outcome
        The outcome.
    envelope : Envelope | None
        The parsed envelope (``None`` when malformed before parsing).
    reason : str | None
        Why it failed, was stale or a duplicate (short, no body content).
    hook : str | None
        ``"ran"``, ``"failed"`` or ``None`` (no hook ran).
    error : Exception | None
        The exception behind a failed outcome.
    body_mismatch : bool
        A duplicate whose content digest differs from the recorded copy's.
    recorded_outcome : Outcome | None
        For a duplicate: the outcome recorded for the delivery (``applied``, ``stale``), when
        known; ``None`` otherwise.
    """

    message_id: str
    outcome: Outcome
    envelope: Envelope | None = None
    reason: str | None = None
    hook: str | None = None
    error: Exception | None = None
    body_mismatch: bool = False
    recorded_outcome: Outcome | None = None

    @property
    def acknowledged(self) -> bool:
        return self.outcome.acknowledged


def attempt_token(message: Message) -> str:
    """A 36-character token per (message id, receive count): an SDK retry of one attempt reuses
    it, a redelivery gets a new one."""
    return hashlib.sha256(f"{message.message_id}:{message.receive_count}".encode()).hexdigest()[:36]
