"""The ingest use case: verify -> claim -> enqueue -> acknowledge (DESIGN.md, invariants I1-I7).

Order of the stages is fixed: an unauthenticated request never reaches Redis, S3 or SQS (I2);
the claim is one atomic command (``SET NX EX``); 202 is answered only after SQS accepted the
envelope; when the enqueue fails the claim is released (compare-and-delete) and the sender gets
503 + ``Retry-After`` so its retry is accepted (I1). Redis trouble fails open by default (I7).
Nothing here waits on the processor (I6).
"""

from __future__ import annotations

import hashlib
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from webhook_pipeline.envelope import Envelope, sha256_hex, utcnow
from webhook_pipeline.errors import (
    BadDeliveryError,
    ConfigurationError,
    DeliveryInFlightError,
    EnqueueError,
    GateClosedError,
    GateUnavailableError,
    MethodNotAllowedError,
    PayloadTooLargeError,
    SecretUnavailableError,
    TimestampError,
    UnknownSourceError,
    VerificationError,
)
from webhook_pipeline.http import WebhookRequest
from webhook_pipeline.ingest.claims import CircuitBreaker, ClaimOutcome, gate_key
from webhook_pipeline.ingest.ports import DedupGate, EnvelopeQueue, PayloadStore, SecretStore
from webhook_pipeline.observability import MetricName, count, logger
from webhook_pipeline.signatures.base import SignatureScheme
from webhook_pipeline.sources import (
    MAX_DELIVERY_ID_LENGTH,
    FieldLocation,
    ParsedBody,
    Source,
    body_b64,
    extract,
)

# Bounds that keep an envelope within SQS's message size and its DynamoDB keys within their
# 2048-byte limit (UTF-8 bytes, not characters).
MAX_EVENT_TYPE_BYTES = 256


MAX_RESOURCE_KEY_BYTES = 1024


# Headers copied into every envelope when present (never signature headers).
BASE_FORWARDED_HEADERS = ("content-type", "user-agent")


@dataclass(frozen=True)
class IngestPolicy:
    """The numbers the ingest use case works with (all from :class:`IngestSettings`).

    Attributes
    ----------
    claim_ttl_seconds, dedup_ttl_seconds : int
        Pending-claim and done-claim TTLs in seconds.
    max_body_bytes, inline_body_max_bytes : int
        413 above the first; S3 claim check above the second (bytes).
    fail_open : bool
        Enqueue without the gate when Redis is unavailable.
    redis_key_prefix : str
        Prefix of gate keys.
    """

    claim_ttl_seconds: int = 30
    dedup_ttl_seconds: int = 259_200
    max_body_bytes: int = 1_048_576
    inline_body_max_bytes: int = 150_000
    fail_open: bool = True
    redis_key_prefix: str = "whd:"


@dataclass(frozen=True)
class IngestResult:
    """A definite answer to the sender.

    Attributes
    ----------
    status : int
        202 accepted, 200 duplicate or handshake.
    body : dict | str
        JSON body, or plain text (a ``GET`` subscription challenge is echoed as text).
    """

    status: int
    body: dict[str, Any] | str


@dataclass(frozen=True)
class _Delivery:
    delivery_id: str
    event_type: str | None
    resource_key: str | None
    sequence: int | None


