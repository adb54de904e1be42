"""The ingest use case's ports: the dedup gate, the queue, the claim-check store, the secrets.

Adapters (Redis, SQS, S3, Secrets Manager) live in :mod:`webhook_pipeline.adapters`.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from webhook_pipeline.envelope import BodyPointer, Envelope
from webhook_pipeline.ingest.claims import Claim, ClaimResult
from webhook_pipeline.source_secrets import SourceSecret


class DedupGate(Protocol):
    """The dedup gate (Redis in production). Every method raises
    :class:`~webhook_pipeline.errors.GateUnavailableError` when the gate does not answer."""

    def claim(self, claim: Claim, ttl_seconds: int) -> ClaimResult:
        """Take ``claim`` as pending for ``ttl_seconds`` unless its key holds one: one atomic
        command."""
        ...

    def confirm(self, claim: Claim, ttl_seconds: int) -> bool:
        """Turn our pending claim into a done claim kept ``ttl_seconds``; ``False`` when another
        invocation holds the key now (left alone)."""
        ...

    def release(self, claim: Claim) -> bool:
        """Delete our pending claim (compare-and-delete); ``False`` when it is not ours any
        more."""
        ...

    def claim_once(self, key: str, ttl_seconds: int, owner: str) -> bool:
        """Bind ``key`` to ``owner`` for ``ttl_seconds`` unless it is bound already: ``True``
        when it is now or was already bound to ``owner``, ``False`` when bound to another (a
        one-time token replayed with another delivery)."""
        ...

    def claim_many(self, claims: Sequence[Claim], ttl_seconds: int) -> list[ClaimResult]:
        """:meth:`claim` for every claim, in one round trip; results in the same order."""
        ...

    def confirm_many(self, claims: Sequence[Claim], ttl_seconds: int) -> None:
        """:meth:`confirm` for every claim, in one round trip."""
        ...

    def release_many(self, claims: Sequence[Claim]) -> None:
        """:meth:`release` for every claim, in one round trip."""
        ...


@dataclass(frozen=True)
class BatchSendResult:
    """What one batched call did: message ids of the envelopes SQS accepted and the reasons of
    those it did not (both by index into the envelopes given to
    :meth:`EnvelopeQueue.send_chunks`)."""

    sent: dict[int, str] = field(default_factory=dict)
    failed: dict[int, str] = field(default_factory=dict)


class EnvelopeQueue(Protocol):
    """Where accepted deliveries go."""

    def send(self, envelope: Envelope) -> str:
        """Send one envelope; return its message id. Raises on any failure (the caller then
        releases the claim)."""
        ...

    def send_chunks(self, envelopes: Iterable[Envelope]) -> Iterator[BatchSendResult]:
        """Send many envelopes in as few calls as the queue allows (10 per
        ``SendMessageBatch``), one result per call, as each call returns.

        Every envelope of a yielded result is in its ``sent`` or its ``failed``; an envelope of
        no yielded result was not sent. The caller may stop iterating between two results
        (nothing more is sent). A call that fails as a whole ends the iteration after its
        result. Never raises for the queue's own failures.
        """
        ...


class PayloadStore(Protocol):
    """A claim-check store: the ingest side puts, the processor gets (the processor's own port
    is :class:`webhook_pipeline.process.ports.PayloadReader`)."""

    def put(self, key: str, body: bytes) -> BodyPointer:
        """Store ``body`` under ``key`` and return where it is."""
        ...

    def get(self, pointer: BodyPointer) -> bytes:
        """Return the raw body bytes at ``pointer``."""
        ...


class SecretStore(Protocol):
    """Gives the parsed secret of a source."""

    def get(self, secret_name: str) -> SourceSecret:
        """The secret named ``secret_name`` (under the deployment's prefix), parsed.

        Raises
        ------
        SecretUnavailableError
            Missing, unreadable or malformed.
        """
        ...
