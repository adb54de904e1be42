"""Typed errors of the pipeline, mapped to HTTP statuses or batch outcomes in one place each.

The ingest handler maps :class:`IngestError` subclasses to statuses through their ``status``
attribute; nothing maps errors by message text.
"""

from __future__ import annotations


class PipelineError(Exception):
    """Base class of every error this package raises on purpose."""


class ConfigurationError(PipelineError):
    """Invalid or missing configuration (sources file, settings, secrets). Fails the cold start."""


class IngestError(PipelineError):
    """An error that ends an ingest request with a definite HTTP status.

    Attributes
    ----------
    status : int
        The HTTP status the ingest handler answers with.
    reason : str
        A short, stable reason code safe to show the sender (no secrets, no internals).
    """

    status: int = 400
    reason: str = "bad_request"

    def __init__(self, reason: str | None = None, detail: str | None = None) -> None:
        self.reason = reason or type(self).reason
        self.detail = detail
        super().__init__(detail or self.reason)


class VerificationError(IngestError):
    """Signature or timestamp rejected: 401 with a reason code.

    Reason codes: ``signature_missing``, ``signature_invalid``, ``signature_malformed``,
    ``timestamp_missing``, ``timestamp_invalid``, ``timestamp_stale``, ``timestamp_future``.
    """

    status = 401
    reason = "signature_invalid"


class TimestampError(VerificationError):
    """The signed timestamp is missing, unparseable, too old or too far in the future."""

    reason = "timestamp_invalid"


class UnknownSourceError(IngestError):
    """The ``{source}`` path segment names no enabled source: 404."""

    status = 404
    reason = "unknown_source"


class BadDeliveryError(IngestError):
    """Authentic, but no usable delivery id or malformed envelope fields: 400."""

    status = 400
    reason = "bad_delivery"


class PayloadTooLargeError(IngestError):
    """Body over the configured maximum: 413."""

    status = 413
    reason = "payload_too_large"


class EnqueueError(IngestError):
    """The queue (or the claim-check bucket) did not accept the delivery: 503 + Retry-After."""

    status = 503
    reason = "enqueue_failed"


class TimeBudgetError(EnqueueError):
    """A batched POST ran out of its time budget before every event was enqueued: 503 +
    ``Retry-After``. The events enqueued stay confirmed; the claims of the others are released,
    so the sender's retry enqueues only those."""

    reason = "time_budget_exhausted"


class GateUnavailableError(PipelineError):
    """Redis did not answer within its timeout (connection refused, timeout, protocol error)."""


class MalformedEnvelopeError(PipelineError):
    """An SQS message body is not a valid envelope (poison): it reaches the DLQ through redrive."""


class TransientError(PipelineError):
    """A dependency failed in a way a later attempt may not (throttling, transaction conflict,
    timeout, 5xx). The processor reports the record in ``batchItemFailures`` (outcome ``retry``)."""


class StoreBugError(PipelineError):
    """The database rejected a request as invalid (``ValidationException``, access denied, missing
    table): a bug or a misconfiguration. Never treated as a duplicate or stale; logged at ERROR."""


class PayloadIntegrityError(MalformedEnvelopeError):
    """A body does not match the envelope's ``body_size``/``body_sha256``, or its claim-check
    object no longer exists (poison: it reaches the DLQ through redrive)."""


class PayloadUnavailableError(TransientError):
    """S3 did not accept or serve a claim-check body (throttling, timeout, 5xx)."""


class HookError(TransientError):
    """A user hook raised; the delivery stays recorded and only the hook runs again on retry."""


# -- ingest answers ----------------------------------------------------------------


class DeliveryInFlightError(IngestError):
    """Another request holds a pending claim on this delivery: 503, retry later (I1)."""

    status = 503
    reason = "delivery_in_flight"


class MethodNotAllowedError(IngestError):
    """A ``GET`` to a source whose scheme has no subscription handshake: 405."""

    status = 405
    reason = "method_not_allowed"


class GateClosedError(IngestError):
    """Redis is unavailable and the gate is configured to fail closed: 503."""

    status = 503
    reason = "gate_unavailable"


class SecretInvalidError(IngestError):
    """The stored secret is not in the provider's format (``whsec_!!!!``, a key too short): a
    configuration error for the operator (``SecretInvalid`` metric); 503 so the sender retries
    once it is fixed."""

    status = 503
    reason = "secret_invalid"


class SecretUnavailableError(IngestError):
    """The secret could not be read (missing, throttled, timeout): 503, the sender retries."""

    status = 503
    reason = "secret_unavailable"


# -- replay ------------------------------------------------------------------------


class InvalidReplayRequestError(PipelineError):
    """The replay request is not valid (unknown keys, negative numbers, an empty time range...).

    The message lists every problem as ``field: reason``, one per ``;``.
    """


class QueueOperationError(PipelineError):
    """A queue call failed (the adapters translate their client errors into this)."""
