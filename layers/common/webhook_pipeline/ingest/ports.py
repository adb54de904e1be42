"""The ingest use case's ports: the dedup gate, the queue, the claim-check store, the secrets.

Adapters (Redis, SQS, S3, Secrets Manager) live in :mod:`webhook_pipeline.adapters`.
"""

from __future__ import annotations

from typing import Protocol

from webhook_pipeline.envelope import BodyPointer, Envelope
from webhook_pipeline.ingest.claims import ClaimOutcome


class DedupGate(Protocol):
    """Interface of the dedup gate (Redis in production; same semantics elsewhere)."""

    def claim(self, key: str, token: str, ttl_seconds: int) -> ClaimOutcome: ...

    def confirm(self, key: str, token: str, ttl_seconds: int) -> bool: ...

    def release(self, key: str, token: str) -> bool: ...


class EnvelopeQueue(Protocol):
    """Where accepted deliveries go.

    ``send`` raises on any failure (the caller then releases the claim).
    """

    def send(self, envelope: Envelope) -> str: ...


class PayloadStore(Protocol):
    """A claim-check store: the ingest side puts, the processor gets (the processor's own port
    is :class:`webhook_pipeline.processing.PayloadReader`)."""

    def put(self, key: str, body: bytes) -> BodyPointer:
        """Store ``body`` under ``key`` and return where it is."""
        ...

    def get(self, pointer: BodyPointer) -> bytes:
        """Return the raw body bytes at ``pointer``."""
        ...


class SecretStore(Protocol):
    """Gives the secrets of a source: current first, then previous if a rotation is open."""

    def secrets_for(self, secret_name: str) -> list[str]: ...

    def verify_token_for(self, secret_name: str) -> str | None: ...
