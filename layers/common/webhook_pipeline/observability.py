"""Shared observability: one Powertools Logger, Metrics (EMF) and Tracer for every function.

Service name comes from ``POWERTOOLS_SERVICE_NAME`` (one per function in the template); all
metrics go to the one namespace ``POWERTOOLS_METRICS_NAMESPACE`` (default ``WebhookPipeline``).
Handlers append ``source`` and ``delivery_id`` as logger keys so every line carries them.
Never log a secret, a full signature or a body.
"""

from __future__ import annotations

import os

from aws_lambda_powertools import Logger, Metrics, Tracer
from aws_lambda_powertools.metrics import MetricUnit, single_metric

NAMESPACE = os.environ.get("POWERTOOLS_METRICS_NAMESPACE", "WebhookPipeline")

logger = Logger()
metrics = Metrics(namespace=NAMESPACE)
# Only botocore is patched: X-Ray has no redis-py patcher, and patching everything it knows
# imports libraries (requests, httplib, sqlite3...) the functions never use, costing cold start.
tracer = Tracer(patch_modules=["botocore"])


class MetricName:
    """Metric names of the pipeline (one namespace). Alarms in template.yaml refer to these."""

    ACCEPTED = "Accepted"
    DUPLICATE_DISCARDED = "DuplicateDiscarded"
    SIGNATURE_INVALID = "SignatureInvalid"
    TIMESTAMP_REJECTED = "TimestampRejected"
    GATE_UNAVAILABLE = "GateUnavailable"
    ENQUEUE_FAILED = "EnqueueFailed"
    VERIFIED_WITH_PREVIOUS_SECRET = "VerifiedWithPreviousSecret"  # noqa: S105 - a metric name
    CLAIM_RELEASED = "ClaimReleased"
    ACK_LATENCY = "AckLatency"
    APPLIED = "Applied"
    DUPLICATE = "Duplicate"
    STALE = "Stale"
    RETRY = "Retry"
    MALFORMED = "Malformed"
    REPLAYED = "Replayed"
    PROCESSOR_BUG = "ProcessorBug"
    HOOK_FAILED = "HookFailed"
    HOOK_COMPLETED = "HookCompleted"
    SECRET_INVALID = "SecretInvalid"  # noqa: S105 - a metric name
    DUPLICATE_BODY_MISMATCH = "DuplicateBodyMismatch"
    HANDSHAKE_ANSWERED = "HandshakeAnswered"


def count(name: str, value: float = 1) -> None:
    """Add ``value`` to the count metric ``name`` (flushed by ``@metrics.log_metrics``)."""
    metrics.add_metric(name=name, unit=MetricUnit.Count, value=value)


def count_by(name: str, value: float = 1, **dimensions: str) -> None:
    """Emit the count metric ``name`` with its own ``dimensions`` right away (one EMF line), so
    the other metrics of the invocation keep theirs."""
    with single_metric(
        name=name, unit=MetricUnit.Count, value=value, namespace=NAMESPACE
    ) as metric:
        for key, dimension in dimensions.items():
            metric.add_dimension(name=key, value=dimension)


__all__ = [
    "NAMESPACE",
    "MetricName",
    "MetricUnit",
    "count",
    "count_by",
    "logger",
    "metrics",
    "tracer",
]
