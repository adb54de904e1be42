"""The ingest use case: verify -> claim -> enqueue -> acknowledge (invariants I1-I8, listed in the
README's "How the guarantees are kept").

Order of the stages is fixed: a provider's handshake is answered before the gate and never
reaches Redis, S3 or SQS; an unauthenticated request never does either (I2); the claim is one
atomic command; 2xx is answered only after SQS accepted every new delivery of the request; when
an enqueue fails the claims it took are released (compare-and-delete) and the sender gets 503 +
``Retry-After`` so its retry is accepted (I1). Redis trouble fails open by default (I7). Nothing
here waits on the processor (I6). Identity and order come only from what was verified (I8): see
:mod:`webhook_pipeline.ingest.events`.

A request carries one delivery, or many for providers that batch (SendGrid, HubSpot, Adyen,
LINE, Microsoft Graph): each event is claimed and enqueued as its own envelope, its claim
confirmed with its ``SendMessageBatch`` chunk, within the request's time budget (see
:mod:`webhook_pipeline.ingest.batch`).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace

from webhook_pipeline.errors import (
    DeliveryInFlightError,
    EnqueueError,
    IngestError,
    MethodNotAllowedError,
    PayloadTooLargeError,
    SecretInvalidError,
    TimestampError,
    UnknownSourceError,
    VerificationError,
)
from webhook_pipeline.ingest.batch import BatchIngest, TimeBudget, check_body
from webhook_pipeline.ingest.claims import (
    CircuitBreaker,
    Claim,
    ClaimOutcome,
    ClaimResult,
    gate_key,
)
from webhook_pipeline.ingest.envelopes import EnvelopeFactory, signed_headers, verified_with
from webhook_pipeline.ingest.events import DeliveryEvent, read_events
from webhook_pipeline.ingest.gatekeeper import Gatekeeper
from webhook_pipeline.ingest.policy import IngestPolicy
from webhook_pipeline.ingest.ports import DedupGate, EnvelopeQueue, PayloadStore, SecretStore
from webhook_pipeline.observability import MetricName, count, count_by, logger
from webhook_pipeline.providers.model import Answer, Handshake, Verified
from webhook_pipeline.redaction import redact_target
from webhook_pipeline.source_secrets import SecretProblem, SourceSecret
from webhook_pipeline.sources import ResolvedSource
from webhook_pipeline.webhook_request import WebhookRequest, public_url


@dataclass
class IngestService:
    """Answer one webhook request: handshake, or verify, claim, enqueue and acknowledge.

    Adapters are injected (see ``functions/ingest/app.py`` for the wiring). ``clock`` gives Unix
    seconds; ``new_token`` the per-invocation claim token (128 random bits, hex).
    """

    sources: Mapping[str, ResolvedSource]
    secrets: SecretStore
    gate: DedupGate | None
    queue: EnvelopeQueue
    payloads: PayloadStore
    policy: IngestPolicy = field(default_factory=IngestPolicy)
    breaker: CircuitBreaker = field(default_factory=lambda: CircuitBreaker(cooldown_seconds=0))
    clock: Callable[[], float] = time.time
    new_token: Callable[[], str] = lambda: os.urandom(16).hex()
    _valid_secrets: dict[tuple[str, tuple[str, ...]], SecretProblem | None] = field(
        default_factory=dict, init=False, repr=False
    )
    _gatekeeper: Gatekeeper = field(init=False, repr=False)
    _batches: BatchIngest = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self._gatekeeper = Gatekeeper(self.gate, self.breaker, self.policy)
        self._batches = BatchIngest(self._gatekeeper, self.queue, self.policy)

    def handle(self, request: WebhookRequest, budget: TimeBudget | None = None) -> Answer:
        """The answer to ``request`` (never raises for an expected failure).

        ``budget`` is what is left of the request's time (default: unbounded); a batched POST
        stops sending before it runs out (:mod:`webhook_pipeline.ingest.batch`).

        Returns
        -------
        Answer
            202/200 with the provider's acknowledgement (by default ``{"status": "accepted" |
            "duplicate", "delivery_id": ...}``), 200 with a handshake's answer, or
            400/401/404/405/413/503 with ``{"status": "rejected", "reason": <code>}`` (503 adds
            ``Retry-After``). A status the provider treats as "stop" or "disable" (Standard
            Webhooks 410, Mailgun 406...) is never sent to it: 503 instead.
        """
        source = self.sources.get(request.source)
        try:
            if source is None or not source.enabled:
                raise UnknownSourceError()
            answer = self._handle(source, request, budget or TimeBudget())
        except IngestError as error:
            answer = self._rejection(error)
        if source is not None and answer.status in source.provider.stop_statuses:
            logger.error(
                "answer would tell the sender to stop; answering 503 instead",
                extra={"status": answer.status},
            )
            answer = self._rejection(EnqueueError("stop_status_withheld"))
        return answer

    def _rejection(self, error: IngestError) -> Answer:
        headers = (
            {"retry-after": str(self.policy.retry_after_seconds)} if error.status == 503 else {}
        )
        return Answer(error.status, {"status": "rejected", "reason": error.reason}, headers=headers)

    def _handle(
        self, source: ResolvedSource, request: WebhookRequest, budget: TimeBudget
    ) -> Answer:
        provider = source.provider
        handshake = next(
            (h for h in provider.handshakes if h.method == request.method and h.matches(request)),
            None,
        )
        if handshake is None and request.method != "POST":
            raise MethodNotAllowedError()
        if len(request.body) > self.policy.max_body_bytes:
            raise PayloadTooLargeError(detail=f"{len(request.body)} bytes")
        secret = self._secret(source)
        if provider.signs_url:
            url = public_url(request, source.public_url, self.policy.public_base_url)
            request = replace(request, public_url=url)
        if handshake is not None:
            return self._handshake(source, handshake, request, secret)
        verified = self._verify(source, request, secret)
        events = read_events(source, request, verified)
        if verified.replay_token is not None:
            self._gatekeeper.use_once(
                source, verified.replay_token, [e.delivery_id for e in events]
            )
        logger.append_keys(delivery_id=events[0].delivery_id if len(events) == 1 else None)
        if provider.batch_path is None:
            return self._single(
                source, events[0], lambda: self._envelopes(source, request, verified)
            )
        return self._batches.handle(
            source,
            events,
            lambda event: self._new_claim(source, event),
            self._envelopes(source, request, verified),
            budget,
        )

    # -- secrets, verification, handshakes -----------------------------------------------------

    def _secret(self, source: ResolvedSource) -> SourceSecret:
        """The source's secret, its values validated against the provider once per stored value.

        An invalid ``previous`` value is dropped from the secrets verified against, and a
        request that then matches none is 503 (it may have been signed with that value), never
        401; an invalid ``current`` value makes every request 503.

        Raises
        ------
        SecretUnavailableError
            Missing or unreadable (503).
        SecretInvalidError
            Stored, but the current value is not in the provider's format (503,
            ``SecretInvalid`` metric).
        """
        try:
            secret = self.secrets.get(source.secret)
        except SecretInvalidError as exc:
            count(MetricName.SECRET_INVALID)
            logger.error("source secret is invalid", extra={"error": str(exc)[:300]})
            raise
        key = (source.name, tuple(secret.signing))
        if key not in self._valid_secrets:
            self._valid_secrets[key] = source.secret_problem(secret)
        problem = self._valid_secrets[key]
        if problem is None:
            return secret
        count(MetricName.SECRET_INVALID)
        logger.error("source secret is invalid", extra={"error": str(problem)})
        if problem.value == "current":
            raise SecretInvalidError(detail=f"source {source.name!r}: {problem}")
        return SourceSecret(secret.signing[:1], secret.verify_token, invalid_previous=True)

    def _verify(
        self, source: ResolvedSource, request: WebhookRequest, secret: SourceSecret
    ) -> Verified:
        try:
            verified = source.provider.verify(request, secret.signing, self.clock())
        except VerificationError as exc:
            if secret.invalid_previous and exc.reason == "signature_invalid":
                raise SecretInvalidError(
                    detail="no valid secret matches and the previous one is invalid"
                ) from exc
            self._count_rejection(exc)
            if source.provider.signs_url:
                url = redact_target(request.public_url, source.provider.credential_params)
                logger.info("signed URL as reconstructed", extra={"url": url})
            raise
        # Which header family or documented reading matched (Standard Webhooks webhook/svix,
        # LinkedIn's two X-LI-Signature readings): on every later line of this request.
        logger.append_keys(signature_family=verified.family)
        if verified.secret_index > 0:
            count(MetricName.VERIFIED_WITH_PREVIOUS_SECRET)
            logger.info(
                "verified with the previous secret", extra={"secret_index": verified.secret_index}
            )
        return verified

    @staticmethod
    def _count_rejection(exc: VerificationError) -> None:
        if isinstance(exc, TimestampError):
            count(MetricName.TIMESTAMP_REJECTED)
            logger.info("timestamp rejected", extra={"reason": exc.reason})
        else:
            count(MetricName.SIGNATURE_INVALID)
            logger.info("signature rejected", extra={"reason": exc.reason})

    def _handshake(
        self,
        source: ResolvedSource,
        handshake: Handshake,
        request: WebhookRequest,
        secret: SourceSecret,
    ) -> Answer:
        """Answer a provider's challenge: verified first where it is signed, never gated."""
        if handshake.signed:
            self._verify(source, request, secret)
        try:
            answer = handshake.answer(request, secret)
        except VerificationError as exc:
            count(MetricName.SIGNATURE_INVALID)
            logger.info(
                "handshake rejected", extra={"handshake": handshake.name, "reason": exc.reason}
            )
            raise
        count_by(MetricName.HANDSHAKE_ANSWERED, provider=source.provider.name)
        logger.info("handshake answered", extra={"handshake": handshake.name})
        return answer

    # -- one delivery: 2 Redis commands + 1 SQS call ---------------------------------------------

    def _single(
        self,
        source: ResolvedSource,
        event: DeliveryEvent,
        envelopes: Callable[[], EnvelopeFactory],
    ) -> Answer:
        claim = self._new_claim(source, event)
        result = self._gatekeeper.claim(claim)
        if result is not None and result.outcome is ClaimOutcome.DUPLICATE:
            return self._duplicate(source, event, result)
        if result is not None and result.outcome is ClaimOutcome.IN_FLIGHT:
            logger.info("delivery in flight in another request; sender must retry")
            raise DeliveryInFlightError()
        holds_claim = result is not None
        try:
            # built after the claim: a duplicate builds no envelope fields
            envelope = envelopes().build(event, claim.token, holds_claim)
            message_id = self.queue.send(envelope)
        except Exception as exc:
            count(MetricName.ENQUEUE_FAILED)
            logger.warning(
                "enqueue failed; releasing the claim", extra={"error": type(exc).__name__}
            )
            if holds_claim:
                self._gatekeeper.release([claim])
            raise EnqueueError(detail=type(exc).__name__) from exc
        if holds_claim:
            self._gatekeeper.confirm([claim], source)
        count(MetricName.ACCEPTED)
        logger.info(
            "accepted",
            extra={"message_id": message_id, "gate": envelope.gate, "body_bytes": len(event.body)},
        )
        return source.provider.acknowledgement(
            202, {"status": "accepted", "delivery_id": event.delivery_id}
        )

    def _duplicate(
        self, source: ResolvedSource, event: DeliveryEvent, result: ClaimResult
    ) -> Answer:
        count(MetricName.DUPLICATE_DISCARDED)
        check_body(event, result.stored_digest)
        logger.info("duplicate discarded at the gate")
        return source.provider.acknowledgement(
            200, {"status": "duplicate", "delivery_id": event.delivery_id}
        )

    # -- the gate --------------------------------------------------------------------------------

    def _new_claim(self, source: ResolvedSource, event: DeliveryEvent) -> Claim:
        key = gate_key(self.policy.redis_key_prefix, source.name, event.delivery_id)
        return Claim(key, self.new_token(), event.digest)

    def _envelopes(
        self, source: ResolvedSource, request: WebhookRequest, verified: Verified
    ) -> EnvelopeFactory:
        """The envelopes of the request's deliveries, with what the archive keeps of its
        verification (the provider, which secret, the signed headers: a dict of a few entries
        built once per request, nothing parsed again)."""
        return EnvelopeFactory(
            source,
            request,
            self.payloads,
            self.policy.inline_body_max_bytes,
            verified_with=verified_with(source, verified),
            signed_headers=signed_headers(source, request, verified),
        )


__all__ = ["Answer", "IngestPolicy", "IngestService", "TimeBudget"]
