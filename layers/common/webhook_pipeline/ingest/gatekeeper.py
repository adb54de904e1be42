"""The ingest use case's side of the dedup gate: claim, confirm, release and one-time tokens.

Redis trouble trips the circuit breaker and then fails open (the delivery is enqueued without a
claim) or closed (503) as the policy says (I7); a release or confirm that fails is logged and
left to the claim's TTL (I1, I3).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

from webhook_pipeline.errors import GateClosedError, GateUnavailableError, VerificationError
from webhook_pipeline.ingest.claims import CircuitBreaker, Claim, ClaimResult
from webhook_pipeline.ingest.policy import IngestPolicy
from webhook_pipeline.ingest.ports import DedupGate
from webhook_pipeline.observability import MetricName, count, logger
from webhook_pipeline.sources import ResolvedSource


@dataclass
class Gatekeeper:
    """Claims at the dedup gate for one :class:`~webhook_pipeline.ingest.service.IngestService`.

    ``gate`` is ``None`` where the deployment runs without one (every claim is bypassed).
    """

    gate: DedupGate | None
    breaker: CircuitBreaker
    policy: IngestPolicy

    def use_once(self, source: ResolvedSource, token: str, delivery_ids: list[str]) -> None:
        """Bind a provider's one-time token (Mailgun's ``token``) to the deliveries it first
        came with, for twice its tolerance.

        The same token with the same delivery ids again is the sender's resend (or a retry after
        a 503 released the claim): it goes on to the gate, which answers a duplicate 200 or
        accepts it. The same token with other delivery ids is a captured signature carrying
        another body.

        Raises
        ------
        VerificationError
            ``replay_detected``: the token came before with other delivery ids.
        GateClosedError
            Redis is unavailable (503, whatever the gate's fail mode): the token check is part
            of verifying a provider whose signature does not cover the body (Mailgun signs the
            timestamp and token only), so failing open would accept a captured signature with
            any body. The sender retries (Mailgun for 8 hours). With no gate configured at all
            the check is not made.
        """
        if self.gate is None:
            return
        if not self.breaker.allow():
            count(MetricName.GATE_UNAVAILABLE)
            raise GateClosedError(detail="the signed one-time token cannot be checked")
        digest = hashlib.sha256(token.encode("utf-8")).hexdigest()
        key = f"{self.policy.redis_key_prefix}{source.name}:token:{digest}"
        owner = hashlib.sha256("\n".join(delivery_ids).encode("utf-8")).hexdigest()
        ttl = 2 * (source.provider.tolerance_seconds or self.policy.claim_ttl_seconds)
        try:
            ours = self.gate.claim_once(key, ttl, owner)
        except GateUnavailableError as exc:
            self._record_failure(exc)
            raise GateClosedError(detail="the signed one-time token cannot be checked") from exc
        if not ours:
            count(MetricName.SIGNATURE_INVALID)
            logger.info("one-time token reused", extra={"reason": "replay_detected"})
            raise VerificationError(
                "replay_detected", "the signed one-time token came before with another delivery"
            )

    def _gate_available(self) -> bool:
        if self.gate is None or not self.breaker.allow():
            if self.gate is not None:
                count(MetricName.GATE_UNAVAILABLE)
            self._fail_open_or_raise()
            return False
        return True

    def claim(self, claim: Claim) -> ClaimResult | None:
        """Claim one delivery; ``None`` means the gate was bypassed (fail open)."""
        if not self._gate_available() or self.gate is None:
            return None
        try:
            result = self.gate.claim(claim, self.policy.claim_ttl_seconds)
        except GateUnavailableError as exc:
            self._gate_failed(exc)
            return None
        return result

    def claim_many(self, claims: list[Claim]) -> list[ClaimResult | None]:
        """Claim every event of a batch in one round trip; ``None`` entries: gate bypassed."""
        if not self._gate_available() or self.gate is None:
            return [None] * len(claims)
        try:
            results = self.gate.claim_many(claims, self.policy.claim_ttl_seconds)
        except GateUnavailableError as exc:
            self._gate_failed(exc)
            return [None] * len(claims)
        return list(results)

    def _gate_failed(self, exc: GateUnavailableError) -> None:
        self._record_failure(exc)
        self._fail_open_or_raise()

    def _record_failure(self, exc: GateUnavailableError) -> None:
        self.breaker.trip()
        count(MetricName.GATE_UNAVAILABLE)
        logger.warning("dedup gate unavailable", extra={"error": str(exc)[:200]})

    def _fail_open_or_raise(self) -> None:
        if not self.policy.fail_open:
            raise GateClosedError()

    def release(self, claims: list[Claim]) -> None:
        if self.gate is None or not claims:
            return
        try:
            if len(claims) == 1:
                if self.gate.release(claims[0]):
                    count(MetricName.CLAIM_RELEASED)
            else:
                self.gate.release_many(claims)
                count(MetricName.CLAIM_RELEASED, len(claims))
        except GateUnavailableError as exc:
            # The pending claims expire after claim_ttl_seconds; until then the sender's retry
            # answers 503 (in flight), never "duplicate" (I1).
            count(MetricName.GATE_UNAVAILABLE)
            logger.warning(
                "claim release failed; it expires by TTL", extra={"error": str(exc)[:200]}
            )

    def confirm(self, claims: list[Claim], source: ResolvedSource) -> None:
        if self.gate is None:
            return
        ttl = self.done_ttl(source)
        try:
            if len(claims) == 1:
                if not self.gate.confirm(claims[0], ttl):
                    logger.warning("claim was taken over before confirm; left alone")
            else:
                self.gate.confirm_many(claims, ttl)
        except GateUnavailableError as exc:
            # Enqueued already: a lost confirm only weakens the fast filter; DynamoDB still
            # records the delivery at most once (I3).
            count(MetricName.GATE_UNAVAILABLE)
            logger.warning("claim confirm failed", extra={"error": str(exc)[:200]})

    def done_ttl(self, source: ResolvedSource) -> int:
        """The done-claim TTL of ``source`` (seconds): its own or its provider's retry horizon,
        capped by the deployment's maximum and never below the pending TTL."""
        return max(
            min(source.dedup_ttl_seconds, self.policy.dedup_ttl_max_seconds),
            self.policy.claim_ttl_seconds + 1,
        )