@dataclass
class IngestService:
    """Verify, claim, enqueue and acknowledge one webhook request.

    Adapters are injected (see ``functions/ingest/app.py`` for the wiring). ``clock`` gives Unix
    seconds; ``new_token`` the per-invocation claim token.
    """

    sources: Mapping[str, Source]
    schemes: Mapping[str, SignatureScheme]
    secrets: SecretStore
    gate: DedupGate | None
    queue: EnvelopeQueue
    payloads: PayloadStore
    policy: IngestPolicy = field(default_factory=IngestPolicy)
    breaker: CircuitBreaker = field(default_factory=lambda: CircuitBreaker(cooldown_seconds=0))
    clock: Callable[[], float] = time.time
    new_token: Callable[[], str] = lambda: uuid.uuid4().hex

    def handle(self, request: WebhookRequest) -> IngestResult:
        """Run the ingest stages for ``request``.

        Returns
        -------
        IngestResult
            202 ``{"status": "accepted", "delivery_id": ...}``, 200 ``{"status": "duplicate",
            ...}``, or 200 with a provider handshake answer.

        Raises
        ------
        IngestError
            A subclass whose ``status`` is the HTTP answer: 401 (:class:`VerificationError`),
            404 (:class:`UnknownSourceError`), 400 (:class:`BadDeliveryError`), 405
            (:class:`MethodNotAllowedError`, a ``GET`` without a handshake), 413
            (:class:`PayloadTooLargeError`), 503 (:class:`EnqueueError`,
            :class:`DeliveryInFlightError`, :class:`GateClosedError`, secret unavailable).
        """
        source = self.sources.get(request.source)
        if source is None or not source.enabled:
            raise UnknownSourceError()
        if request.method == "GET":
            return self._subscription_challenge(source, request)
        if len(request.body) > self.policy.max_body_bytes:
            raise PayloadTooLargeError(detail=f"{len(request.body)} bytes")

        self._verify(source, request)
        handshake = self.schemes[source.name].handshake(request)
        if handshake is not None:
            logger.info("provider handshake answered", extra={"source": source.name})
            return IngestResult(200, handshake)

        delivery = self._delivery_fields(source, request)
        logger.append_keys(delivery_id=delivery.delivery_id)

        key = gate_key(self.policy.redis_key_prefix, source.name, delivery.delivery_id)
        token = self.new_token()
        claimed = self._claim(key, token)
        if claimed is ClaimOutcome.DUPLICATE:
            count(MetricName.DUPLICATE_DISCARDED)
            logger.info("duplicate discarded at the gate")
            return IngestResult(200, {"status": "duplicate", "delivery_id": delivery.delivery_id})
        if claimed is ClaimOutcome.IN_FLIGHT:
            logger.info("delivery in flight in another request; sender must retry")
            raise DeliveryInFlightError()

        holds_claim = claimed is ClaimOutcome.CLAIMED
        try:
            envelope = self._envelope(source, request, delivery, token, holds_claim)
            message_id = self.queue.send(envelope)
        except Exception as exc:
            count(MetricName.ENQUEUE_FAILED)
            logger.warning(
                "enqueue failed; releasing the claim", extra={"error": type(exc).__name__}
            )
            if holds_claim:
                self._release(key, token)
            raise EnqueueError(detail=type(exc).__name__) from exc

        if holds_claim:
            self._confirm(key, token)
        count(MetricName.ACCEPTED)
        logger.info(
            "accepted",
            extra={
                "message_id": message_id,
                "gate": envelope.gate,
                "body_bytes": envelope.body_size,
            },
        )
        return IngestResult(202, {"status": "accepted", "delivery_id": delivery.delivery_id})

    # -- stages ---------------------------------------------------------------------------

    def _subscription_challenge(self, source: Source, request: WebhookRequest) -> IngestResult:
        """``GET`` endpoint verification (Meta ``hub.challenge``): never reaches Redis or SQS."""
        scheme = self.schemes[source.name]
        try:
            answer = scheme.subscription_challenge(
                request, self.secrets.verify_token_for(source.secret)
            )
        except VerificationError as exc:
            count(MetricName.SIGNATURE_INVALID)
            logger.info("subscription handshake rejected", extra={"reason": exc.reason})
            raise
        if answer is None:
            raise MethodNotAllowedError()
        logger.info("subscription handshake answered")
        return IngestResult(200, answer)

    def _verify(self, source: Source, request: WebhookRequest) -> None:
        secrets = self.secrets.secrets_for(source.secret)
        try:
            verification = self.schemes[source.name].verify(request, secrets, self.clock())
        except ConfigurationError as exc:
            # A stored secret the scheme cannot use (e.g. a Standard Webhooks secret that is not
            # base64): the operator must fix it; the sender retries meanwhile.
            logger.error("source secret unusable", extra={"error": str(exc)[:200]})
            raise SecretUnavailableError(detail="secret unusable by the scheme") from exc
        except TimestampError as exc:
            count(MetricName.TIMESTAMP_REJECTED)
            logger.info("timestamp rejected", extra={"reason": exc.reason})
            raise
        except VerificationError as exc:
            count(MetricName.SIGNATURE_INVALID)
            logger.info("signature rejected", extra={"reason": exc.reason})
            raise
        if verification.secret_index > 0:
            count(MetricName.VERIFIED_WITH_PREVIOUS_SECRET)
            logger.info(
                "verified with the previous secret",
                extra={"secret_index": verification.secret_index},
            )

    def _delivery_fields(self, source: Source, request: WebhookRequest) -> _Delivery:
        body = ParsedBody(request)

        def text(location: FieldLocation | None) -> str | None:
            if location is None:
                return None
            value = extract(location, request, body)
            return None if value is None else str(value)

        delivery_id = text(source.delivery_id)
        if delivery_id is None:
            raise BadDeliveryError("delivery_id_missing")
        if len(delivery_id) > MAX_DELIVERY_ID_LENGTH:
            raise BadDeliveryError("delivery_id_too_long")
        event_type = text(source.event_type)
        if event_type is not None and len(event_type.encode("utf-8")) > MAX_EVENT_TYPE_BYTES:
            raise BadDeliveryError("event_type_too_long")
        resource_key: str | None = None
        sequence: int | None = None
        if source.resource_key is not None and source.sequence is not None:
            resource_key = text(source.resource_key)
            raw_seq = extract(source.sequence, request, body)
            if raw_seq is not None and not isinstance(raw_seq, int):
                raise BadDeliveryError("sequence_invalid")
            sequence = raw_seq
            if (resource_key is None) != (sequence is None):
                raise BadDeliveryError(
                    "ordering_fields_incomplete",
                    "resource key and sequence must both be present or both absent",
                )
            if (
                resource_key is not None
                and len(resource_key.encode("utf-8")) > MAX_RESOURCE_KEY_BYTES
            ):
                raise BadDeliveryError("resource_key_too_long")
        return _Delivery(delivery_id, event_type, resource_key, sequence)

    def _claim(self, key: str, token: str) -> ClaimOutcome | None:
        """Claim ``key``; ``None`` means the gate was bypassed (fail open)."""
        if self.gate is None or not self.breaker.allow():
            if self.gate is not None:
                count(MetricName.GATE_UNAVAILABLE)
            self._fail_open_or_raise()
            return None
        try:
            outcome = self.gate.claim(key, token, self.policy.claim_ttl_seconds)
        except GateUnavailableError as exc:
            self.breaker.trip()
            count(MetricName.GATE_UNAVAILABLE)
            logger.warning("dedup gate unavailable", extra={"error": str(exc)[:200]})
            self._fail_open_or_raise()
            return None
        self.breaker.reset()
        return outcome

    def _fail_open_or_raise(self) -> None:
        if not self.policy.fail_open:
            raise GateClosedError()

    def _release(self, key: str, token: str) -> None:
        if self.gate is None:
            return
        try:
            if self.gate.release(key, token):
                count(MetricName.CLAIM_RELEASED)
        except GateUnavailableError as exc:
            # The pending claim expires after claim_ttl_seconds; until then the sender's retry
            # answers 503 (in flight), never "duplicate" (I1).
            count(MetricName.GATE_UNAVAILABLE)
            logger.warning(
                "claim release failed; it expires by TTL", extra={"error": str(exc)[:200]}
            )

    def _confirm(self, key: str, token: str) -> None:
        if self.gate is None:
            return
        try:
            if not self.gate.confirm(key, token, self.policy.dedup_ttl_seconds):
                logger.warning("claim was taken over before confirm; left alone")
        except GateUnavailableError as exc:
            # Enqueued already: a lost confirm only weakens the fast filter; DynamoDB still
            # records the delivery at most once (I3).
            count(MetricName.GATE_UNAVAILABLE)
            logger.warning("claim confirm failed", extra={"error": str(exc)[:200]})

    def _envelope(
        self,
        source: Source,
        request: WebhookRequest,
        delivery: _Delivery,
        token: str,
        holds_claim: bool,
    ) -> Envelope:
        wanted = (*BASE_FORWARDED_HEADERS, *source.forward_headers)
        headers = {name: value for name in wanted if (value := request.header(name)) is not None}
        size = len(request.body)
        inline = size <= self.policy.inline_body_max_bytes
        pointer = None
        if not inline:
            id_digest = hashlib.sha256(delivery.delivery_id.encode()).hexdigest()[:32]
            pointer = self.payloads.put(f"bodies/{source.name}/{id_digest}/{token}", request.body)
        return Envelope(
            source=source.name,
            delivery_id=delivery.delivery_id,
            received_at=utcnow(),
            event_type=delivery.event_type,
            resource_key=delivery.resource_key,
            sequence=delivery.sequence,
            headers=headers,
            body_b64=body_b64(request.body) if inline else None,
            body_ref=pointer,
            body_size=size,
            body_sha256=sha256_hex(request.body),
            gate="claimed" if holds_claim else "bypassed",
        )
